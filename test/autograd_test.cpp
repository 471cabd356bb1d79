// Reverse-mode autograd: every row of the op table has a gradient rule or says why it has none,
// and every rule is checked against central differences in float64 on seeded random shapes
// (and its backward graph against the reference interpreter); the errors a user can make;
// backward() accumulation; laziness; an MLP's gradients against differences and the interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "autograd/vjp.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "gmock/gmock.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "ir/op.h"
#include "ir/structured.h"
#include "lazyjit/lazyjit.h"
#include "runtime/tensor_impl.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}
}  // namespace lazyjit

namespace lazyjit {
namespace {

using autograd::Differentiability;
using ir::OpKind;
using Shape = std::vector<int64_t>;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr DType kF64 = DType::Float64;

int64_t numel(const Shape& shape) { return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()); }

// ---------------------------------------------------------------------------------------------
// Inputs: values drawn where the op is smooth.

/// Where an input's values come from, so that the op is differentiable around each of them
/// with room for the finite-difference step.
struct Domain {
  double lo = -2, hi = 2;
  std::vector<double> kinks;  ///< points where the op has a kink: values stay `margin` away
  double margin = 0.1;
  bool distinct = false;      ///< values about (hi - lo) / n apart (amax, amin: no near-ties)
  double grid_offset = -1;    ///< >= 0: k + offset +- 0.05 for integer k (maximum, minimum:
                              ///< operands with different offsets never come close)
  bool dyadic = false;        ///< multiples of 2^-10 (exact in float32, and so is x +- 2^-10)

  static Domain range(double lo, double hi) {
    Domain d;
    d.lo = lo, d.hi = hi;
    return d;
  }
  static Domain away_from(std::vector<double> kinks, double margin = 0.1) {
    Domain d;
    d.kinks = std::move(kinks), d.margin = margin;
    return d;
  }
  static Domain spread() {
    Domain d;
    d.distinct = true;
    return d;
  }
  static Domain grid(double offset) {
    Domain d;
    d.grid_offset = offset;
    return d;
  }
  static Domain dyadic_values() {
    Domain d;
    d.dyadic = true;
    return d;
  }
};

const Domain kPositive = Domain::range(0.2, 3);
const Domain kAwayFromZero = Domain::away_from({0});

std::vector<double> draw(std::mt19937& rng, const Domain& d, int64_t n) {
  std::uniform_real_distribution<double> uniform(d.lo, d.hi), jitter(-0.05, 0.05);
  std::vector<double> v(static_cast<size_t>(n));
  if (d.distinct) {
    std::vector<int64_t> rank(v.size());
    std::iota(rank.begin(), rank.end(), 0);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (size_t i = 0; i < v.size(); ++i) v[i] = d.lo + (d.hi - d.lo) * (rank[i] + 0.5 + jitter(rng)) / n;
    return v;
  }
  auto near_kink = [&](double x) {
    return std::any_of(d.kinks.begin(), d.kinks.end(), [&](double k) { return std::abs(x - k) < d.margin; });
  };
  for (double& x : v) {
    if (d.grid_offset >= 0) {
      x = std::floor(uniform(rng)) + d.grid_offset + jitter(rng);
      continue;
    }
    do x = uniform(rng); while (near_kink(x));
    if (d.dyadic) x = std::round(x * 1024) / 1024;
  }
  return v;
}

std::vector<double> uniform_values(std::mt19937& rng, int64_t n, double lo = -1, double hi = 1) {
  return draw(rng, Domain::range(lo, hi), n);
}

// ---------------------------------------------------------------------------------------------
// The case table: one row per (op, shapes, attributes), through the public API.

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
  Shape shape;
  Domain domain = {};
};

/// A gradient check: f of float64 inputs; `op` is the table row whose rule it checks (none for
/// composites, which check several rules together).
struct GradCase {
  std::string name;  ///< unique; a valid gtest name
  std::optional<OpKind> op;
  std::vector<Input> inputs;
  Fn f;
  double h = 1e-6;  ///< finite-difference step
};
void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

std::string shape_label(const Shape& shape) { return shape.empty() ? "s" : fmt::format("{}", fmt::join(shape, "x")); }

class CaseTable {
 public:
  explicit CaseTable(uint64_t seed) : rng_(seed) {}

  void add(std::string label, std::optional<OpKind> op, std::vector<Input> inputs, Fn f, double h = 1e-6) {
    std::string name = label;
    for (const Input& in : inputs) name += "_" + shape_label(in.shape);
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    std::string unique = name;
    for (int k = 2; names_.count(unique); ++k) unique = name + "_" + std::to_string(k);
    names_.insert(unique);
    cases_.push_back({unique, op, std::move(inputs), std::move(f), h});
  }
  /// A random dim size in [2, 5]: sizes vary by case, from the table's seed.
  int64_t size() { return std::uniform_int_distribution<int64_t>(2, 5)(rng_); }
  std::mt19937& rng() { return rng_; }
  std::vector<GradCase> take() { return std::move(cases_); }

 private:
  std::mt19937 rng_;
  std::set<std::string> names_;
  std::vector<GradCase> cases_;
};

std::string op_label(OpKind op) { return std::string(ir::op_name(op)); }

/// Where a unary row's derivative is checked: its domain, away from its kinks.
Domain unary_domain(OpKind op) {
  switch (op) {
    case OpKind::Abs: case OpKind::Relu: case OpKind::Sign: return kAwayFromZero;
    case OpKind::Log: case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Log1p: return kPositive;
    case OpKind::Sin: case OpKind::Cos: case OpKind::Gelu: return Domain::range(-3, 3);
    case OpKind::Sigmoid: return Domain::range(-4, 4);
    case OpKind::Floor: case OpKind::Ceil: return Domain::away_from({-2, -1, 0, 1, 2});
    case OpKind::Round: return Domain::away_from({-1.5, -0.5, 0.5, 1.5});
    default: return {};
  }
}

/// Every unary row with a public function (LAZYJIT_API1) and a derivative: a new row is
/// checked with no line here unless its domain is restricted (unary_domain).
void add_unary_cases(CaseTable& t) {
  struct Row {
    OpKind op;
    Tensor (*f)(const Tensor&);
  };
  std::set<OpKind> underivable;
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_NO_VJP(Name, reason) underivable.insert(OpKind::Name);
#include "ir/ops.def"
  const Row rows[] = {
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_API1(Name, function) {OpKind::Name, &lazyjit::function},
#include "ir/ops.def"
  };
  for (const Row& row : rows) {
    if (underivable.contains(row.op)) continue;
    for (const Shape& shape : {Shape{}, Shape{1}, Shape{t.size(), t.size()}, Shape{2, 1, t.size()}}) {
      t.add(op_label(row.op), row.op, {{shape, unary_domain(row.op)}}, [f = row.f](const auto& x) { return f(x[0]); });
    }
  }
  const Domain clamp_kinks = Domain::away_from({-0.5, 0.7});
  for (const Shape& shape : {Shape{t.size(), t.size()}, Shape{1}, Shape{}}) {
    t.add("clamp", OpKind::Clamp, {{shape, clamp_kinks}}, [](const auto& x) { return clamp(x[0], -0.5, 0.7); });
  }
  // f64 -> f32 -> f64: dyadic values and step are exact in float32, so the differences are too.
  const Domain dyadic = Domain::dyadic_values();
  const Shape shape{t.size(), t.size()};
  t.add("cast_f32_roundtrip", OpKind::Cast, {{shape, dyadic}},
        [](const auto& x) { return x[0].to(DType::Float32).to(kF64) * x[0].to(kF64); }, 1.0 / 1024);
}

