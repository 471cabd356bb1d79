// The fuzzer's calls that move or fold dims: reductions, softmax, layer_norm, matmul and the
// views, with random dims, sizes and bounds (negative, out of range, huge, zero).
#pragma once

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "calls.h"
#include "fmt/ranges.h"

namespace lazyjit::fuzz {

inline int64_t element_count_of(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- reductions

inline void gen_reduce(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Meta in = p.meta(a);
  const contract::Fold fold = r.pick({contract::Fold::Sum, contract::Fold::Mean, contract::Fold::Amax,
                                      contract::Fold::Amin});
  const char* names[] = {"sum", "mean", "amax", "amin"};
  const Dims dims = random_dim_list(r, static_cast<int64_t>(in.shape.size()));
  const bool keepdim = r.chance(0.4);
  Call c = make_call(
      fmt::format("lazyjit::{}({}, {}, {})", names[static_cast<int>(fold)], p.name(a), dims_text(dims), keepdim),
      {a},
      [=](const Args& x) {
        switch (fold) {
          case contract::Fold::Sum: return sum(x[0], dims, keepdim);
          case contract::Fold::Mean: return mean(x[0], dims, keepdim);
          case contract::Fold::Amax: return amax(x[0], dims, keepdim);
          case contract::Fold::Amin: return amin(x[0], dims, keepdim);
        }
        return Tensor();
      },
      expect([&] { return contract::reduce(fold, in, dims, keepdim); }),
      fold == contract::Fold::Amax || fold == contract::Fold::Amin ? Numerics::Exact : Numerics::Rounds);
  const int64_t out = element_count_of(c.expect.meta.shape);
  if (fold == contract::Fold::Sum && out > 0) c.growth = static_cast<double>(element_count_of(in.shape) / out);
  p.apply(std::move(c));
}

inline void gen_argmax(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Meta in = p.meta(a);
  const int64_t dim = random_dim(r, static_cast<int64_t>(in.shape.size()));
  const bool keepdim = r.chance(0.4);
  p.apply(make_call(fmt::format("lazyjit::argmax({}, {}, {})", p.name(a), dim, keepdim), {a},
                    [=](const Args& x) { return argmax(x[0], dim, keepdim); },
                    expect([&] { return contract::argmax(in, dim, keepdim); }), Numerics::Steps));
}

inline void gen_softmax(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Meta in = p.meta(a);
  const int64_t dim = random_dim(r, static_cast<int64_t>(in.shape.size()));
  const bool log = r.chance(0.5);
  p.apply(make_call(fmt::format("lazyjit::{}({}, {})", log ? "log_softmax" : "softmax", p.name(a), dim), {a},
                    [=](const Args& x) { return log ? log_softmax(x[0], dim) : softmax(x[0], dim); },
                    expect([&] { return contract::softmax(in, dim); }), Numerics::Rounds));
}

/// gamma or beta for a layer_norm of `x` over `ndim` dims: undefined (-1), a new leaf of the
/// normalized shape, or now and then of another shape.
inline int affine_operand(Program& p, const Dims& x, int64_t ndim, DType dtype) {
  Rng& r = p.rng();
  if (r.chance(0.35)) return -1;
  Dims shape(x.end() - std::clamp<int64_t>(ndim, 0, static_cast<int64_t>(x.size())), x.end());
  if (r.chance(0.1)) shape.push_back(2);
  return make_leaf(p, r.chance(0.85) ? dtype : random_dtype(r), shape);
}

inline void gen_layer_norm(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Dims shape = p.meta(a).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t ndim = r.chance(0.9) ? r.range(1, std::max<int64_t>(rank, 1)) : r.pick<int64_t>({0, rank + 1, -1});
  const int g = affine_operand(p, shape, ndim, p.meta(a).dtype);
  const int b = affine_operand(p, shape, ndim, p.meta(a).dtype);
  if (p.failed()) return;
  std::vector<int> inputs = {a};
  for (int s : {g, b}) {
    if (s >= 0) inputs.push_back(s);
  }
  const bool has_g = g >= 0, has_b = b >= 0;
  // Not below 1e-5: a constant input's variance is 0 or a rounding residue, whichever the
  // sum's order gives, and 1/sqrt(eps) amplifies the residue (eps 0: NaN or finite, seed
  // 0x18eadca4d7527d18; eps 1e-7: 2e-4 off, seed 0x18eae5f643543531).
  const double eps = r.pick({1e-5, 1e-3, 1e-4});
  Call c = make_call(fmt::format("lazyjit::layer_norm({}, {}, {}, {}, {})", p.name(a), ndim,
                                 has_g ? p.name(g) : "Tensor()", has_b ? p.name(b) : "Tensor()", eps),
                     inputs,
                     [=](const Args& x) {
                       return layer_norm(x[0], ndim, has_g ? x[1] : Tensor(), has_b ? x[has_g ? 2 : 1] : Tensor(),
                                         eps);
                     },
                     expect([&] {
                       const Meta mg = has_g ? p.meta(g) : Meta{}, mb = has_b ? p.meta(b) : Meta{};
                       return contract::layer_norm(p.meta(a), ndim, has_g ? &mg : nullptr, has_b ? &mb : nullptr);
                     }),
                     Numerics::Rounds);
  c.amplifies = true;
  p.apply(std::move(c));
}

// ---- matmul

/// A right operand for a left operand of shape `a`: [..., K, N] or [K] (broadcastable batch).
inline Dims matmul_operand_shape(Rng& r, const Dims& a) {
  const int64_t k = a.empty() ? random_size(r) : a.back();
  const int64_t rank = r.range(1, 4);
  if (rank == 1) return {k};
  Dims batch;
  if (a.size() > 2) batch = compatible_shape(r, Dims(a.begin(), a.end() - 2));
  while (static_cast<int64_t>(batch.size()) > rank - 2) batch.erase(batch.begin());
  batch.push_back(k);
  batch.push_back(random_size(r));
  return batch;
}

inline void gen_matmul(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  int b = p.pick();
  if (r.chance(0.8)) {
    const DType dtype = r.chance(0.2) ? random_dtype(r) : p.meta(a).dtype;
    b = make_leaf(p, dtype, matmul_operand_shape(r, p.meta(a).shape));
    if (b < 0 || p.failed()) return;
  }
  Call c = make_call(fmt::format("lazyjit::matmul({}, {})", p.name(a), p.name(b)), {a, b},
                     [](const Args& x) { return matmul(x[0], x[1]); },
                     expect([&] { return contract::matmul(p.meta(a), p.meta(b)); }), Numerics::Rounds);
  const Dims& sa = p.meta(a).shape;
  const double k = sa.empty() ? 1 : static_cast<double>(std::max<int64_t>(sa.back(), 1));
  c.growth = k * std::max(1.0, std::min(p.magnitude(a), p.magnitude(b)));
  p.apply(std::move(c));
}

// ---- views

/// Random dims whose product is `n` (a 0 among them when n is 0), rank 0 to 4.
inline Dims factorise(Rng& r, int64_t n) {
  const int64_t rank = n == 1 ? r.range(0, 4) : r.range(1, 4);
  Dims dims(static_cast<size_t>(rank), 1);
  if (n == 0) {
    for (int64_t& d : dims) d = r.range(0, 3);
    dims[static_cast<size_t>(r.range(0, rank - 1))] = 0;
    return dims;
  }
  for (int64_t f = 2; n > 1; ++f) {
    while (n % f == 0) {
      dims[static_cast<size_t>(r.range(0, rank - 1))] *= f;
      n /= f;
    }
  }
  return dims;
}

inline Dims reshape_target(Rng& r, const Dims& shape) {
  const int64_t n = element_count_of(shape);
  Dims target = factorise(r, n);
  if (!target.empty() && r.chance(0.3)) target[static_cast<size_t>(r.range(0, target.size() - 1))] = -1;
  if (!r.chance(0.12)) return target;
  switch (r.range(0, 4)) {
    case 0: target.push_back(2); return target;
    case 1: target.push_back(-1); target.push_back(-1); return target;
    case 2: target.push_back(-3); return target;
    case 3: return {-1, int64_t{1} << 40, int64_t{1} << 40};
    default: return Dims(static_cast<size_t>(r.pick<int64_t>({64, 65})), n == 1 ? 1 : -1);
  }
}

inline void gen_reshape(Program& p) {
  const int a = p.pick();
  const Dims target = reshape_target(p.rng(), p.meta(a).shape);
  p.apply(make_call(fmt::format("lazyjit::reshape({}, {})", p.name(a), dims_text(target)), {a},
                    [=](const Args& x) { return reshape(x[0], target); },
                    expect([&] { return contract::reshape(p.meta(a), target); })));
}

inline void gen_transpose(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const int64_t rank = static_cast<int64_t>(p.meta(a).shape.size());
  const int64_t d0 = random_dim(r, rank), d1 = random_dim(r, rank);
  p.apply(make_call(fmt::format("lazyjit::transpose({}, {}, {})", p.name(a), d0, d1), {a},
                    [=](const Args& x) { return transpose(x[0], d0, d1); },
                    expect([&] { return contract::transpose(p.meta(a), d0, d1); })));
}

inline Dims random_permutation(Rng& r, int64_t rank) {
  Dims perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t i = rank - 1; i > 0; --i) std::swap(perm[i], perm[r.range(0, i)]);
  for (int64_t& d : perm) d = r.chance(0.3) ? d - rank : d;
  if (r.chance(0.1)) {
    if (rank > 1 && r.chance(0.5)) perm[0] = perm[1];
    else perm.push_back(r.range(-1, rank));
  }
  return perm;
}

inline void gen_permute(Program& p) {
  const int a = p.pick();
  const Dims perm = random_permutation(p.rng(), static_cast<int64_t>(p.meta(a).shape.size()));
  p.apply(make_call(fmt::format("lazyjit::permute({}, {})", p.name(a), dims_text(perm)), {a},
                    [=](const Args& x) { return permute(x[0], perm); },
                    expect([&] { return contract::permute(p.meta(a), perm); })));
}

inline Dims expand_target(Rng& r, const Dims& shape) {
  Dims target;
  for (int64_t i = r.range(0, 2); i > 0; --i) target.push_back(r.range(0, 3));
  for (int64_t d : shape) target.push_back(r.chance(0.2) ? -1 : d == 1 ? r.range(0, 4) : d);
  if (!r.chance(0.12) || target.empty()) return target;
  const size_t i = static_cast<size_t>(r.range(0, target.size() - 1));
  switch (r.range(0, 3)) {
    case 0: target[i] += 1; return target;
    case 1: target[i] = -2; return target;
    case 2: target.insert(target.begin(), -1); return target;
    default: target.insert(target.begin(), {int64_t{1} << r.range(20, 40), int64_t{1} << 30}); return target;
  }
}

inline void gen_expand(Program& p) {
  const int a = p.pick();
  const Dims target = expand_target(p.rng(), p.meta(a).shape);
  p.apply(make_call(fmt::format("lazyjit::expand({}, {})", p.name(a), dims_text(target)), {a},
                    [=](const Args& x) { return expand(x[0], target); },
                    expect([&] { return contract::expand(p.meta(a), target); })));
}

inline int64_t slice_bound(Rng& r, int64_t size) {
  if (r.chance(0.75)) return r.range(-size - 2, size + 2);
  return r.pick<int64_t>({0, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                          -(int64_t{1} << 62), int64_t{1} << 62});
}

inline int64_t slice_step(Rng& r, int64_t size) {
  if (r.chance(0.5)) return 1;
  if (r.chance(0.8)) return r.range(2, std::max<int64_t>(size + 1, 2));
  return r.pick<int64_t>({0, -1, int64_t{1} << 62, std::numeric_limits<int64_t>::max()});
}

/// A random dim of `shape` (some negative, some out of range) and, when it is in range, its
/// position.
struct PickedDim {
  int64_t dim;
  std::optional<size_t> at;
};
inline PickedDim pick_dim(Rng& r, const Dims& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t dim = random_dim(r, rank);
  if (dim < -rank || dim >= rank) return {dim, std::nullopt};
  return {dim, static_cast<size_t>(dim < 0 ? dim + rank : dim)};
}

inline void gen_slice(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Dims& shape = p.meta(a).shape;
  const auto [dim, at] = pick_dim(r, shape);
  const int64_t size = at ? shape[*at] : 3;
  const int64_t start = slice_bound(r, size), end = slice_bound(r, size), step = slice_step(r, size);
  p.apply(make_call(fmt::format("lazyjit::slice({}, {}, {}, {}, {})", p.name(a), dim, Number::integer_text(start),
                                Number::integer_text(end), Number::integer_text(step)),
                    {a}, [=](const Args& x) { return slice(x[0], dim, start, end, step); },
                    expect([&] { return contract::slice(p.meta(a), dim, start, end, step); })));
}

/// Indices within the dim (repeated, out of order, none): an index out of range is a run-time
/// error, which the indexing tests check.
inline void gen_index_select(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Dims& shape = p.meta(a).shape;
  const auto [dim, at] = pick_dim(r, shape);
  const int64_t size = at ? shape[*at] : 3;
  std::vector<int64_t> index(size > 0 ? static_cast<size_t>(r.range(0, 4)) : 0);
  for (int64_t& i : index) i = r.range(0, size - 1);
  const bool narrow = r.chance(0.5);
  const int64_t n = static_cast<int64_t>(index.size());
  p.apply(make_call(fmt::format("lazyjit::index_select({}, {}, Tensor::from_vector<{}>({{{}}}, {{{}}}))", p.name(a), dim,
                                narrow ? "int32_t" : "int64_t", fmt::join(index, ", "), n),
                    {a},
                    [=](const Args& x) {
                      const Tensor i = narrow ? Tensor::from_vector<int32_t>(std::vector<int32_t>(index.begin(), index.end()), {n})
                                              : Tensor::from_vector<int64_t>(index, {n});
                      return index_select(x[0], dim, i);
                    },
                    expect([&] { return contract::index_select(p.meta(a), dim, n); })));
}

/// An index no larger than the input outside dim (sometimes larger, or of another rank: a
/// rejected call), with values within the dim.
inline void gen_gather(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Dims& shape = p.meta(a).shape;
  const auto [dim, at] = pick_dim(r, shape);
  Dims index_shape = shape;
  for (size_t k = 0; k < shape.size(); ++k) {
    index_shape[k] = at == k ? r.range(0, 3) : r.range(0, shape[k] + (r.chance(0.05) ? 1 : 0));
  }
  if (r.chance(0.05)) index_shape.push_back(1);
  const int64_t size = at ? shape[*at] : 0;
  std::vector<int64_t> index(static_cast<size_t>(size > 0 ? element_count_of(index_shape) : 0));
  for (int64_t& i : index) i = r.range(0, size - 1);
  if (size == 0) std::fill(index_shape.begin(), index_shape.end(), 0);
  const std::vector<int64_t> dims(index_shape.begin(), index_shape.end());
  p.apply(make_call(fmt::format("lazyjit::gather({}, {}, Tensor::from_vector<int64_t>({{{}}}, {}))", p.name(a), dim,
                                fmt::join(index, ", "), dims_text(index_shape)),
                    {a}, [=](const Args& x) { return gather(x[0], dim, Tensor::from_vector<int64_t>(index, dims)); },
                    expect([&] { return contract::gather(p.meta(a), dim, index_shape); })));
}

/// Classes within [0, n) of a random shape, combined with a picked value of that shape when
/// one fits (the one-hot rows then flow into the rest of the program).
inline void gen_one_hot(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  Dims shape = p.meta(a).shape;
  if (element_count_of(shape) > 4096) shape = {r.range(0, 8)};  // (a huge value's shape: not its size)
  const int64_t n = r.range(1, 5);
  std::vector<int64_t> classes(static_cast<size_t>(element_count_of(shape)));
  for (int64_t& c : classes) c = r.range(0, n - 1);
  const std::vector<int64_t> dims(shape.begin(), shape.end());
  p.apply(make_call(fmt::format("lazyjit::one_hot(Tensor::from_vector<int64_t>({{{}}}, {}), {})", fmt::join(classes, ", "),
                                dims_text(shape), n),
                    {}, [=](const Args&) { return one_hot(Tensor::from_vector<int64_t>(classes, dims), n); },
                    expect([&] { return contract::one_hot(shape, n); })));
}

inline void gen_cat(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const Dims shape = p.meta(a).shape;
  const int64_t dim = random_dim(r, static_cast<int64_t>(shape.size()));
  std::vector<int> parts = {a};
  for (int64_t k = r.range(0, 2); k > 0 && !p.failed(); --k) {
    Dims s = shape;
    if (!s.empty()) s[static_cast<size_t>(r.range(0, s.size() - 1))] = r.range(0, 3);
    const int slot = r.chance(0.15) ? p.pick() : make_leaf(p, r.chance(0.7) ? p.meta(a).dtype : random_dtype(r), s);
    if (slot >= 0) parts.push_back(slot);
  }
  if (p.failed()) return;
  const bool none = r.chance(0.03);
  if (none) parts.clear();
  std::string names;
  for (int s : parts) names += (names.empty() ? "" : ", ") + p.name(s);
  p.apply(make_call(fmt::format("lazyjit::cat({{{}}}, {})", names, dim), parts,
                    [=](const Args& x) { return cat(x, dim); }, expect([&] {
                      std::vector<Meta> metas;
                      for (int s : parts) metas.push_back(p.meta(s));
                      return contract::cat(metas, dim);
                    })));
}

inline void gen_squeeze(Program& p) {
  Rng& r = p.rng();
  const int a = p.pick();
  const int64_t rank = static_cast<int64_t>(p.meta(a).shape.size());
  const bool un = r.chance(0.5);
  const int64_t dim = random_dim(r, un ? rank + 1 : rank);
  p.apply(make_call(fmt::format("lazyjit::{}({}, {})", un ? "unsqueeze" : "squeeze", p.name(a), dim), {a},
                    [=](const Args& x) { return un ? unsqueeze(x[0], dim) : squeeze(x[0], dim); },
                    expect([&] { return un ? contract::unsqueeze(p.meta(a), dim) : contract::squeeze(p.meta(a), dim); })));
}

}  // namespace lazyjit::fuzz
