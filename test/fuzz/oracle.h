// The documented contract of the public ops (docs/semantics.md, include/lazyjit/ops.h),
// restated without lib/: a call's result dtype and shape, or that it must throw Error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "number.h"
#include "lazyjit/dtype.h"

namespace lazyjit::fuzz {

using Dims = std::vector<int64_t>;

struct Meta {
  DType dtype = DType::Float32;
  Dims shape;
  bool operator==(const Meta&) const = default;
};

inline std::string meta_text(const Meta& m) { return fmt::format("{}[{}]", dtype_name(m.dtype), fmt::join(m.shape, ",")); }

/// Thrown by a rule: the documentation says the call must throw Error, because `why`.
struct Reject {
  std::string why;
};
/// Thrown by a rule: the documentation leaves the case open, either outcome passes.
struct Open {};

/// What a call should do.
struct Expect {
  enum class Verdict { Valid, Invalid, Either };
  Verdict verdict = Verdict::Either;
  Meta meta;
  std::string why;
};

/// Runs a rule (a callable returning Meta, throwing Reject or Open) into an Expect.
template <class Rule>
Expect expect(Rule&& rule) {
  try {
    return {Expect::Verdict::Valid, rule(), ""};
  } catch (const Reject& r) {
    return {Expect::Verdict::Invalid, {}, r.why};
  } catch (const Open&) {
    return {};
  }
}

/// How an elementwise op treats its promoted operands (the op table's Admits column).
enum class Family { Any, Numeric, Floating, Logical, Compare };

/// The rules, one per op; each returns the result's Meta or throws Reject or Open.
namespace contract {

// ---- shapes

inline constexpr int64_t kMaxRank = 64;
/// Element counts the documentation promises to represent; past twice this, creation throws.
inline constexpr long double kMaxElements = static_cast<long double>(std::numeric_limits<int64_t>::max() / 16);

/// User-given dims: non-negative, rank at most 64, an element count that fits (near the
/// limit, and for huge dims next to a 0, the exact cut is the library's choice).
inline void check_dims(std::span<const int64_t> dims) {
  if (static_cast<int64_t>(dims.size()) > kMaxRank) throw Reject{fmt::format("rank {} is past 64", dims.size())};
  long double nonzero = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) throw Reject{fmt::format("dim {} is negative", d)};
    empty = empty || d == 0;
    if (d != 0) nonzero *= static_cast<long double>(d);
  }
  if (!empty && nonzero > 2 * kMaxElements) throw Reject{"too many elements"};
  if (nonzero > kMaxElements / 2) throw Open{};
}

inline long double element_count(std::span<const int64_t> dims) {
  long double n = 1;
  for (int64_t d : dims) n *= static_cast<long double>(d);
  return n;
}

/// `dim` in [0, rank) from [-rank, rank).
inline int64_t wrap_dim(int64_t dim, int64_t rank) {
  if (dim < -rank || dim >= rank) throw Reject{fmt::format("dim {} is out of range for rank {}", dim, rank)};
  return dim < 0 ? dim + rank : dim;
}

inline Dims broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) throw Reject{fmt::format("dims {} and {} do not broadcast", da, db)};
    out[i] = da == 1 ? db : da;
  }
  check_dims(out);
  return out;
}

// ---- dtypes

inline DType promote(DType a, DType b) { return std::max(a, b); }
inline int category(DType d) { return is_floating(d) ? 2 : is_integral(d) ? 1 : 0; }

/// The dtype a C++ number takes next to a tensor of `tensor` (a weak scalar).
inline DType weak_dtype(Scalar::Kind kind, DType tensor) {
  switch (kind) {
    case Scalar::Kind::Bool: return tensor;
    case Scalar::Kind::Integral: return tensor == DType::Bool ? DType::Int64 : tensor;
    case Scalar::Kind::Floating: return is_floating(tensor) ? tensor : DType::Float32;
  }
  return tensor;
}

/// Whether a value whose truncation is `v` fits the integer range [lo, hi] (open at the
/// fractional edges, which the documentation does not settle).
inline void check_real_fits_integer(double v, long double lo, long double hi, DType dtype) {
  if (!std::isfinite(v)) throw Reject{fmt::format("{} does not fit {}", v, dtype_name(dtype))};
  const long double x = v;
  if (x > lo - 1 && x < hi + 1) {
    if (x >= lo && x <= hi) return;
    throw Open{};
  }
  throw Reject{fmt::format("{} does not fit {}", v, dtype_name(dtype))};
}