void add_binary_cases(CaseTable& t) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  struct Row {
    OpKind op;
    Binary f;
    Domain a, b;
  };
  const Row rows[] = {
      {OpKind::Add, &lazyjit::add, {}, {}},
      {OpKind::Sub, &lazyjit::sub, {}, {}},
      {OpKind::Mul, &lazyjit::mul, {}, {}},
      {OpKind::Div, &lazyjit::div, {}, Domain::away_from({0}, 0.5)},
      {OpKind::Pow, [](const Tensor& a, const Tensor& b) { return pow(a, b); }, Domain::range(0.5, 2), {}},
      {OpKind::Maximum, &lazyjit::maximum, Domain::grid(0.25), Domain::grid(0.75)},
      {OpKind::Minimum, &lazyjit::minimum, Domain::grid(0.25), Domain::grid(0.75)},
      // a / b in (1, 2): away from the integers where the floor jumps.
      {OpKind::FloorDivide, &lazyjit::floor_divide, Domain::range(3.1, 3.9), Domain::range(2.0, 3.0)},
      {OpKind::Remainder, &lazyjit::remainder, Domain::range(3.1, 3.9), Domain::range(2.0, 3.0)},
  };
  for (const Row& row : rows) {
    const int64_t a = t.size(), b = t.size(), c = t.size();
    const std::pair<Shape, Shape> shapes[] = {
        {{a, b}, {a, b}}, {{a, b}, {b}}, {{a, b}, {a, 1}}, {{a, 1}, {1, b}}, {{}, {a}}, {{2, 1, c}, {b, 1}},
    };
    for (const auto& [sa, sb] : shapes) {
      t.add(op_label(row.op), row.op, {{sa, row.a}, {sb, row.b}}, [f = row.f](const auto& x) { return f(x[0], x[1]); });
    }
  }
  // One operand a C++ number (a Scalar leaf in the graph).
  const Shape s{t.size(), t.size()};
  const Domain denominator = Domain::away_from({0}, 0.5);
  t.add("mul_by_scalar", OpKind::Mul, {{s}}, [](const auto& x) { return x[0] * 2.5; });
  t.add("scalar_minus", OpKind::Sub, {{s}}, [](const auto& x) { return 3.0 - x[0]; });
  t.add("scalar_over", OpKind::Div, {{s, denominator}}, [](const auto& x) { return 2.0 / x[0]; });
  t.add("over_scalar", OpKind::Div, {{s}}, [](const auto& x) { return x[0] / 4.0; });
  t.add("pow_scalar_2_5", OpKind::Pow, {{s, kPositive}}, [](const auto& x) { return pow(x[0], 2.5); });
  t.add("pow_scalar_neg1_5", OpKind::Pow, {{s, kPositive}}, [](const auto& x) { return pow(x[0], -1.5); });
  // Integer exponents are defined for negative bases: the rule must not go through log(a).
  t.add("pow_scalar_int2_negative_base", OpKind::Pow, {{s, kAwayFromZero}}, [](const auto& x) { return pow(x[0], 2); });
  t.add("pow_scalar_int3_negative_base", OpKind::Pow, {{s, kAwayFromZero}}, [](const auto& x) { return pow(x[0], 3); });
  t.add("pow_scalar_base", OpKind::Pow, {{s}}, [](const auto& x) { return pow(full({}, 2.0, kF64), x[0]); });
  // The other leaves as the constant operand: a compiled-in constant, random numbers, arange.
  t.add("mul_by_constant", OpKind::Mul, {{s}}, [](const auto& x) { return x[0] * constant(-1.25); });
  t.add("mul_by_randn", OpKind::Mul, {{s}}, [s](const auto& x) { return x[0] * randn(s, /*seed=*/11, kF64); });
  t.add("add_rand", OpKind::Add, {{s}}, [s](const auto& x) { return x[0] * x[0] + rand(s, /*seed=*/12, kF64); });
  t.add("mul_by_arange", OpKind::Mul, {{s}}, [s](const auto& x) { return x[0] * arange(s[1], kF64); });
}

/// A fixed random condition of `shape` (not an input: it carries no gradient).
Tensor condition(const std::vector<bool>& values, const Shape& shape) { return Tensor::from_vector(values, shape); }

void add_where_cases(CaseTable& t) {
  const int64_t a = t.size(), b = t.size();
  struct Shapes {
    Shape cond, x, y;
  };
  const Shapes shapes[] = {{{a, b}, {a, b}, {a, b}}, {{a, b}, {a, 1}, {b}}, {{a, b}, {}, {a, b}}, {{a, 1}, {1, b}, {b}}};
  for (const Shapes& s : shapes) {
    std::vector<bool> cond;
    for (int64_t i = 0; i < numel(s.cond); ++i) cond.push_back(std::bernoulli_distribution(0.5)(t.rng()));
    t.add("where_cond_" + shape_label(s.cond), OpKind::Where, {{s.x}, {s.y}},
          [cond, shape = s.cond](const auto& x) { return where(condition(cond, shape), x[0], x[1]); });
    t.add("where_scalar_y_cond_" + shape_label(s.cond), OpKind::Where, {{s.x}},
          [cond, shape = s.cond](const auto& x) { return where(condition(cond, shape), x[0], 0.5); });
    t.add("where_scalar_x_cond_" + shape_label(s.cond), OpKind::Where, {{s.y}},
          [cond, shape = s.cond](const auto& x) { return where(condition(cond, shape), -1.5, x[0]); });
  }
}

void add_reduction_cases(CaseTable& t) {
  struct Reduction {
    Shape shape;
    std::vector<int64_t> dims;
    bool keepdim;
  };
  const int64_t a = t.size(), b = t.size(), c = t.size();
  const Reduction sums[] = {
      {{a, b, c}, {}, false},  {{a, b, c}, {0}, false},   {{a, b, c}, {1}, true}, {{a, b, c}, {-1}, false},
      {{a, b, c}, {0, 2}, false}, {{a, b, c}, {0, 2}, true}, {{a, 1}, {1}, false},  {{c}, {0}, true},
  };
  const Reduction extrema[] = {
      {{a, b}, {1}, false}, {{a, b, c}, {0, 2}, true}, {{c}, {}, false}, {{a, 1}, {1}, false}, {{a, b}, {-2}, true},
  };
  auto label = [](OpKind op, const Reduction& r) {
    return fmt::format("{}_dims{}{}", ir::op_name(op), fmt::join(r.dims, ""), r.keepdim ? "_keepdim" : "");
  };
  for (const Reduction& r : sums) {
    t.add(label(OpKind::Sum, r), OpKind::Sum, {{r.shape}}, [r](const auto& x) { return sum(x[0], r.dims, r.keepdim); });
    // Magnitudes about 1, so that the product of a slice neither vanishes nor overflows.
    t.add(label(OpKind::Prod, r), OpKind::Prod, {{r.shape, Domain::range(0.6, 1.6)}},
          [r](const auto& x) { return prod(x[0], r.dims, r.keepdim); });
  }
  const Domain distinct = Domain::spread();
  for (const Reduction& r : extrema) {
    t.add(label(OpKind::Amax, r), OpKind::Amax, {{r.shape, distinct}},
          [r](const auto& x) { return amax(x[0], r.dims, r.keepdim); });
    t.add(label(OpKind::Amin, r), OpKind::Amin, {{r.shape, distinct}},
          [r](const auto& x) { return amin(x[0], r.dims, r.keepdim); });
  }
}

