// Host-side reference values: a traced call over host copies of its inputs, evaluated by the
// reference interpreter, and the comparison of materialised tensors with them.
#pragma once

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "fmt/format.h"
#include "oracle.h"
#include "ir/dtype_dispatch.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "lazyjit/lazyjit.h"
#include "runtime/tensor_impl.h"

namespace lazyjit::fuzz {

/// How closely a kernel's result must match its reference. Exact: kernels and interpreter
/// round the same way (integer results bit for bit). Close: some op on the way rounds
/// differently (libmvec, summation order, FMA), so floats agree to a tolerance. Unknown: a
/// comparison, integer conversion or overflow of a Close value may land either way.
enum class Trust { Exact, Close, Unknown };

inline const char* trust_name(Trust t) { return t == Trust::Exact ? "exact" : t == Trust::Close ? "close" : "unknown"; }

template <class T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class T>
T element(const ir::HostTensor& t, int64_t i) {
  Storage<T> v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(v), sizeof(v));
  return static_cast<T>(v);
}

inline Meta meta_of(const ir::HostTensor& t) { return {t.dtype, Dims(t.shape.begin(), t.shape.end())}; }
inline Meta meta_of(const Tensor& t) { return {t.dtype(), t.shape()}; }

/// A new materialised tensor holding `host`'s elements.
inline Tensor tensor_of(const ir::HostTensor& host) {
  return ir::dispatch_dtype(host.dtype, [&]<class T>(T) {
    std::vector<T> values(static_cast<size_t>(host.numel()));
    for (int64_t i = 0; i < host.numel(); ++i) values[i] = element<T>(host, i);
    return Tensor::from_vector(values, Dims(host.shape.begin(), host.shape.end()));
  });
}

/// `t`'s elements, read through the public API (which materialises a pending tensor).
inline ir::HostTensor read_back(const Tensor& t) {
  const std::vector<int64_t> shape = t.shape();
  ir::HostTensor host{t.dtype(), ir::Shape(shape.begin(), shape.end()), {}};
  host.bytes.resize(static_cast<size_t>(host.numel() * dtype_size(host.dtype)));
  ir::dispatch_dtype(host.dtype, [&]<class T>(T) {
    const std::vector<T> values = t.to_vector<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      const Storage<T> v = static_cast<Storage<T>>(values[i]);
      std::memcpy(host.bytes.data() + i * sizeof(v), &v, sizeof(v));
    }
  });
  return host;
}

/// The value of a tensor traced over materialised inputs: the reference interpreter's, when
/// it is pending (never compiled); its data otherwise.
inline ir::HostTensor interpret(const Tensor& t) {
  if (ir::NodePtr node = t.impl()->ir()) {
    const ir::NodePtr roots[] = {node};
    return ir::interpret(ir::build_graph(roots))[0];
  }
  return read_back(t);
}

/// The largest finite magnitude among the elements (0 when there is none).
inline double max_magnitude(const ir::HostTensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = std::abs(t.as_double(i));
    if (std::isfinite(v)) m = std::max(m, v);
  }
  return m;
}

/// How a kernel's result is compared with its reference.
struct Accuracy {
  Trust trust = Trust::Exact;
  double scale = 0;  ///< Close: the magnitudes whose rounding errors may add up in it
  double rtol = 0;   ///< Close: the relative error of the least precise float on the way
};

/// The relative error a Close value of `dtype` may carry.
inline double close_rtol(DType dtype) { return dtype == DType::Float32 ? 1e-4 : 1e-9; }

/// Whether element `i` of a kernel result matches the reference. Exact: integers bit for bit,
/// floats within 2e-5 (float32) or 1e-12 (float64) relative, NaN only as NaN, zero signs equal.
/// Close: within `rtol` of the magnitudes involved; an overflow to infinity matches a value
/// near the dtype's maximum.
inline bool element_matches(const ir::HostTensor& got, const ir::HostTensor& want, int64_t i, const Accuracy& a) {
  if (!is_floating(want.dtype)) {
    const size_t size = static_cast<size_t>(dtype_size(want.dtype));
    return std::memcmp(got.bytes.data() + i * size, want.bytes.data() + i * size, size) == 0;
  }
  const double g = got.as_double(i), w = want.as_double(i);
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
  const bool f32 = want.dtype == DType::Float32;
  if (a.trust == Trust::Exact) {
    if (g == w) return std::signbit(g) == std::signbit(w);
    if (std::isinf(g) || std::isinf(w)) return false;
    return std::abs(g - w) <= (f32 ? 2e-5 : 1e-12) * (1 + std::abs(w));
  }
  if (g == w) return true;
  const double max = f32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  if (std::isinf(g) || std::isinf(w)) return std::min(std::abs(g), std::abs(w)) > max / 4 && (g > 0) == (w > 0);
  return std::abs(g - w) <= a.rtol * (1e-6 + std::abs(w) + a.scale);
}

/// The first few elements where `got` differs from `want`, as text; empty when they match.
inline std::string mismatches(const ir::HostTensor& got, const ir::HostTensor& want, const Accuracy& a) {
  if (got.dtype != want.dtype || got.shape != want.shape) {
    return fmt::format("result is {}, reference is {}", meta_text(meta_of(got)), meta_text(meta_of(want)));
  }
  std::string text;
  int reported = 0;
  for (int64_t i = 0; i < got.numel() && reported < 4; ++i) {
    if (element_matches(got, want, i, a)) continue;
    text += fmt::format("{}element {}: got {}, reference {}", reported++ ? "; " : "", i, got.as_double(i),
                        want.as_double(i));
  }
  if (!text.empty()) text += fmt::format(" ({} comparison, scale {}, rtol {})", trust_name(a.trust), a.scale, a.rtol);
  return text;
}

}  // namespace lazyjit::fuzz