/// "Numbers must fit": integers in range, floats finite and in range for an integer dtype,
/// finite values in range for float32 (inf and NaN pass).
inline void check_fits(const Number& n, DType dtype) {
  if (dtype == DType::Bool || dtype == DType::Float64) return;
  const bool int32 = dtype == DType::Int32;
  const long double lo = int32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  const long double hi = int32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  if (!n.is_real()) {
    if (dtype == DType::Float32) return;
    if (n.integer < static_cast<__int128>(lo) || n.integer > static_cast<__int128>(hi)) {
      throw Reject{fmt::format("{} does not fit {}", n.text(), dtype_name(dtype))};
    }
    return;
  }
  if (dtype != DType::Float32) return check_real_fits_integer(n.real, lo, hi, dtype);
  const double max = std::numeric_limits<float>::max();
  if (!std::isfinite(n.real) || std::abs(n.real) <= max) return;
  if (std::abs(n.real) < max * (1 + 0x1p-24)) throw Open{};
  throw Reject{fmt::format("{} does not fit float32", n.real)};
}

inline DType family_dtype(Family family, DType common) {
  switch (family) {
    case Family::Any: return common;
    case Family::Numeric:
      if (common == DType::Bool) throw Reject{"bool operands are not supported"};
      return common;
    case Family::Floating: return is_floating(common) ? common : DType::Float32;
    case Family::Logical: case Family::Compare: return DType::Bool;
  }
  return common;
}

// ---- elementwise ops

inline Meta unary(Family family, const Meta& t) { return {family_dtype(family, t.dtype), t.shape}; }

inline Meta binary(Family family, const Meta& a, const Meta& b) {
  Dims shape = broadcast(a.shape, b.shape);
  return {family_dtype(family, promote(a.dtype, b.dtype)), std::move(shape)};
}

/// The dtype of number `n` next to tensor dtype `t`, after checking that it fits.
inline DType scalar_operand(const Number& n, DType t) {
  const DType weak = weak_dtype(n.kind(), t);
  check_fits(n, weak);
  return weak;
}

inline Meta binary_scalar(Family family, const Meta& t, const Number& n) {
  return {family_dtype(family, promote(t.dtype, scalar_operand(n, t.dtype))), t.shape};
}

inline Meta where(const Meta& cond, const Meta& a, const Meta& b) {
  if (cond.dtype != DType::Bool) throw Reject{"the condition is not bool"};
  Dims shape = broadcast(broadcast(cond.shape, a.shape), b.shape);
  return {promote(a.dtype, b.dtype), std::move(shape)};
}

inline Meta where_scalar(const Meta& cond, const Meta& t, const Number& n) {
  if (cond.dtype != DType::Bool) throw Reject{"the condition is not bool"};
  return {promote(t.dtype, scalar_operand(n, t.dtype)), broadcast(cond.shape, t.shape)};
}

inline Meta clamp(const Meta& t, const Number& lo, const Number& hi) {
  const DType common = promote(t.dtype, promote(scalar_operand(lo, t.dtype), scalar_operand(hi, t.dtype)));
  return {family_dtype(Family::Numeric, common), t.shape};
}

// ---- reductions, normalisation, matmul

enum class Fold { Sum, Mean, Amax, Amin };

/// The folded dims: all when `dims` is empty; a rank-0 tensor folds dim 0 or -1 into itself.
inline Dims folded_dims(const Dims& dims, int64_t rank) {
  Dims out;
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, std::max<int64_t>(rank, 1)));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) throw Reject{"a dim is named twice"};
  return rank == 0 ? Dims{} : out;
}

inline Dims reduced_shape(const Dims& shape, const Dims& folded, bool keepdim) {
  Dims out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const bool gone = std::binary_search(folded.begin(), folded.end(), d);
    if (!gone) out.push_back(shape[d]);
    if (gone && keepdim) out.push_back(1);
  }
  return out;
}

inline Meta reduce(Fold fold, const Meta& t, const Dims& dims, bool keepdim) {
  if (fold == Fold::Mean && !is_floating(t.dtype)) throw Reject{"mean needs a float dtype"};
  const Dims folded = folded_dims(dims, static_cast<int64_t>(t.shape.size()));
  for (int64_t d : folded) {
    if ((fold == Fold::Amax || fold == Fold::Amin) && t.shape[d] == 0) throw Reject{"an empty dim has no extremum"};
  }
  const DType dtype = fold == Fold::Sum && !is_floating(t.dtype) ? DType::Int64 : t.dtype;
  return {dtype, reduced_shape(t.shape, folded, keepdim)};
}