void add_view_cases(CaseTable& t) {
  const int64_t a = t.size(), b = t.size(), c = t.size();
  t.add("reshape", OpKind::Reshape, {{{a, b, c}}}, [=](const auto& x) { return reshape(x[0], {a * b, c}); });
  t.add("reshape_infer", OpKind::Reshape, {{{a, b}}}, [](const auto& x) { return reshape(x[0], {-1}); });
  t.add("reshape_split", OpKind::Reshape, {{{2 * c}}}, [](const auto& x) { return reshape(x[0], {2, -1}); });
  t.add("unsqueeze", OpKind::Reshape, {{{a, b}}}, [](const auto& x) { return unsqueeze(x[0], 1); });
  t.add("squeeze", OpKind::Reshape, {{{a, 1, b}}}, [](const auto& x) { return squeeze(x[0], 1); });

  t.add("permute_201", OpKind::Permute, {{{a, b, c}}}, [](const auto& x) { return permute(x[0], {2, 0, 1}); });
  t.add("permute_120", OpKind::Permute, {{{a, b, c}}}, [](const auto& x) { return permute(x[0], {1, 2, 0}); });
  t.add("transpose", OpKind::Permute, {{{a, b}}}, [](const auto& x) { return transpose(x[0], 0, 1); });
  t.add("transpose_last_first", OpKind::Permute, {{{a, b, c}}}, [](const auto& x) { return transpose(x[0], -1, 0); });

  t.add("flip_last", OpKind::Flip, {{{a, b}}}, [](const auto& x) { return flip(x[0], {-1}); });
  t.add("flip_two", OpKind::Flip, {{{a, b, c}}}, [](const auto& x) { return flip(x[0], {2, 0}); });

  t.add("expand_column", OpKind::Expand, {{{a, 1}}}, [=](const auto& x) { return expand(x[0], {a, b}); });
  t.add("expand_new_dims", OpKind::Expand, {{{b}}}, [=](const auto& x) { return expand(x[0], {2, a, b}); });
  t.add("expand_one", OpKind::Expand, {{{1}}}, [=](const auto& x) { return expand(x[0], {c}); });
  t.add("expand_middle", OpKind::Expand, {{{a, 1, c}}}, [=](const auto& x) { return expand(x[0], {a, b, -1}); });
  t.add("expand_rank0", OpKind::Expand, {{{}}}, [=](const auto& x) { return expand(x[0], {a, b}); });

  t.add("slice_start", OpKind::Slice, {{{a + 3, b}}}, [=](const auto& x) { return slice(x[0], 0, 1, a + 3); });
  t.add("slice_step2", OpKind::Slice, {{{a, 7}}}, [](const auto& x) { return slice(x[0], 1, 1, 6, 2); });
  t.add("slice_negative_start", OpKind::Slice, {{{6, b}}}, [](const auto& x) { return slice(x[0], 0, -3, 6); });
  t.add("slice_step3_last_dim", OpKind::Slice, {{{a, 8}}}, [](const auto& x) { return slice(x[0], -1, 0, 8, 3); });
  t.add("slice_negative_bounds", OpKind::Slice, {{{7}}}, [](const auto& x) { return slice(x[0], 0, -5, -1, 2); });

  t.add("cat_dim0", OpKind::Cat, {{{2, b}}, {{1, b}}, {{3, b}}}, [](const auto& x) { return cat({x[0], x[1], x[2]}, 0); });
  t.add("cat_dim1", OpKind::Cat, {{{a, 2}}, {{a, 1}}, {{a, 3}}}, [](const auto& x) { return cat({x[0], x[1], x[2]}, 1); });
  t.add("cat_dim_neg2", OpKind::Cat, {{{a, 1, c}}, {{a, 2, c}}, {{a, 1, c}}},
        [](const auto& x) { return cat({x[0], x[1], x[2]}, -2); });

  // Repeated and missing indices: the cotangents of a repeated slice add up, a missing one is 0.
  t.add("index_select_rows", OpKind::IndexSelect, {{{4, b}}}, [](const auto& x) {
    return index_select(x[0], 0, Tensor::from_vector<int64_t>({3, 0, 3, 1, 3}, {5}));
  });
  t.add("index_select_middle", OpKind::IndexSelect, {{{a, 3, c}}}, [](const auto& x) {
    return index_select(x[0], -2, Tensor::from_vector<int32_t>({2, 2}, {2}));
  });
  t.add("gather_dim0", OpKind::Gather, {{{3, 2}}}, [](const auto& x) {
    return gather(x[0], 0, Tensor::from_vector<int64_t>({2, 0, 2, 2, 1, 0}, {3, 2}));
  });
  t.add("gather_smaller_index", OpKind::Gather, {{{2, 4}}}, [](const auto& x) {
    return gather(x[0], 1, Tensor::from_vector<int32_t>({3, 3, 0}, {1, 3}));
  });

  // Scans along either dim; cumprod away from 0 here (its zeros have a test of their own).
  t.add("cumsum_last", OpKind::Cumsum, {{{a, b}}}, [](const auto& x) { return cumsum(x[0], -1); });
  t.add("cumsum_first", OpKind::Cumsum, {{{a, b, c}}}, [](const auto& x) { return cumsum(x[0], 0); });
  t.add("cumprod_last", OpKind::Cumprod, {{{a, b}, Domain::range(0.5, 1.5)}}, [](const auto& x) { return cumprod(x[0], 1); });
  t.add("cumprod_middle", OpKind::Cumprod, {{{a, 3, c}, Domain::range(-1.5, -0.5)}},
        [](const auto& x) { return cumprod(x[0], -2); });

  // Collectives in a world of one (the multi-process gradients: test/dist): each is the
  // identity there, and its rule runs the adjoint collective.
  t.add("all_reduce_sum", OpKind::AllReduce, {{{a, b}}}, [](const auto& x) { return dist::all_reduce(x[0]); });
  t.add("all_reduce_max", OpKind::AllReduce, {{{a, b}}},
        [](const auto& x) { return dist::all_reduce(x[0], dist::ReduceOp::Max); });
  t.add("broadcast", OpKind::Broadcast, {{{a, b}}}, [](const auto& x) { return dist::broadcast(x[0], 0); });
  t.add("all_gather_dim1", OpKind::AllGather, {{{a, b}}}, [](const auto& x) { return dist::all_gather(x[0], 1); });
  t.add("reduce_scatter", OpKind::ReduceScatter, {{{a, b}}}, [](const auto& x) { return dist::reduce_scatter(x[0]); });

  // Scatters: both the input and src get cotangents; repeated indices add up for the adds,
  // copies take distinct indices (which one of several copies wins has no derivative).
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 3, 1}, {4});
  t.add("index_add_rows", OpKind::IndexScatter, {{{4, b}}, {{4, b}}},
        [rows](const auto& x) { return index_add(x[0], 0, rows, x[1]); });
  t.add("index_add_columns_alpha", OpKind::IndexScatter, {{{a, 5}}, {{a, 4}}},
        [rows](const auto& x) { return index_add(x[0], 1, rows, x[1], 0.5); });
  t.add("index_copy", OpKind::IndexScatter, {{{a, 5}}, {{a, 3}}}, [](const auto& x) {
    return index_copy(x[0], 1, Tensor::from_vector<int32_t>({4, 0, 2}, {3}), x[1]);
  });
  const Tensor per_element = Tensor::from_vector<int64_t>({2, 0, 2, 2, 1, 0}, {2, 3});
  t.add("scatter_add_smaller_index", OpKind::Scatter, {{{3, 4}}, {{2, 5}}},
        [per_element](const auto& x) { return scatter_add(x[0], 0, per_element, x[1]); });
  t.add("scatter_add_last", OpKind::Scatter, {{{2, 3}}, {{2, 3}}},
        [per_element](const auto& x) { return scatter_add(x[0], 1, per_element, x[1]); });
  t.add("scatter_distinct", OpKind::Scatter, {{{2, 4}}, {{2, 3}}}, [](const auto& x) {
    return scatter(x[0], -1, Tensor::from_vector<int64_t>({3, 0, 1, 2, 1, 0}, {2, 3}), x[1]);
  });

  // Sliding windows: convolution (input, weight and bias), pooling, and the two view rows.
  t.add("unfold", OpKind::Unfold, {{{2, 2, 5, 6}}}, [](const auto& x) { return unfold(x[0], {2, 3}, 1, 1, {2, 1}); });
  t.add("unfold_transpose", OpKind::UnfoldTranspose, {{{2, 2, 8, 2, 4}}}, [](const auto& x) {
    // [N, groups, C/groups * kh*kw, OH, OW] of a [2, 4, 3, 5] input, 2x2 windows, stride 2x1, padding 1x0
    const ir::Shape spread = {2, 4, 4, 3, 5};
    const ir::Node::Attrs attrs = {2, 2, 2, 2, 1, 1, 0, 1, 1};
    const auto node = ir::make_structured(OpKind::UnfoldTranspose, {x[0].impl()->ir_value()}, attrs, &spread);
    return detail::make_pending(*node);
  });
  t.add("conv2d", OpKind::Unfold, {{{2, 4, 5, 6}}, {{6, 2, 3, 2}}, {{6}}},
        [](const auto& x) { return conv2d(x[0], x[1], x[2], {1, 2}, 1, {2, 1}, 2); });
  t.add("conv1d", OpKind::Unfold, {{{2, 3, 7}}, {{2, 3, 3}}}, [](const auto& x) { return conv1d(x[0], x[1], Tensor(), 2, 1); });
  // Stride 1: conv2d's own rule (the input's gradient a convolution with the turned weights).
  t.add("conv2d_stride_1", OpKind::Unfold, {{{2, 4, 5, 6}}, {{6, 2, 3, 2}}, {{6}}},
        [](const auto& x) { return conv2d(x[0], x[1], x[2], 1, {1, 0}, {2, 1}, 2); });
  t.add("conv2d_stride_1_same", OpKind::Unfold, {{{1, 3, 4, 5}}, {{2, 3, 3, 3}}, {{2}}},
        [](const auto& x) { return conv2d(x[0], x[1], x[2], 1, 1); });
  t.add("conv1d_stride_1", OpKind::Unfold, {{{2, 3, 7}}, {{2, 3, 3}}}, [](const auto& x) { return conv1d(x[0], x[1], Tensor(), 1, 2); });
  t.add("max_pool2d", OpKind::Unfold, {{{2, 2, 5, 5}, Domain::spread()}},
        [](const auto& x) { return max_pool2d(x[0], 3, 2, 1); });
  t.add("avg_pool2d", OpKind::Unfold, {{{2, 2, 5, 4}}}, [](const auto& x) { return avg_pool2d(x[0], 2, 1, 1, false); });
  t.add("max_pool2d ceil mode", OpKind::Unfold, {{{1, 2, 7, 6}, Domain::spread()}},
        [](const auto& x) { return max_pool2d(x[0], 3, 2, 0, /*ceil_mode=*/true); });
  t.add("avg_pool2d ceil mode", OpKind::Unfold, {{{1, 2, 8, 7}}},
        [](const auto& x) { return avg_pool2d(x[0], 3, 2, 1, true, /*ceil_mode=*/true); });
}

