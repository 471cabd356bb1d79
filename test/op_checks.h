// What the op tests share: seeded random tensors, the comparison of a pending tensor with the
// reference interpreter, and the check of an error's exact message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/interpreter.h"
#include "lazyjit/lazyjit.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {

using Shape = std::vector<int64_t>;

inline constexpr DType kAll[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
inline constexpr DType kNumeric[] = {DType::Int32, DType::Int64, DType::Float32, DType::Float64};
inline constexpr DType kFloats[] = {DType::Float32, DType::Float64};

/// A materialised tensor of `shape` with seeded values in [-4, 4] (bool: random; ints: small).
inline Tensor random_tensor(std::mt19937& rng, const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<double> value(-4, 4);
  std::vector<double> v(n);
  for (double& x : v) x = value(rng);
  Tensor t;
  switch (dtype) {
    case DType::Bool: {
      std::vector<bool> b;
      for (double x : v) b.push_back(x > 0);
      t = Tensor::from_vector<bool>(b, shape);
      break;
    }
    case DType::Int32: {
      std::vector<int32_t> i(v.begin(), v.end());
      t = Tensor::from_vector<int32_t>(i, shape);
      break;
    }
    case DType::Int64: {
      std::vector<int64_t> i(v.begin(), v.end());
      t = Tensor::from_vector<int64_t>(i, shape);
      break;
    }
    case DType::Float32: t = Tensor::from_vector<float>(std::vector<float>(v.begin(), v.end()), shape); break;
    case DType::Float64: t = Tensor::from_vector<double>(v, shape); break;
  }
  sync({t});
  return t;
}

/// Compares `t` (pending) as the runtime computes it with the interpreter's value of its
/// graph. Floats: |got - want| <= rtol * (|want| + scale), scale covering sums of `terms`.
inline void expect_matches(const Tensor& t, const std::string& context, int64_t terms = 1) {
  const ir::NodePtr root = t.impl()->ir_value();
  const std::vector<ir::HostTensor> expected = ir::interpret(ir::build_graph(std::vector<ir::NodePtr>{root}));
  Tensor result = t;
  sync({result});
  const BackendData& data = *result.impl()->data();
  ASSERT_EQ(data.dtype(), expected[0].dtype) << context;
  ASSERT_EQ(std::vector<int64_t>(data.shape().begin(), data.shape().end()),
            std::vector<int64_t>(expected[0].shape.begin(), expected[0].shape.end()))
      << context;
  ir::HostTensor got{data.dtype(), expected[0].shape, {}};
  got.bytes.resize(static_cast<size_t>(data.size_bytes()));
  if (!got.bytes.empty()) std::memcpy(got.bytes.data(), data.data(), got.bytes.size());
  const double rtol = data.dtype() == DType::Float32 ? 3e-5 : 1e-12;
  const double scale = 4.0 * std::sqrt(static_cast<double>(std::max<int64_t>(terms, 1)));
  int reported = 0;
  for (int64_t i = 0; i < got.numel() && reported < 5; ++i) {
    const double g = got.as_double(i), w = expected[0].as_double(i);
    bool ok = g == w || (std::isnan(g) && std::isnan(w));
    if (!ok && is_floating(data.dtype())) ok = std::abs(g - w) <= rtol * (std::abs(w) + scale);
    if (!ok) {
      ADD_FAILURE() << context << " element " << i << ": kernel " << g << ", interpreter " << w;
      ++reported;
    }
  }
}

inline Shape random_shape(std::mt19937& rng, int rank) {
  static constexpr int64_t kSizes[] = {0, 1, 1, 2, 3, 5, 7, 16, 33};
  Shape shape;
  for (int d = 0; d < rank; ++d) shape.push_back(kSizes[rng() % std::size(kSizes)]);
  return shape;
}

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline void expect_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

}  // namespace lazyjit