inline Meta argmax(const Meta& t, int64_t dim, bool keepdim) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  if (t.dtype == DType::Bool) {
    if (rank == 0) throw Open{};
    throw Reject{"argmax of bool"};
  }
  if (rank == 0) {
    wrap_dim(dim, 1);
    return {DType::Int64, {}};
  }
  const int64_t d = wrap_dim(dim, rank);
  if (t.shape[d] == 0) throw Reject{"argmax of an empty dim"};
  return {DType::Int64, reduced_shape(t.shape, {d}, keepdim)};
}

inline Meta softmax(const Meta& t, int64_t dim) {
  wrap_dim(dim, std::max<int64_t>(static_cast<int64_t>(t.shape.size()), 1));
  return {is_floating(t.dtype) ? t.dtype : DType::Float32, t.shape};
}

/// layer_norm over the last `ndim` dims; `gamma` and `beta` (null: undefined) must have
/// exactly those dims. Their dtype, when it differs from x's, promotes (not documented: Open).
inline Meta layer_norm(const Meta& x, int64_t ndim, const Meta* gamma, const Meta* beta) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (ndim < 1 || ndim > rank) throw Reject{fmt::format("normalized_ndim {} is not in [1, {}]", ndim, rank)};
  if (!is_floating(x.dtype)) throw Reject{"layer_norm needs a float dtype"};
  const Dims normalized(x.shape.end() - ndim, x.shape.end());
  for (const Meta* p : {gamma, beta}) {
    if (p != nullptr && p->shape != normalized) throw Reject{"gamma or beta does not have the normalized shape"};
  }
  for (const Meta* p : {gamma, beta}) {
    if (p != nullptr && p->dtype != x.dtype) throw Open{};
  }
  return x;
}

inline Meta matmul(const Meta& a, const Meta& b) {
  if (a.shape.empty() || b.shape.empty()) throw Reject{"matmul of a rank-0 tensor"};
  const DType dtype = promote(a.dtype, b.dtype);
  if (dtype == DType::Bool) throw Reject{"matmul of bool"};
  Dims x = a.shape, y = b.shape;
  if (x.size() == 1) x.insert(x.begin(), 1);
  if (y.size() == 1) y.push_back(1);
  if (x.back() != y[y.size() - 2]) throw Reject{"inner dims differ"};
  Dims out = broadcast(Dims(x.begin(), x.end() - 2), Dims(y.begin(), y.end() - 2));
  if (a.shape.size() > 1) out.push_back(x[x.size() - 2]);
  if (b.shape.size() > 1) out.push_back(y.back());
  check_dims(out);
  return {dtype, out};
}

// ---- views

inline Meta reshape(const Meta& t, Dims shape) {
  const auto minus = std::count(shape.begin(), shape.end(), -1);
  if (minus > 1) throw Reject{"two -1 dims"};
  long double known = 1;
  for (int64_t d : shape) {
    if (d < -1) throw Reject{"a negative dim"};
    if (d != -1) known *= static_cast<long double>(d);
  }
  const long double n = element_count(t.shape);
  if (minus == 1) {
    if (known == 0 || std::fmod(n, known) != 0) throw Reject{"-1 cannot be inferred"};
    *std::find(shape.begin(), shape.end(), -1) = static_cast<int64_t>(n / known);
  }
  check_dims(shape);
  if (element_count(shape) != n) throw Reject{"the element count differs"};
  return {t.dtype, shape};
}

inline Meta permute(const Meta& t, const Dims& dims) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  if (static_cast<int64_t>(dims.size()) != rank) throw Reject{"permute needs one dim per dim"};
  Dims out;
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank);
    if (seen[w]) throw Reject{"not a permutation"};
    seen[w] = true;
    out.push_back(t.shape[w]);
  }
  return {t.dtype, out};
}

inline Meta transpose(const Meta& t, int64_t d0, int64_t d1) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  const int64_t a = wrap_dim(d0, std::max<int64_t>(rank, 1)), b = wrap_dim(d1, std::max<int64_t>(rank, 1));
  Dims out = t.shape;
  if (rank > 0) std::swap(out[a], out[b]);
  return {t.dtype, out};
}

inline Meta expand(const Meta& t, Dims shape) {
  if (shape.size() < t.shape.size()) throw Reject{"expand to fewer dims"};
  const size_t offset = shape.size() - t.shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1 && d < offset) throw Reject{"-1 for a new dim"};
    if (shape[d] == -1) shape[d] = t.shape[d - offset];
    if (d >= offset && t.shape[d - offset] != 1 && t.shape[d - offset] != shape[d]) throw Reject{"dims differ"};
  }
  check_dims(shape);
  return {t.dtype, shape};
}