void add_matmul_cases(CaseTable& t) {
  const int64_t m = t.size(), k = t.size(), n = t.size();
  const std::pair<Shape, Shape> shapes[] = {
      {{m, k}, {k, n}}, {{k}, {k, n}},          {{m, k}, {k}},  {{k}, {k}},
      {{1, k}, {k, 1}}, {{2, 1, 3, 4}, {5, 4, 2}}, {{2, m, k}, {k, n}}, {{3, m, k}, {3, k, n}},
      {{k}, {2, k, n}}, {{2, m, k}, {k}},
  };
  for (const auto& [sa, sb] : shapes) {
    t.add("matmul", OpKind::Matmul, {{sa}, {sb}}, [](const auto& x) { return matmul(x[0], x[1]); });
  }
  // Transposed operands (x @ w^T in a linear layer), which the rule writes in w's layout.
  auto mT = [](const Tensor& x) { return transpose(x, -1, -2); };
  const std::pair<Shape, Shape> transposed_b[] = {{{m, k}, {n, k}}, {{k}, {n, k}}, {{2, m, k}, {2, n, k}},
                                                  {{m, k}, {2, n, k}}, {{3, m, k}, {1, n, k}}};
  for (const auto& [sa, sb] : transposed_b) {
    t.add("matmul_bT", OpKind::Matmul, {{sa}, {sb}}, [mT](const auto& x) { return matmul(x[0], mT(x[1])); });
  }
  const std::pair<Shape, Shape> transposed_a[] = {{{k, m}, {k, n}}, {{k, m}, {k}}, {{2, k, m}, {k, n}},
                                                  {{1, k, m}, {3, k, n}}};
  for (const auto& [sa, sb] : transposed_a) {
    t.add("matmul_aT", OpKind::Matmul, {{sa}, {sb}}, [mT](const auto& x) { return matmul(mT(x[0]), x[1]); });
  }
  t.add("matmul_aT_bT", OpKind::Matmul, {{{k, m}}, {{n, k}}}, [mT](const auto& x) { return matmul(mT(x[0]), mT(x[1])); });
  t.add("matmul_permuted_batch", OpKind::Matmul, {{{m, 2, k}}, {{k, n}}},
        [](const auto& x) { return matmul(permute(x[0], {1, 0, 2}), x[1]); });
}

void add_composite_cases(CaseTable& t) {
  const int64_t a = t.size(), b = t.size(), c = t.size();
  for (int64_t dim : {1, 0}) {
    t.add(fmt::format("softmax_dim{}", dim), std::nullopt, {{{a, b}}}, [=](const auto& x) { return softmax(x[0], dim); });
    t.add(fmt::format("log_softmax_dim{}", dim), std::nullopt, {{{a, b}}},
          [=](const auto& x) { return log_softmax(x[0], dim); });
  }
  t.add("silu", std::nullopt, {{{a, b}}}, [](const auto& x) { return silu(x[0]); });
  t.add("softplus", std::nullopt, {{{a, b}, Domain::range(-4, 4)}}, [](const auto& x) { return softplus(x[0]); });
  t.add("softplus_past_threshold", std::nullopt, {{{a}, Domain::range(21, 30)}},
        [](const auto& x) { return softplus(x[0]); });
  t.add("batch_norm_training", std::nullopt, {{{a, 2, c}}, {{2}}, {{2}}},
        [](const auto& x) { return nn::batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); });
  t.add("attention", std::nullopt, {{{2, a, 3}}, {{b, 3}}, {{2, b, c}}},
        [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); });
  t.add("attention_causal", std::nullopt, {{{a, 3}}, {{a, 3}}, {{a, c}}},
        [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], true); });
  t.add("topk_values", std::nullopt, {{{a, 5}, Domain::spread()}}, [](const auto& x) { return topk(x[0], 2).values; });
  t.add("var_rows", std::nullopt, {{{a, b}}}, [](const auto& x) { return var(x[0], {1}); });
  t.add("var_all_biased", std::nullopt, {{{a, b}}}, [](const auto& x) { return var(x[0], {}, false); });
  t.add("std_rows", std::nullopt, {{{a, b}}}, [](const auto& x) { return std(x[0], {-1}, true, true); });
  t.add("softmax_last", std::nullopt, {{{2, b, c}}}, [](const auto& x) { return softmax(x[0], -1); });
  t.add("softmax_size1_dim", std::nullopt, {{{a, 1}}}, [](const auto& x) { return softmax(x[0], 1); });
  t.add("log_softmax_last", std::nullopt, {{{2, b, c}}}, [](const auto& x) { return log_softmax(x[0], -1); });
  t.add("layer_norm_gamma_beta", std::nullopt, {{{a, b}}, {{b}}, {{b}}},
        [](const auto& x) { return layer_norm(x[0], 1, x[1], x[2]); });
  t.add("layer_norm_2d_gamma", std::nullopt, {{{2, b, c}}, {{b, c}}},
        [](const auto& x) { return layer_norm(x[0], 2, x[1]); });
  t.add("layer_norm_plain", std::nullopt, {{{a, c}}}, [](const auto& x) { return layer_norm(x[0], 1); });
  t.add("mean_all", std::nullopt, {{{a, b, c}}}, [](const auto& x) { return mean(x[0]); });
  t.add("mean_dim1", std::nullopt, {{{a, b, c}}}, [](const auto& x) { return mean(x[0], {1}); });
  t.add("mean_dims02_keepdim", std::nullopt, {{{a, b, c}}}, [](const auto& x) { return mean(x[0], {0, 2}, true); });
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < a; ++i) targets.push_back(std::uniform_int_distribution<int64_t>(0, c - 1)(t.rng()));
  t.add("cross_entropy", std::nullopt, {{{a, c}}},
        [targets](const auto& x) { return nn::cross_entropy(x[0], Tensor::from_vector(targets)); });
  t.add("mse_loss", std::nullopt, {{{a, b}}, {{a, b}}}, [](const auto& x) { return nn::mse_loss(x[0], x[1]); });
  // One input used several times: its cotangents add up.
  t.add("fan_out", std::nullopt, {{{a, b}}}, [](const auto& x) { return x[0] * x[0] + sin(x[0]) * x[0]; });
  // An intermediate updated in place: the loss reads its new value.
  t.add("in_place_update", std::nullopt, {{{a, b}}, {{b}}}, [](const auto& x) {
    Tensor h = x[0] * 2.0;
    h += x[1];
    h *= x[0];
    return tanh(h);
  });
}

/// Every gradient check, from one seed: the same table on every call.
std::vector<GradCase> gradient_cases() {
  CaseTable table(0x6a0d);
  add_unary_cases(table);
  add_binary_cases(table);
  add_where_cases(table);
  add_reduction_cases(table);
  add_view_cases(table);
  add_matmul_cases(table);
  add_composite_cases(table);
  return table.take();
}

// ---------------------------------------------------------------------------------------------
// Completeness of the op table.

const char* differentiability_name(Differentiability d) {
  switch (d) {
    case Differentiability::Leaf: return "Leaf";
    case Differentiability::Rule: return "Rule";
    case Differentiability::NotDifferentiable: return "NotDifferentiable";
    case Differentiability::Missing: return "Missing";
  }
  return "?";
}

/// Whether the op's result can never be floating (the only honest reason to have no rule).
bool never_floating(const ir::OpInfo& info) {
  return info.dtype_rule == ir::DTypeRule::Compare || info.dtype_rule == ir::DTypeRule::Index ||
         info.admits == ir::Admits::Bool || info.admits == ir::Admits::Integral;
}

TEST(AutogradTable, EveryOpHasARuleOrSaysWhyNot) {
  for (int i = 0; i < ir::kNumOps; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    const ir::OpInfo& info = ir::op_info(op);
    const Differentiability d = autograd::differentiability(op);
    EXPECT_NE(d, Differentiability::Missing)
        << "op " << info.name << " has neither a LAZYJIT_VJP nor a LAZYJIT_NO_VJP line in ops.def";
    EXPECT_EQ(d == Differentiability::Leaf, info.access == ir::AccessPattern::Leaf)
        << "op " << info.name << " is " << differentiability_name(d);
    if (d == Differentiability::NotDifferentiable) {
      EXPECT_TRUE(never_floating(info)) << "op " << info.name
                                        << " is marked not differentiable but its result can be floating";
      const char* reason = autograd::not_differentiable_reason(op);
      EXPECT_TRUE(reason != nullptr && *reason != '\0') << "op " << info.name << " gives no reason";
    }
  }
}

TEST(AutogradTable, EveryRuleHasAGradientCheck) {
  std::set<OpKind> checked;
  for (const GradCase& c : gradient_cases()) {
    if (!c.op) continue;
    checked.insert(*c.op);
    EXPECT_EQ(autograd::differentiability(*c.op), Differentiability::Rule)
        << "case " << c.name << " checks op " << ir::op_name(*c.op) << ", which has no rule";
  }
  for (int i = 0; i < ir::kNumOps; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    if (autograd::differentiability(op) == Differentiability::Rule && !checked.count(op)) {
      ADD_FAILURE() << "op " << ir::op_name(op)
                    << " has a gradient rule but no gradient-check case in test/autograd_test.cpp";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The gradient check.

/// Whether `t`'s pending graph contains a node of `op`.
bool traces_op(const Tensor& t, OpKind op) {
  std::vector<const ir::Node*> stack = {t.impl()->ir_value().get()};
  std::set<const ir::Node*> seen;
  while (!stack.empty()) {
    const ir::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->op() == op) return true;
    for (const ir::NodePtr& operand : node->operands()) stack.push_back(operand.get());
  }
  return false;
}

/// The values of `tensors`, computed by the reference interpreter from their pending graphs.
std::vector<std::vector<double>> interpret(const std::vector<Tensor>& tensors) {
  std::vector<ir::NodePtr> roots;
  for (const Tensor& t : tensors) roots.push_back(t.impl()->ir_value());
  std::vector<std::vector<double>> out;
  for (const ir::HostTensor& h : ir::interpret(ir::build_graph(roots))) {
    std::vector<double>& v = out.emplace_back();
    for (int64_t i = 0; i < h.numel(); ++i) v.push_back(h.as_double(i));
  }
  return out;
}

std::vector<Tensor> tensors_of(const std::vector<Input>& inputs, const std::vector<std::vector<double>>& values) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) out.push_back(Tensor::from_vector(values[i], inputs[i].shape));
  return out;
}

/// Central differences of `loss` at `values`, one element at a time.
std::vector<std::vector<double>> numeric_gradient(
    const std::function<double(const std::vector<std::vector<double>>&)>& loss,
    std::vector<std::vector<double>> values, double h) {
  std::vector<std::vector<double>> out;
  for (auto& v : values) {
    std::vector<double>& g = out.emplace_back();
    for (double& x : v) {
      const double x0 = x;
      x = x0 + h;
      const double plus = loss(values);
      x = x0 - h;
      const double minus = loss(values);
      x = x0;
      g.push_back((plus - minus) / (2 * h));
    }
  }
  return out;
}

/// Compares two gradients element by element (|got - want| <= atol + rtol |want|), naming
/// up to five differing elements per input.
void expect_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                  double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << ", input " << i;
    int reported = 0;
    for (size_t k = 0; k < got[i].size() && reported < 5; ++k) {
      const double g = got[i][k], w = want[i][k];
      if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) {
        ADD_FAILURE() << what << ": input " << i << " element " << k << ": " << g << " vs " << w << " (diff "
                      << g - w << ")";
        ++reported;
      }
    }
  }
}

constexpr double kNumericRtol = 1e-6, kNumericAtol = 1e-7;  // central differences, h = 1e-6
constexpr double kExactRtol = 1e-12, kExactAtol = 1e-12;    // one graph two ways, or two equal graphs

uint64_t seed_of(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325;  // FNV-1a: stable across runs and platforms
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3;
  return h;
}

class GradCheck : public testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  const uint64_t seed = seed_of(c.name);
  SCOPED_TRACE(fmt::format("case {} seed {:#x}", c.name, seed));
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  std::vector<std::vector<double>> values;
  for (const Input& in : c.inputs) values.push_back(draw(rng, in.domain, numel(in.shape)));

  const std::vector<Tensor> x = tensors_of(c.inputs, values);
  const Tensor y = c.f(x);
  ASSERT_EQ(y.dtype(), kF64);
  if (c.op) {
    EXPECT_TRUE(traces_op(y, *c.op)) << "the case does not trace op " << ir::op_name(*c.op);
  }
  const Tensor w = Tensor::from_vector(uniform_values(rng, y.numel()), y.shape());

  const std::vector<Tensor> g = grad(sum(y * w), x);
  const std::vector<Tensor> g_vjp = grad(y, x, w);
  ASSERT_EQ(g.size(), x.size());
  ASSERT_EQ(g_vjp.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(g[i].defined()) << "input " << i;
    EXPECT_EQ(g[i].shape(), x[i].shape()) << "input " << i;
    EXPECT_EQ(g[i].dtype(), kF64) << "input " << i;
  }
  const std::vector<std::vector<double>> interpreted = interpret(g);  // before the JIT materialises g
  std::vector<Tensor> all = g;
  all.insert(all.end(), g_vjp.begin(), g_vjp.end());
  sync(all);  // one graph
  std::vector<std::vector<double>> analytic, vjp;
  for (size_t i = 0; i < x.size(); ++i) {
    analytic.push_back(g[i].to_vector<double>());
    vjp.push_back(g_vjp[i].to_vector<double>());
  }
  expect_close(analytic, interpreted, kExactRtol, kExactAtol, "JIT vs reference interpreter");
  expect_close(vjp, analytic, kExactRtol, kExactAtol, "grad(y, x, w) vs grad(sum(y * w), x)");

  auto loss = [&](const std::vector<std::vector<double>>& v) { return sum(c.f(tensors_of(c.inputs, v)) * w).item<double>(); };
  loss(values);  // compiles the loss graph; every step below reuses it
  const int64_t compiles = metrics().compiles;
  const std::vector<std::vector<double>> numeric = numeric_gradient(loss, values, c.h);
  EXPECT_LE(metrics().compiles - compiles, 1) << "finite differences recompiled the loss";
  expect_close(analytic, numeric, kNumericRtol, kNumericAtol, "analytic vs finite differences");
}

INSTANTIATE_TEST_SUITE_P(OpTable, GradCheck, testing::ValuesIn(gradient_cases()),
                         [](const testing::TestParamInfo<GradCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Gradients where an op is not differentiable, and what PyTorch does at kinks and ties.

Tensor f64(const std::vector<double>& v, Shape shape) { return Tensor::from_vector(v, std::move(shape)); }
Tensor f64(const std::vector<double>& v) { return Tensor::from_vector(v); }

using ::testing::DoubleNear;
using ::testing::FloatNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

std::vector<double> grad_of(const Tensor& loss, const Tensor& x) { return grad(loss, {x})[0].to_vector<double>(); }

/// prod's gradient at zeros, as PyTorch's: a row with one zero gives the zero the product of
/// the rest and the others 0; a row with two zeros gives 0 everywhere; a row without, y / a.
TEST(AutogradZeros, ProdIsExactAtZerosAsPyTorch) {
  const Tensor x = f64({2, 0, 3, 0, 0, 5, 4, 2, 0.5}, {3, 3});
  EXPECT_THAT(grad_of(sum(prod(x, {1})), x), ElementsAre(0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 8.0));
  EXPECT_THAT(grad_of(prod(x), x), ElementsAre(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0));
}

TEST(AutogradTies, AmaxAndAminSplitTiesEvenlyAsPyTorch) {
  Tensor x = f64({1, 3, 3});
  EXPECT_THAT(grad_of(amax(x), x), ElementsAre(0.0, 0.5, 0.5));
  Tensor y = f64({2, 1, 1, 5});
  EXPECT_THAT(grad_of(amin(y), y), ElementsAre(0.0, 0.5, 0.5, 0.0));
  Tensor z = f64({1, 3, 3, 2, 2, 2}, {2, 3});
  EXPECT_THAT(grad_of(sum(amax(z, {1}) * f64({1, 10})), z),
              Pointwise(DoubleNear(1e-15), std::vector<double>{0, 0.5, 0.5, 10.0 / 3, 10.0 / 3, 10.0 / 3}));
}

TEST(AutogradTies, KinksFollowPyTorch) {
  Tensor x = f64({-1, 0, 2});
  EXPECT_THAT(grad_of(sum(relu(x)), x), ElementsAre(0.0, 0.0, 1.0));
  EXPECT_THAT(grad_of(sum(abs(x)), x), ElementsAre(-1.0, 0.0, 1.0));
  Tensor c = f64({-1, -0.5, 0, 0.7, 1});
  EXPECT_THAT(grad_of(sum(clamp(c, -0.5, 0.7)), c), ElementsAre(0.0, 1.0, 1.0, 1.0, 0.0));  // bounds inclusive
  Tensor a = f64({1, 2, 3}), b = f64({3, 2, 1});
  std::vector<Tensor> g = grad(sum(maximum(a, b)), {a, b});
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(0.0, 0.5, 1.0));
  EXPECT_THAT(g[1].to_vector<double>(), ElementsAre(1.0, 0.5, 0.0));
  g = grad(sum(minimum(a, b)), {a, b});
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(1.0, 0.5, 0.0));
  EXPECT_THAT(g[1].to_vector<double>(), ElementsAre(0.0, 0.5, 1.0));
}

// softplus at its threshold takes the log branch whole, as PyTorch's backward does: its
// gradient there is sigmoid(beta x), not half of it (a min of beta x and the threshold once
// split the tie).
TEST(AutogradTies, SoftplusAtItsThresholdIsTheLogBranchs) {
  Tensor x = f64({19, 20, 21});
  const std::vector<double> g = grad_of(sum(softplus(x)), x);
  EXPECT_DOUBLE_EQ(g[0], 1 / (1 + std::exp(-19.0)));
  EXPECT_DOUBLE_EQ(g[1], 1 / (1 + std::exp(-20.0)));
  EXPECT_EQ(g[2], 1.0);
  Tensor y = f64({5});
  EXPECT_DOUBLE_EQ(grad_of(sum(softplus(y, 2.0, 10.0)), y)[0], 1 / (1 + std::exp(-10.0)));
}