inline Meta slice(const Meta& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (t.shape.empty()) throw Reject{"slice of a rank-0 tensor"};
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(t.shape.size()));
  if (step <= 0) throw Reject{"step must be positive"};
  const __int128 size = t.shape[d];
  auto clamp = [&](__int128 v) { return std::clamp<__int128>(v < 0 ? v + size : v, 0, size); };
  const __int128 lo = clamp(start), hi = std::max(clamp(end), lo);
  Dims out = t.shape;
  out[d] = static_cast<int64_t>((hi - lo + step - 1) / step);
  return {t.dtype, out};
}

inline Meta index_select(const Meta& t, int64_t dim, int64_t count) {
  if (t.shape.empty()) throw Reject{"index_select of a rank-0 tensor"};
  Dims out = t.shape;
  out[wrap_dim(dim, static_cast<int64_t>(t.shape.size()))] = count;
  return {t.dtype, out};
}

inline Meta gather(const Meta& t, int64_t dim, const Dims& index) {
  if (t.shape.empty()) throw Reject{"gather of a rank-0 tensor"};
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(t.shape.size()));
  if (index.size() != t.shape.size()) throw Reject{"gather index of another rank"};
  for (size_t k = 0; k < index.size(); ++k) {
    if (static_cast<int64_t>(k) != d && index[k] > t.shape[k]) throw Reject{"gather index larger than the input"};
  }
  return {t.dtype, index};
}

inline Meta one_hot(const Dims& shape, int64_t classes) {
  Dims out = shape;
  out.push_back(classes);
  check_dims(out);
  return {DType::Int64, out};
}

inline Meta cat(std::span<const Meta> parts, int64_t dim) {
  if (parts.empty()) throw Reject{"cat of nothing"};
  const Dims& first = parts[0].shape;
  if (first.empty()) throw Reject{"cat of rank-0 tensors"};
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(first.size()));
  Meta out = parts[0];
  for (const Meta& p : parts.subspan(1)) {
    if (p.shape.size() != first.size()) throw Reject{"cat of different ranks"};
    for (size_t k = 0; k < first.size(); ++k) {
      if (static_cast<int64_t>(k) != d && p.shape[k] != first[k]) throw Reject{"cat of different dims"};
    }
    out.shape[d] += p.shape[d];
    out.dtype = promote(out.dtype, p.dtype);
  }
  check_dims(out.shape);
  return out;
}

inline Meta squeeze(const Meta& t, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  const int64_t d = wrap_dim(dim, std::max<int64_t>(rank, 1));
  Meta out = t;
  if (rank > 0 && t.shape[d] == 1) out.shape.erase(out.shape.begin() + d);
  return out;
}

inline Meta unsqueeze(const Meta& t, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(t.shape.size());
  const int64_t d = wrap_dim(dim, rank + 1);
  Meta out = t;
  out.shape.insert(out.shape.begin() + d, 1);
  check_dims(out.shape);
  return out;
}

// ---- creation and in-place updates

inline Meta full(const Dims& shape, const Number& n, DType dtype) {
  check_dims(shape);
  check_fits(n, dtype);
  return {dtype, shape};
}

inline Meta arange(int64_t n, DType dtype) {
  if (n < 0) throw Reject{"arange of a negative count"};
  if (dtype == DType::Bool) throw Reject{"arange of bool"};
  if (dtype == DType::Int32 && n - 1 > std::numeric_limits<int32_t>::max()) throw Reject{"the last value is past int32"};
  check_dims(Dims{n});
  return {dtype, {n}};
}

inline Meta random(const Dims& shape, DType dtype) {
  if (!is_floating(dtype)) throw Reject{"rand of a non-float dtype"};
  check_dims(shape);
  return {dtype, shape};
}

/// `self op= ...` whose out-of-place result is `result`: shape and dtype category must stay.
inline Meta in_place(const Meta& self, const Meta& result) {
  if (result.shape != self.shape) throw Reject{"the result has another shape"};
  if (category(result.dtype) > category(self.dtype)) throw Reject{"the result cannot be stored in place"};
  return self;
}

inline Meta copy_into(const Meta& self, const Meta& src) {
  if (broadcast(self.shape, src.shape) != self.shape) throw Reject{"the source does not broadcast to the tensor"};
  return self;
}

}  // namespace contract
}  // namespace lazyjit::fuzz