// max and min along a dim give the whole gradient to the index they return (the first
// extremum), as PyTorch's; amax and amin split it among ties (above).
TEST(AutogradTies, MaxAndMinAlongADimGiveTheGradientToTheirIndex) {
  Tensor x = f64({1, 3, 3, 0, 0, 2}, {2, 3});
  const ValuesIndices hi = max(x, 1);
  EXPECT_THAT(hi.indices.to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_THAT(grad_of(sum(hi.values), x), ElementsAre(0.0, 1.0, 0.0, 0.0, 0.0, 1.0));
  const ValuesIndices lo = min(x, -1, /*keepdim=*/true);
  EXPECT_EQ(lo.values.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_THAT(grad_of(sum(lo.values), x), ElementsAre(1.0, 0.0, 0.0, 1.0, 0.0, 0.0));
  EXPECT_THAT(grad_of(sum(min(x, 0).values), x), ElementsAre(0.0, 0.0, 0.0, 1.0, 1.0, 1.0));
}

TEST(AutogradPaths, IntegerAndBoolPathsContributeNothing) {
  Tensor x = f64({1, 5, 2, 7, 3, 0}, {2, 3});
  // argmax of each row is 1 and 0: only the multiplication's own path carries a gradient.
  Tensor weight = argmax(x, 1, true).to(kF64);
  EXPECT_THAT(grad_of(sum(x * weight), x), ElementsAre(1.0, 1.0, 1.0, 0.0, 0.0, 0.0));
  Tensor y = f64({-2, 3, -0.5});
  EXPECT_THAT(grad_of(sum(where(gt(y, 0.0), y, -y)), y), ElementsAre(-1.0, 1.0, -1.0));
}

TEST(AutogradPaths, GradientWithRespectToAnIntermediate) {
  Tensor x = f64({0.5, -1, 2});
  Tensor y = x * 2.0;
  Tensor loss = sum(sin(y) * x);
  std::vector<Tensor> g = grad(loss, {y, x});
  const std::vector<double> dy = {std::cos(1.0) * 0.5, std::cos(-2.0) * -1, std::cos(4.0) * 2};
  EXPECT_THAT(g[0].to_vector<double>(), Pointwise(DoubleNear(1e-14), dy));
  // d/dx through both paths: sin(2x) + 2x cos(2x).
  std::vector<double> want;
  for (double v : {0.5, -1.0, 2.0}) want.push_back(std::sin(2 * v) + 2 * v * std::cos(2 * v));
  EXPECT_THAT(g[1].to_vector<double>(), Pointwise(DoubleNear(1e-14), want));
}

TEST(AutogradPaths, TheSameInputTwice) {
  Tensor x = f64({1, 2});
  std::vector<Tensor> g = grad(sum(x * x), {x, x});
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(2.0, 4.0));
  EXPECT_THAT(g[1].to_vector<double>(), ElementsAre(2.0, 4.0));
}

// The cotangents of disjoint slices of one tensor (q, k and v of a fused projection) meet as
// one cat of the three, not as sums over each slice's zero padding; overlapping slices add.
TEST(AutogradPaths, DisjointSlicesMeetAsOneCat) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  x.requires_grad_();
  const Tensor y = sum(slice(x, 1, 0, 2) * 2.0) + sum(slice(x, 1, 2, 3) * 3.0) + sum(slice(x, 1, 4, 6) * 4.0);
  const Tensor dx = grad(y, {x})[0];
  const std::string ir = dump({dx}, DumpFormat::LazyIr);
  EXPECT_EQ(ir.find(" add "), std::string::npos) << ir;
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{2, 2, 3, 0, 4, 4, 2, 2, 3, 0, 4, 4}));
  // Overlapping: columns 1 and 2 are in both.
  const Tensor overlap = grad(sum(slice(x, 1, 0, 3)) + sum(slice(x, 1, 1, 5) * 2.0), {x})[0];
  EXPECT_EQ(overlap.to_vector<double>(), (std::vector<double>{1, 3, 3, 2, 2, 0, 1, 3, 3, 2, 2, 0}));
}

TEST(AutogradPaths, OutputIsTheInput) {
  Tensor s = Tensor::from_vector<double>({4}, {});
  std::vector<Tensor> g = grad(s, {s});
  EXPECT_EQ(g[0].item<double>(), 1.0);
  EXPECT_TRUE(grad(sum(s), {}).empty());
}

TEST(AutogradPaths, EmptyTensors) {
  Tensor e = Tensor::from_vector<double>({}, {0, 3});
  std::vector<Tensor> g = grad(sum(e) + 1.0, {e});
  EXPECT_EQ(g[0].shape(), (Shape{0, 3}));
  EXPECT_TRUE(g[0].to_vector<double>().empty());
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});  // an empty slice contributes nothing
  EXPECT_THAT(grad_of(sum(slice(x, 1, 3, 3)) + sum(x * 2.0), x), ElementsAre(2, 2, 2, 2, 2, 2));
}

TEST(AutogradDtypes, TheGradientHasTheInputsDtype) {
  Tensor x32 = Tensor::from_vector<float>({0.5f, -1.f, 2.f});
  std::vector<Tensor> g = grad(sum(exp(x32.to(kF64))), {x32});
  ASSERT_EQ(g[0].dtype(), DType::Float32);
  const std::vector<float> want = {static_cast<float>(std::exp(0.5)), static_cast<float>(std::exp(-1.0)),
                                   static_cast<float>(std::exp(2.0))};
  EXPECT_THAT(g[0].to_vector<float>(), Pointwise(FloatNear(1e-6f), want));
  Tensor x64 = f64({0.5, -1, 2});
  g = grad(sum(x64.to(DType::Float32) * 3.0f), {x64});
  ASSERT_EQ(g[0].dtype(), kF64);
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(3.0, 3.0, 3.0));
  // Promotion inside an op (mul, cat, matmul): each gradient comes back in its input's dtype.
  Tensor y32 = Tensor::from_vector<float>({2.f, -0.5f, 4.f});
  g = grad(sum(x64 * y32), {x64, y32});
  ASSERT_EQ(g[0].dtype(), kF64);
  ASSERT_EQ(g[1].dtype(), DType::Float32);
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(2.0, -0.5, 4.0));
  EXPECT_THAT(g[1].to_vector<float>(), ElementsAre(0.5f, -1.f, 2.f));
  g = grad(sum(cat({x64, y32}, 0) * f64({1, 2, 3, 4, 5, 6})), {x64, y32});
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(1.0, 2.0, 3.0));
  EXPECT_THAT(g[1].to_vector<float>(), ElementsAre(4.f, 5.f, 6.f));
  g = grad(sum(matmul(x64, y32)), {x64, y32});
  EXPECT_THAT(g[1].to_vector<float>(), ElementsAre(0.5f, -1.f, 2.f));
}

// ---------------------------------------------------------------------------------------------
// User errors: each names what is wrong.

TEST(AutogradErrors, OnlyThroughArgmax) {
  Tensor x = f64({1, 3, 2, 5}, {2, 2});
  Tensor loss = sum(argmax(x, 1).to(kF64));
  EXPECT_THAT([&] { grad(loss, {x}); }, ThrowsMessage<Error>(HasSubstr("grad: the output depends on input 0 (float64[2,2]) only through ops that "
                                           "are not differentiable: argmax (its result is an integer index)")));
}

TEST(AutogradErrors, OnlyThroughAComparison) {
  Tensor x = f64({1, -3});
  Tensor loss = sum(gt(x, 0.0).to(kF64));
  EXPECT_THAT([&] { grad(loss, {x}); }, ThrowsMessage<Error>(HasSubstr("only through ops that are not differentiable: gt (its result is bool)")));
}

TEST(AutogradErrors, IntegerInput) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2});
  Tensor loss = sum(i.to(kF64) * 2.0);
  EXPECT_THAT([&] { grad(loss, {i}); },
              ThrowsMessage<Error>(HasSubstr("grad: input 0 is int64[2]; only floating tensors have gradients")));
}

TEST(AutogradErrors, IntegerOutput) {
  Tensor x = f64({1, 3});
  Tensor loss = sum(argmax(x, 0));
  EXPECT_THAT([&] { grad(loss, {x}); },
              ThrowsMessage<Error>(HasSubstr("grad: the output is int64[]; only floating tensors have gradients")));
}

TEST(AutogradErrors, OutputWithMoreThanOneElement) {
  Tensor x = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_THAT([&] { grad(x * 2.0, {x}); },
              ThrowsMessage<Error>(HasSubstr("grad: the output is float64[2,2], not one element; pass a grad_output")));
  x.requires_grad_();
  EXPECT_THAT([&] { (x * 2.0).backward(); },
              ThrowsMessage<Error>(HasSubstr("backward: the output is float64[2,2], not one element")));
}

TEST(AutogradErrors, InputTheOutputDoesNotDependOn) {
  Tensor x = f64({1, 2}), z = f64({3, 4});
  EXPECT_THAT([&] { grad(sum(x), {x, z}); },
              ThrowsMessage<Error>(HasSubstr("grad: the output does not depend on input 1 (float64[2])")));
  Tensor q = f64({1, 2});  // nothing it depends on requires grad
  EXPECT_THAT([&] { sum(q).backward(); }, ThrowsMessage<Error>(HasSubstr(
                                              "backward: the output does not depend on any tensor with requires_grad()")));
}

TEST(AutogradErrors, GradOutputOfTheWrongShape) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x * 2.0;
  EXPECT_THAT([&] { grad(y, {x}, zeros({3}, kF64)); },
              ThrowsMessage<Error>(HasSubstr(
                  "grad: grad_output is float64[3], the output is float64[2,3]; they must have one shape")));
  x.requires_grad_();
  EXPECT_THAT([&] { y.backward(zeros({3, 2}, kF64)); },
              ThrowsMessage<Error>(HasSubstr("backward: gradient is float64[3,2], the output is float64[2,3]")));
}

TEST(AutogradErrors, GradOutputOfAnotherFloatDtypeIsConverted) {  // as PyTorch's engine does
  Tensor x = f64({1, 2, 3});
  std::vector<Tensor> g = grad(x * x, {x}, Tensor::from_vector<float>({1, 0.5f, -1}));
  ASSERT_EQ(g[0].dtype(), kF64);
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(2.0, 2.0, -6.0));
}

TEST(AutogradErrors, UndefinedTensors) {
  Tensor x = f64({1, 2});
  EXPECT_THAT([&] { grad(Tensor(), {x}); }, ThrowsMessage<Error>(HasSubstr("grad: the output is an undefined tensor")));
  EXPECT_THAT([&] { grad(sum(x), {Tensor()}); }, ThrowsMessage<Error>(HasSubstr("grad: input 0 is an undefined tensor")));
}

TEST(AutogradErrors, RequiresGradOnAnIntegerTensor) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2});
  EXPECT_THAT([&] { i.requires_grad_(); },
              ThrowsMessage<Error>(HasSubstr(
                  "requires_grad_: the tensor is int64[2]; only floating tensors can require gradients")));
  EXPECT_FALSE(i.requires_grad());
}

// ---------------------------------------------------------------------------------------------
// backward() in PyTorch's style.

TEST(AutogradBackward, AccumulatesAndZeroGradClears) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}), b = f64({0.5, -1, 2}), c = f64({3, 3, 3});
  a.requires_grad_();
  b.requires_grad_();
  EXPECT_TRUE(a.requires_grad());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_FALSE(a.grad().defined());
  Tensor loss = sum(a * b * c);
  loss.backward();
  const std::vector<double> ga = {1.5, -3, 6, 1.5, -3, 6}, gb = {15, 21, 27};
  EXPECT_EQ(a.grad().to_vector<double>(), ga);
  EXPECT_EQ(b.grad().to_vector<double>(), gb);
  EXPECT_FALSE(c.grad().defined());
  loss.backward();
  EXPECT_THAT(a.grad().to_vector<double>(), ElementsAre(3, -6, 12, 3, -6, 12));
  EXPECT_THAT(b.grad().to_vector<double>(), ElementsAre(30, 42, 54));
  a.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  loss.backward();
  EXPECT_EQ(a.grad().to_vector<double>(), ga);
  EXPECT_THAT(b.grad().to_vector<double>(), ElementsAre(45, 63, 81));
  b.requires_grad_(false);
  b.zero_grad();
  loss.backward();
  EXPECT_FALSE(b.grad().defined());
  EXPECT_THAT(a.grad().to_vector<double>(), ElementsAre(3, -6, 12, 3, -6, 12));
}

TEST(AutogradBackward, SeededWithAGradient) {
  Tensor x = f64({1, 2, 3});
  x.requires_grad_();
  (x * x).backward(f64({1, 0, -1}));
  EXPECT_THAT(x.grad().to_vector<double>(), ElementsAre(2.0, 0.0, -6.0));
}

// Embedding's backward is an index_add of the output's cotangent into the rows it read: no
// one-hot, no [N, V] temporary, and its graph holds the scatter.
TEST(AutogradBackward, EmbeddingAddsRowsWithoutAOneHot) {
  Tensor weight = Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2});
  weight.requires_grad_();
  const Tensor tokens = Tensor::from_vector<int64_t>({2, 0, 2, 2}, {2, 2});
  sum(embedding(weight, tokens) * Tensor::from_vector<double>({1, 2}, {2})).backward();
  EXPECT_TRUE(traces_op(weight.grad(), OpKind::IndexScatter));
  EXPECT_FALSE(traces_op(weight.grad(), OpKind::Matmul));
  EXPECT_EQ(weight.grad().to_vector<double>(), (std::vector<double>{1, 2, 0, 0, 3, 6}));
}

/// cumprod's cotangent where the input has zeros (the finite-difference cases stay away from
/// them): element k gets sum_{j >= k} g[j] * prod_{i <= j, i != k} x[i], as PyTorch. Worked by
/// hand: the first zero of a line takes the products that skip it, every later element 0.
TEST(AutogradBackward, CumprodThroughZeros) {
  Tensor x = f64({2, 0, 3, 0, 5, 1.5, -2, 0, 4, 0.5}, {2, 5});
  x.requires_grad_();
  cumprod(x, 1).backward(f64({1, 2, 3, 4, 5, 0.5, 1, -1, 2, 3}, {2, 5}));
  EXPECT_THAT(x.grad().to_vector<double>(), ElementsAre(1, 22, 0, 0, 0, -1.5, 1.5, -39, 0, 0));
}

TEST(AutogradBackward, NnLinearParametersMatchTheClosedForm) {
  nn::Linear layer(3, 2, /*seed=*/7, /*bias=*/true, kF64);
  ASSERT_TRUE(layer.weight.requires_grad());
  ASSERT_TRUE(layer.bias.requires_grad());
  const std::vector<double> xs = {0.5, -1, 2, 1, 0.25, -0.5}, ts = {0.1, -0.2, 0.3, 0.4};
  Tensor x = f64(xs, {2, 3}), target = f64(ts, {2, 2});
  Tensor out = layer(x);
  Tensor loss = nn::mse_loss(out, target);
  loss.backward();
  // d/dW mean((xW^T + b - t)^2) = 2/(N*O) (out - t)^T x; d/db = 2/(N*O) sum_rows (out - t).
  const std::vector<double> o = out.to_vector<double>();
  std::vector<double> gw(6, 0.0), gb(2, 0.0);
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 2; ++j) {
      const double r = 2.0 / 4 * (o[n * 2 + j] - ts[n * 2 + j]);
      gb[j] += r;
      for (int k = 0; k < 3; ++k) gw[j * 3 + k] += r * xs[n * 3 + k];
    }
  }
  EXPECT_THAT(layer.weight.grad().to_vector<double>(), Pointwise(DoubleNear(1e-14), gw));
  EXPECT_THAT(layer.bias.grad().to_vector<double>(), Pointwise(DoubleNear(1e-14), gb));
}

// ---------------------------------------------------------------------------------------------
// Laziness: grad() and backward() trace; nothing runs until a gradient is read.

TEST(AutogradLaziness, GradTracesOnly) {
  Tensor x = f64({0.5, -1, 2, 0.25, 1, -2}, {2, 3}), w = f64({1, 2, 3, -1, 0.5, 0}, {3, 2});
  Tensor loss = sum(tanh(matmul(x, w)));
  const int64_t executed = metrics().graphs_executed;
  std::vector<Tensor> g = grad(loss, {x, w});
  EXPECT_EQ(metrics().graphs_executed, executed);
  x.requires_grad_();
  loss.backward();
  EXPECT_EQ(metrics().graphs_executed, executed);
  g[0].to_vector<double>();
  EXPECT_EQ(metrics().graphs_executed, executed + 1);
  // The forward value, a gradient and backward()'s accumulation run as one graph.
  sync({loss, g[1], x.grad()});
  EXPECT_EQ(metrics().graphs_executed, executed + 2);
}

// ---------------------------------------------------------------------------------------------
// A composed model: a two-layer MLP's gradients against differences and the interpreter.

/// cross_entropy(act(x W1^T + b1) W2^T + b2, targets); params = {W1, b1, W2, b2}.
Tensor mlp_loss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& targets, bool use_relu) {
  Tensor pre = matmul(x, transpose(p[0], 0, 1)) + p[1];
  Tensor hidden = use_relu ? relu(pre) : tanh(pre);
  return nn::cross_entropy(matmul(hidden, transpose(p[2], 0, 1)) + p[3], targets);
}

TEST(AutogradModel, MlpMatchesFiniteDifferencesAndTheInterpreter) {
  constexpr int64_t kBatch = 6, kIn = 5, kHidden = 7, kClasses = 4;
  const std::vector<Input> params = {{{kHidden, kIn}}, {{kHidden}}, {{kClasses, kHidden}}, {{kClasses}}};
  for (bool use_relu : {false, true}) {
    const uint64_t seed = use_relu ? 0x31f2 : 0x31f1;
    SCOPED_TRACE(fmt::format("{} seed {:#x}", use_relu ? "relu" : "tanh", seed));
    std::mt19937 rng(seed);
    std::vector<std::vector<double>> values;
    for (const Input& in : params) values.push_back(draw(rng, in.domain, numel(in.shape)));
    const Tensor x = f64(uniform_values(rng, kBatch * kIn, -2, 2), {kBatch, kIn});
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < kBatch; ++i) labels.push_back(std::uniform_int_distribution<int64_t>(0, kClasses - 1)(rng));
    const Tensor targets = Tensor::from_vector(labels);

    const std::vector<Tensor> p = tensors_of(params, values);
    if (use_relu) {  // no pre-activation within reach of relu's kink
      const std::vector<double> pre = (matmul(x, transpose(p[0], 0, 1)) + p[1]).to_vector<double>();
      for (double v : pre) ASSERT_GT(std::abs(v), 1e-4) << "choose another seed";
    }
    const std::vector<Tensor> g = grad(mlp_loss(p, x, targets, use_relu), p);
    const std::vector<std::vector<double>> interpreted = interpret(g);
    sync(g);
    std::vector<std::vector<double>> analytic;
    for (const Tensor& t : g) analytic.push_back(t.to_vector<double>());
    expect_close(analytic, interpreted, kExactRtol, kExactAtol, "JIT vs reference interpreter");

    auto loss = [&](const std::vector<std::vector<double>>& v) {
      return mlp_loss(tensors_of(params, v), x, targets, use_relu).item<double>();
    };
    loss(values);
    const int64_t compiles = metrics().compiles;
    const std::vector<std::vector<double>> numeric = numeric_gradient(loss, values, 1e-6);
    EXPECT_LE(metrics().compiles - compiles, 1) << "finite differences recompiled the loss";
    expect_close(analytic, numeric, kNumericRtol, kNumericAtol, "analytic vs finite differences");
  }
}

TEST(AutogradModel, BackwardGraphsHitTheCompileCache) {
  // The same training step at new values and a new batch size traces the same graphs: the
  // backward pass must not bake sizes or values into its structure.
  std::mt19937 rng(0x5ca1e);
  const std::vector<Input> params = {{{7, 5}}, {{7}}, {{4, 7}}, {{4}}};
  auto step = [&](int64_t batch) {
    std::vector<std::vector<double>> values;
    for (const Input& in : params) values.push_back(draw(rng, in.domain, numel(in.shape)));
    const std::vector<Tensor> p = tensors_of(params, values);
    std::vector<int64_t> labels(static_cast<size_t>(batch), 2);
    Tensor loss = mlp_loss(p, f64(uniform_values(rng, batch * 5), {batch, 5}), Tensor::from_vector(labels), false);
    std::vector<Tensor> g = grad(loss, p);
    g.push_back(loss);
    sync(g);
  };
  step(6);
  const int64_t compiles = metrics().compiles;
  step(6);
  step(9);
  step(6);
  EXPECT_EQ(metrics().compiles, compiles);
}

// ---------------------------------------------------------------------------------------------
// Reading a value between tracing and grad(): PyTorch keeps the graph (print the loss, then
// backward), and autograd.h promises the derivative through the value an input had when the
// output was traced.

TEST(AutogradHistory, GradAfterReadingTheLoss) {
  // Once autograd is in use (a requires_grad_ mark, or a grad() or backward() call), a sync
  // keeps the graph it ran until the next mark_step.
  Tensor w = f64({1, 2, 3});
  w.requires_grad_();
  Tensor loss = sum(w * w);
  EXPECT_EQ(loss.item<double>(), 14.0);
  EXPECT_THAT(grad_of(loss, w), ElementsAre(2.0, 4.0, 6.0));
}

TEST(AutogradHistory, BackwardAfterReadingTheLoss) {
  Tensor w = f64({1, 2, 3});
  w.requires_grad_();
  Tensor loss = sum(w * w);
  EXPECT_EQ(loss.item<double>(), 14.0);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_THAT(w.grad().to_vector<double>(), ElementsAre(2.0, 4.0, 6.0));
}

TEST(AutogradHistory, GradAfterMarkStepIsAnErrorThatSaysWhy) {
  // The step barrier ends a step's graphs (and may have donated the buffers they read).
  Tensor w = f64({1, 2, 3});
  Tensor loss = sum(w * w);
  mark_step();
  EXPECT_THAT([&] { grad(loss, {w}); },
              ThrowsMessage<Error>(HasSubstr("grad: the output is data with no graph to differentiate: mark_step() "
                                             "ends a step's graphs, so take gradients before it")));
}

// Reading an intermediate (printing logits) before the loss is traced: the loss reads the
// intermediate's data, and the gradient still flows through the graph that computed it.
TEST(AutogradHistory, BackwardThroughAnIntermediateReadBeforeTheLossWasTraced) {
  Tensor w = f64({1, 2});
  w.requires_grad_();
  Tensor h = w * w;
  EXPECT_THAT(h.to_vector<double>(), ElementsAre(1.0, 4.0));
  sum(h * 3.0).backward();
  EXPECT_THAT(w.grad().to_vector<double>(), ElementsAre(6.0, 12.0));
  EXPECT_THAT(grad_of(sum(h * h), w), ElementsAre(4.0, 32.0));  // 4 w^3
}

// A parameter read (synced) before the step, as a user printing weights does: its gradient
// is counted once, not once through its data and again through the graph that made it.
TEST(AutogradHistory, AnInputReadBeforeBackwardHasItsGradientOnce) {
  Tensor w = f64({1, 2}) * 1.0;
  w.requires_grad_();
  EXPECT_THAT(w.to_vector<double>(), ElementsAre(1.0, 2.0));
  sum(w * w).backward();
  EXPECT_THAT(w.grad().to_vector<double>(), ElementsAre(2.0, 4.0));
}

TEST(AutogradHistory, GradWithRespectToAMaterialisedIntermediate) {
  Tensor w = f64({1, 2, 3});
  w.requires_grad_();  // autograd in use: the sync below keeps h's graph
  Tensor h = w * 2.0;
  Tensor loss = sum(h * h);
  sync({h});
  EXPECT_THAT(grad_of(loss, h), ElementsAre(4.0, 8.0, 12.0));
}

TEST(AutogradHistory, InputUpdatedInPlaceAfterTracingIsAnotherValue) {
  // As PyTorch refuses a backward through a value an in-place op has modified: the gradient
  // is asked of w as it is now, which the loss never read.
  Tensor w = f64({1, 2, 3});
  Tensor loss = sum(w * w);
  w -= 1.0;
  EXPECT_THAT([&] { grad(loss, {w}); },
              ThrowsMessage<Error>(HasSubstr("grad: the output does not depend on input 0 (float64[3]) as it is now "
                                             "(it was updated in place, and a value an in-place update replaced is "
                                             "another value)")));
}

TEST(AutogradHistory, AnInputNeverUpdatedIsNotSaidToHaveBeen) {
  Tensor w = f64({1, 2, 3}), v = f64({4, 5, 6});
  Tensor loss = sum(w * w);
  EXPECT_THAT([&] { grad(loss, {v}); },
              ThrowsMessage<Error>("grad: the output does not depend on input 0 (float64[3])"));
}

TEST(AutogradHistory, BackwardAfterMarkStepSaysThatTheStepEndedTheGraph) {
  Tensor w = f64({1, 2, 3});
  w.requires_grad_();
  Tensor loss = sum(w * w);
  mark_step();
  EXPECT_THAT([&] { loss.backward(); },
              ThrowsMessage<Error>(HasSubstr("backward: the output is data with no graph to differentiate: mark_step() "
                                             "ends a step's graphs, so take gradients before it")));
}

TEST(AutogradPaths, GradientWithRespectToCreatedTensors) {
  Tensor x = f64({1, -2, 3});
  Tensor c = full({3}, 2.0, kF64), r = randn({3}, /*seed=*/5, kF64);
  std::vector<Tensor> g = grad(sum(x * c + r * r), {c, r});
  EXPECT_THAT(g[0].to_vector<double>(), ElementsAre(1.0, -2.0, 3.0));
  const std::vector<double> rv = r.to_vector<double>();
  EXPECT_THAT(g[1].to_vector<double>(), ElementsAre(2 * rv[0], 2 * rv[1], 2 * rv[2]));
}

}  // namespace
}  // namespace lazyjit
