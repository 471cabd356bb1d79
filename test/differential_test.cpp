// Differential tests: every elementwise row of the op table, for every operand dtype, on
// seeded random shapes (size 0, size-1 broadcast, odd and large sizes), run by the runtime on
// both tiers (tier 0 and compiled code) and compared with the reference interpreter and with
// each other. Also random fused programs.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "fmt/format.h"
#include "ir/builder.h"
#include "ir/dtype_dispatch.h"
#include "ir/interpreter.h"
#include "ir/structured.h"
#include "lowering/kir.h"
#include "lowering/lower.h"
#include "lazyjit/lazyjit.h"
#include "op_checks.h"
#include "runtime/runtime.h"
#include "tier.h"

namespace lazyjit {
namespace detail {
Tensor make_pending(ir::NodePtr node);
}
namespace {

using ir::OpKind;

constexpr DType kDTypes[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};

struct OpRow {
  OpKind op;
  const char* name;
  int arity;
};
void PrintTo(const OpRow& row, std::ostream* os) { *os << row.name; }

constexpr OpRow kOps[] = {
#define LAZYJIT_OP(Name, text, arity, rule, admits, kind) {OpKind::Name, text, arity},
#include "ir/ops.def"
};

/// Input values an op is defined on, so both sides compute the same thing (no domain
/// errors, no float-to-int overflow, exponents that stay finite).
struct Domain {
  double lo = -4, hi = 4;
  bool away_from_zero = false;
  bool specials = false;  // every 7th element a special value: +-0, +-inf, NaN, extremes
};
Domain domain(OpKind op, int operand) {
  switch (op) {
    case OpKind::Log: case OpKind::Sqrt: case OpKind::Rsqrt: return {0.05, 8};
    case OpKind::Log1p: return {-0.95, 8};
    case OpKind::Pow: return operand == 0 ? Domain{0.1, 3} : Domain{-3, 4};
    case OpKind::Div: return operand == 1 ? Domain{0.25, 4, true} : Domain{-8, 8};
    case OpKind::FloorDivide: case OpKind::Remainder: return operand == 1 ? Domain{-5, 5, true} : Domain{-20, 20};
    case OpKind::Exp: return {-20, 20};
    default: return {};
  }
}

/// Values where implementations part ways: signed zeros, infinities, NaN, extremes.
template <class T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return {false, true};
  } else if constexpr (std::is_integral_v<T>) {
    return {0, 1, -1, 2, L::min(), L::max(), T(L::min() + 1)};
  } else {
    return {T(0), -T(0), T(1), T(-1), T(0.5), L::infinity(), -L::infinity(), L::quiet_NaN(), L::max(),
            L::denorm_min(), T(1e10), T(-3)};
  }
}

size_t special_count(DType dtype) {
  return ir::dispatch_dtype(dtype, []<class T>(T) { return special_values<T>().size(); });
}

/// A leaf whose elements are the special values of `dtype`, cycling.
ir::NodePtr special_leaf(DType dtype, const ir::Shape& shape) {
  auto buffer = std::make_shared<runtime::CpuBuffer>(runtime::Runtime::get().allocator(), dtype,
                                                     std::vector<int64_t>(shape.begin(), shape.end()));
  ir::dispatch_dtype(dtype, [&]<class T>(T) {
    using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    const std::vector<T> values = special_values<T>();
    for (int64_t i = 0; i < buffer->numel(); ++i) static_cast<S*>(buffer->data())[i] = values[i % values.size()];
  });
  return ir::make_parameter(std::move(buffer));
}

ir::NodePtr random_leaf(std::mt19937_64& rng, DType dtype, const ir::Shape& shape, Domain d) {
  auto buffer = std::make_shared<runtime::CpuBuffer>(runtime::Runtime::get().allocator(), dtype,
                                                     std::vector<int64_t>(shape.begin(), shape.end()));
  std::uniform_real_distribution<double> uniform(d.lo, d.hi);
  const int64_t n = ir::numel(shape);
  ir::dispatch_dtype(dtype, [&]<class T>(T) {
    using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    auto* p = static_cast<S*>(buffer->data());
    for (int64_t i = 0; i < n; ++i) {
      double v = uniform(rng);
      if (d.away_from_zero && std::abs(v) < 0.25) v = 0.25;
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v > 0;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(std::floor(v));
        if (d.away_from_zero && p[i] == 0) p[i] = 1;
        if (d.specials && i % 7 == 3) p[i] = special_values<T>()[(i / 7) % special_values<T>().size()];
      } else {
        p[i] = static_cast<T>(v);
        if (d.specials && i % 7 == 3) p[i] = special_values<T>()[(i / 7) % special_values<T>().size()];
      }
    }
  });
  return ir::make_parameter(std::move(buffer));
}

/// Whether a kernel's element matches the interpreter's: integers and bools bit for bit,
/// floats within a few ulp-scale relative error, with NaN matching NaN and the sign of a zero
/// (and of an infinity) exact.
bool element_matches(const ir::HostTensor& got, const ir::HostTensor& want, int64_t i) {
  if (!is_floating(want.dtype)) {
    const size_t size = static_cast<size_t>(dtype_size(want.dtype));
    return std::memcmp(got.bytes.data() + i * size, want.bytes.data() + i * size, size) == 0;
  }
  const double g = got.as_double(i), w = want.as_double(i);
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
  if (g == w) return std::signbit(g) == std::signbit(w);
  if (std::isinf(g) || std::isinf(w)) return false;
  const double tolerance = want.dtype == DType::Float32 ? 2e-5 : 1e-12;
  return std::abs(g - w) <= tolerance * (1 + std::abs(w));
}

/// Whether the two tiers may differ in the last bits of `graph`'s results: a math function
/// (compiled loops call libm for some elements and libmvec for others, tier 0 libmvec for all)
/// or a float sum (the tiers add its lanes in different orders). docs/semantics.md, "Tiers".
bool tiers_may_differ(const ir::Graph& graph) {
  for (const ir::Node* node : graph.nodes) {
    switch (node->op()) {
      case OpKind::Exp: case OpKind::Log: case OpKind::Sin: case OpKind::Cos: case OpKind::Tanh: case OpKind::Erf:
      case OpKind::Sigmoid: case OpKind::Gelu: case OpKind::Log1p: case OpKind::Expm1: case OpKind::Randn: return true;
      case OpKind::Pow: case OpKind::Sum:
        if (is_floating(node->dtype())) return true;
        break;
      default: break;
    }
  }
  return false;
}

/// `roots` run on one tier, as host tensors.
std::vector<ir::HostTensor> run_on(Tier tier, const std::vector<ir::NodePtr>& roots) {
  tests::ScopedTier scoped(tier);
  std::vector<Tensor> tensors;
  for (const auto& r : roots) tensors.push_back(detail::make_pending(r));
  const Metrics before = metrics();
  sync(tensors);
  if (tier == Tier::Interpret) {
    EXPECT_EQ(tests::launches_not_on_tier0(before), 0);  // none compiled by an earlier case
  }
  std::vector<ir::HostTensor> out;
  for (const Tensor& t : tensors) {
    const BackendData& data = *t.impl()->data();
    ir::HostTensor host{data.dtype(), ir::Shape(data.shape().begin(), data.shape().end()), {}};
    host.bytes.resize(static_cast<size_t>(data.size_bytes()));
    if (!host.bytes.empty()) std::memcpy(host.bytes.data(), data.data(), host.bytes.size());
    out.push_back(std::move(host));
  }
  return out;
}

/// Runs `roots` on tier 0 and on compiled code and compares every element of each with the
/// interpreter's; the two tiers agree bit for bit unless tiers_may_differ.
void expect_matches_interpreter(const std::vector<ir::NodePtr>& roots, const std::string& context) {
  const ir::Graph graph = ir::build_graph(roots);
  const std::vector<ir::HostTensor> expected = ir::interpret(graph);
  const bool bitwise = !tiers_may_differ(graph);
  const std::vector<ir::HostTensor> compiled = run_on(Tier::Compile, roots);
  const std::vector<ir::HostTensor> interpreted = run_on(Tier::Interpret, roots);
  for (const auto& [tier, results] : {std::pair{"compiled", &compiled}, std::pair{"tier 0", &interpreted}}) {
    for (size_t k = 0; k < roots.size(); ++k) {
      const ir::HostTensor& actual = (*results)[k];
      ASSERT_EQ(actual.dtype, expected[k].dtype) << context;
      ASSERT_EQ(actual.numel(), expected[k].numel()) << context;
      int reported = 0;
      for (int64_t i = 0; i < actual.numel() && reported < 5; ++i) {
        if (!element_matches(actual, expected[k], i)) {
          ADD_FAILURE() << context << " result " << k << " element " << i << ": " << tier << " "
                        << actual.as_double(i) << ", interpreter " << expected[k].as_double(i);
          ++reported;
        }
      }
    }
  }
  for (size_t k = 0; k < roots.size(); ++k) {
    if (!bitwise) break;
    const size_t size = static_cast<size_t>(dtype_size(compiled[k].dtype));
    int reported = 0;
    for (int64_t i = 0; i < compiled[k].numel() && reported < 5; ++i) {
      if (std::memcmp(compiled[k].bytes.data() + i * size, interpreted[k].bytes.data() + i * size, size) != 0) {
        ADD_FAILURE() << context << " result " << k << " element " << i << ": compiled " << compiled[k].as_double(i)
                      << ", tier 0 " << interpreted[k].as_double(i) << " (the tiers must agree bit for bit)";
        ++reported;
      }
    }
  }
}

/// Operand shapes for an op of `arity`: equal, broadcast both ways, lower rank, rank 0,
/// size 0 and a size past the executor's inline limit (parallel path).
std::vector<std::vector<ir::Shape>> shape_cases(std::mt19937_64& rng, int arity) {
  std::uniform_int_distribution<int64_t> size(2, 17);
  const int64_t a = size(rng), b = size(rng), c = size(rng);
  std::vector<std::vector<ir::Shape>> pairs = {
      {{a, b}, {a, b}}, {{a, 1}, {1, b}}, {{c}, {a, b, c}}, {{}, {a, c}}, {{a, 0}, {1, 0}},
      {{1}, {1}},       {{3, 1, c}, {b, c}},  {{70001}, {70001}}, {{2, 40000}, {1, 40000}},
  };
  std::vector<std::vector<ir::Shape>> cases;
  for (auto& p : pairs) {
    std::vector<ir::Shape> shapes;
    for (int i = 0; i < arity; ++i) shapes.push_back(p[i % 2]);
    if (arity == 3) shapes[2] = ir::Shape{};  // clamp bounds and where's b: broadcast scalars
    cases.push_back(std::move(shapes));
  }
  return cases;
}

class OpTest : public testing::TestWithParam<OpRow> {};

TEST_P(OpTest, MatchesInterpreterForEveryDtypeAndShape) {
  const OpRow row = GetParam();
  const uint64_t seed = 0x5eed0000 + static_cast<uint64_t>(row.op);
  std::mt19937_64 rng(seed);
  for (DType dtype : kDTypes) {
    for (const auto& shapes : shape_cases(rng, row.arity)) {
      std::vector<ir::NodePtr> operands;
      for (int i = 0; i < row.arity; ++i) {
        const DType d = (row.op == OpKind::Where && i == 0) ? DType::Bool : dtype;
        operands.push_back(random_leaf(rng, d, shapes[i], domain(row.op, i)));
      }
      std::string context = fmt::format("op {} dtype {} seed {:#x} shapes", row.name, dtype_name(dtype), seed);
      for (const auto& s : shapes) context += " " + ir::shape_to_string(s);
      absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(row.op, operands);
      if (!node.ok()) {
        // Only a dtype the op's table row rejects may fail, and only with a message.
        EXPECT_FALSE(ir::admits_dtype(ir::op_info(row.op).admits, dtype)) << context << ": " << node.status();
        continue;
      }
      expect_matches_interpreter({*node}, context);
    }
  }
}

/// The same ops on every pair of special values: operand 0 varies along dim 0, operand 1
/// along dim 1 (a third, clamp's hi or where's b, is each special value in turn).
TEST_P(OpTest, MatchesInterpreterOnSpecialValues) {
  const OpRow row = GetParam();
  for (DType dtype : kDTypes) {
    const int64_t n = static_cast<int64_t>(special_count(dtype));
    std::vector<ir::NodePtr> operands;
    for (int i = 0; i < row.arity; ++i) {
      const DType d = (row.op == OpKind::Where && i == 0) ? DType::Bool : dtype;
      const int64_t nd = static_cast<int64_t>(special_count(d));
      const ir::Shape shape = i == 0 ? ir::Shape{nd, 1, 1} : i == 1 ? ir::Shape{1, n, 1} : ir::Shape{1, 1, n};
      operands.push_back(special_leaf(d, shape));
    }
    absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(row.op, operands);
    if (!node.ok()) continue;
    if (ir::divides(row.op) && !is_floating(dtype)) {  // the specials hold 0: every run fails, on both tiers
      const std::vector<ir::NodePtr> roots = {*node};
      expect_error([&] { ir::interpret(ir::build_graph(roots)); }, ir::division_error(row.op));
      for (Tier tier : {Tier::Compile, Tier::Interpret}) expect_error([&] { run_on(tier, {*node}); }, ir::division_error(row.op));
      continue;
    }
    expect_matches_interpreter({*node}, fmt::format("op {} dtype {} special values", row.name, dtype_name(dtype)));
  }
}

std::vector<OpRow> elementwise_rows() {
  std::vector<OpRow> rows;
  for (const OpRow& row : kOps) {
    if (ir::op_info(row.op).access == ir::AccessPattern::Elementwise && row.op != OpKind::Cast) rows.push_back(row);
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(OpTable, OpTest, testing::ValuesIn(elementwise_rows()),
                         [](const testing::TestParamInfo<OpRow>& info) { return std::string(info.param.name); });

TEST(Differential, CastBetweenEveryPairOfDtypes) {
  std::mt19937_64 rng(0xca57);
  for (DType from : kDTypes) {
    for (DType to : kDTypes) {
      for (ir::Shape shape : {ir::Shape{}, ir::Shape{0}, ir::Shape{13}, ir::Shape{3, 70000}}) {
        ir::NodePtr leaf = random_leaf(rng, from, shape, {-100, 100, false, /*specials=*/true});
        expect_matches_interpreter({ir::make_cast(leaf, to)},
                                   fmt::format("cast {} -> {} shape {}", dtype_name(from), dtype_name(to),
                                               ir::shape_to_string(shape)));
      }
    }
  }
}

TEST(Differential, LeavesAsResults) {
  std::mt19937_64 rng(0x1eaf);
  for (DType dtype : kDTypes) {
    ir::NodePtr splat = ir::make_scalar(ir::scalar_value(Scalar(3), dtype), dtype, ir::Shape{4, 5});
    expect_matches_interpreter({splat}, fmt::format("full {}", dtype_name(dtype)));
    if (dtype != DType::Bool) {
      expect_matches_interpreter({*ir::make_arange(37, dtype)}, fmt::format("arange {}", dtype_name(dtype)));
    }
    expect_matches_interpreter({ir::make_cast(random_leaf(rng, dtype, {6, 7}, {}), dtype)},
                               fmt::format("copy {}", dtype_name(dtype)));
  }
}

ir::NodePtr ir_of(const Tensor& t) { return t.impl()->ir(); }

/// A row kernel binds each fold to the row it is computing, and a product's epilogue runs at
/// the product's element: a view of their results in the same kernel (a transpose, a
/// broadcast slice) reads other rows and elements, so it must read them from memory.
TEST(Differential, ViewsBesideRowAndProductKernelsReadTheElementsTheyName) {
  std::mt19937_64 rng(0x5eed);
  const auto x = detail::make_pending(random_leaf(rng, DType::Float32, {5, 5}, {}));
  const auto w = detail::make_pending(random_leaf(rng, DType::Float32, {5, 5}, {}));
  const std::pair<const char*, Tensor> values[] = {
      {"softmax", softmax(x, -1)},
      {"log_softmax", log_softmax(x, 1)},
      {"layer_norm", layer_norm(x, 1)},
      {"matmul + 1", matmul(x, w) + 1},
  };
  for (const auto& [name, value] : values) {
    expect_matches_interpreter({ir_of(value), ir_of(transpose(value, 0, 1))}, fmt::format("{} and its transpose", name));
    expect_matches_interpreter({ir_of(value), ir_of(slice(value, 1, 0, 1) - value)},
                               fmt::format("{} and a broadcast column of it", name));
  }
}

/// The results of a product's kernel have its shape, but only a reshape of the product itself
/// is stored as the product: a reshaped parameter beside it is evaluated as it is (it once
/// was indexed as the rank-2 parameter at a rank-3 index: SIGILL).
TEST(Differential, AProductsEpilogueBesideAReshapedInputOfItsShape) {
  const Tensor product = matmul(ones({2, 1, 5}, DType::Float64), ones({2, 5, 3}, DType::Float64)) + 1;
  const Tensor input = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_matches_interpreter({ir_of(product), ir_of(reshape(input, {2, 1, 3}))}, "product + 1 beside a reshape");
}

/// A cat along its innermost dim of parts that reshape values of other ranks (a transformer's
/// head merge of q's, k's and v's gradients: [B, H, T, hd] permuted to [B, T, H, hd], then
/// [B*T, H*hd]) reads each part by counting its index up, not by dividing it: the same
/// elements on both tiers, in kernels split across threads in the middle of rows.
TEST(Differential, ACatOfReshapedPartsCountsTheirIndexUp) {
  std::mt19937_64 rng(0xca7);
  for (const std::vector<int64_t>& bhtd : {std::vector<int64_t>{2, 3, 5, 4}, std::vector<int64_t>{3, 4, 67, 16},
                                         std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{2, 3, 0, 4}}) {
    const int64_t b = bhtd[0], h = bhtd[1], t = bhtd[2], d = bhtd[3];
    std::vector<Tensor> parts;
    for (int i = 0; i < 3; ++i) {
      const Tensor x = detail::make_pending(random_leaf(rng, DType::Float32, {b, h, t, d}, {}));
      parts.push_back(reshape(permute(x * (i + 1.0), {0, 2, 1, 3}), {b * t, h * d}));
    }
    const Tensor column = detail::make_pending(random_leaf(rng, DType::Float32, {b * t, 1}, {}));
    parts.push_back(column);  // a part that is no reshape, between and after them
    const Tensor merged = cat({parts[0], parts[3], parts[1], parts[2]}, 1);
    expect_matches_interpreter({ir_of(merged)}, fmt::format("cat of head merges, shape {}x{}x{}x{}", b, h, t, d));
  }
  // A part with no columns beside one with some: its value has a dim of 0, never divided by.
  const Tensor empty = reshape(detail::make_pending(random_leaf(rng, DType::Float32, {3, 0, 4}, {})), {3, 0});
  const Tensor full_part = reshape(detail::make_pending(random_leaf(rng, DType::Float32, {3, 2, 5}, {})), {3, 10});
  expect_matches_interpreter({ir_of(cat({empty, full_part, empty}, 1))}, "cat with an empty reshaped part");
}

/// A reshape maps its index group by group (ir::reshape_groups): merges, splits, groups of
/// two dims to two, unit dims among them, one group that is not dim for dim, and no
/// elements. Each reads a permuted value and is read permuted, so its index arrives and
/// leaves as dims, on both tiers.
TEST(Differential, ReshapesMapTheirIndexGroupByGroup) {
  std::mt19937_64 rng(0x5e7);
  const std::vector<std::pair<ir::Shape, std::vector<int64_t>>> cases = {
      {{2, 3, 4, 5}, {6, 20}},  {{6, 20}, {2, 3, 4, 5}},  {{2, 1, 3, 4}, {2, 3, 1, 4}}, {{6, 4}, {4, 6}},
      {{4, 6, 5}, {2, 2, 30}},  {{6, 5, 4}, {2, 15, 4}},  {{2, 1, 12}, {2, 3, 1, 4}},  {{3, 0, 4}, {0, 4, 1}},
      {{3, 67, 2, 16}, {201, 32}}, {{201, 32}, {3, 67, 2, 16}}};
  for (const auto& [from, to] : cases) {
    const Tensor x = detail::make_pending(random_leaf(rng, DType::Float32, from, {}));
    std::vector<int64_t> reversed(from.size());
    for (size_t d = 0; d < from.size(); ++d) reversed[d] = static_cast<int64_t>(from.size() - 1 - d);
    const Tensor permuted = permute(permute(x * 2.0, reversed), reversed);  // dims in, dims out
    const Tensor y = reshape(permuted, to);
    expect_matches_interpreter({ir_of(transpose(y, 0, static_cast<int64_t>(to.size()) - 1) + 1.0)},
                               fmt::format("reshape {} to {}", ir::shape_to_string(from), ir::shape_to_string(to)));
  }
}

/// A head split of a slice (attention's k from the fused q/k/v projection, permuted to k^T)
/// divides by none of its dims: its kernel has the divisions of the same kernel over a 4-D
/// value and no more (read through the linear index, it divided by every dim).
TEST(Differential, ASplitOfASliceDividesByNone) {
  auto divisions = [](const Tensor& t) {
    int count = 0;
    const ir::Graph graph = ir::build_graph(std::vector<ir::NodePtr>{ir_of(t)});
    for (const lowering::LoweredKernel& kernel : lowering::lower_graph(graph).kernels) {
      const std::string text = kir::print(kernel.kir);
      for (const char* op : {" = div ", " = rem "}) {
        for (size_t at = text.find(op); at != std::string::npos; at = text.find(op, at + 1)) ++count;
      }
    }
    return count;
  };
  const Tensor qkv = Tensor::from_vector<float>(std::vector<float>(6 * 5 * 3 * 4 * 3, 1.0f), {6 * 5, 3 * 4 * 3});
  const Tensor k = permute(reshape(slice(qkv, 1, 12, 24), {6, 5, 4, 3}), {0, 2, 3, 1});
  const Tensor plain = permute(slice(reshape(qkv, {6, 5, 12, 3}), 2, 4, 8), {0, 2, 3, 1});
  EXPECT_EQ(divisions(exp(k)), divisions(exp(plain)));
}

/// A row kernel keeps its last fold's operand in a result's buffer and reads it back for the
/// output pass; a gather of the same kernel reads that operand at other rows, so there it must
/// be loaded where the gather points, not read back (fuzz seed 0x18eaf20457c816f0: the
/// index_select returned its input unselected).
TEST(Differential, ARowKernelsOperandReadAtOtherRowsIsNotReadBack) {
  std::mt19937_64 rng(0x5e1ec7);
  const Tensor mask = detail::make_pending(random_leaf(rng, DType::Bool, {1, 5, 3, 1}, {}));
  const Tensor p = detail::make_pending(random_leaf(rng, DType::Float32, {1, 5, 3, 1}, {-4, 4}));
  const Tensor index = Tensor::from_vector<int32_t>({1, 2, 2}, {3});
  const Tensor w = where(mask, 2, p);
  expect_matches_interpreter({ir_of(w), ir_of(index_select(w, 2, index)), ir_of(mean(w, {-1}, true))},
                             "a where, its index_select and its mean over a unit dim");
  const Tensor x = detail::make_pending(random_leaf(rng, DType::Float32, {4, 6}, {-2, 2}));
  const Tensor e = exp(x);
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 0, 2}, {4});
  expect_matches_interpreter({ir_of(e), ir_of(e / sum(e, {-1}, true)), ir_of(index_select(e, 0, rows))},
                             "exp, its softmax and its rows gathered");
}

/// Products, folds, views and gathers on both tiers: a product and its epilogue (the same fused
/// multiply-adds in the same order, so bit for bit), row and column folds, argmax, transposes,
/// slices, concatenation, index_select; odd sizes so that tiles and blocks have remainders.
TEST(Differential, ProductsFoldsViewsAndGathers) {
  std::mt19937_64 rng(0x7e40);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const Tensor a = detail::make_pending(random_leaf(rng, dtype, {37, 53}, {-2, 2}));
    const Tensor b = detail::make_pending(random_leaf(rng, dtype, {53, 29}, {-2, 2}));
    const Tensor bias = detail::make_pending(random_leaf(rng, dtype, {29}, {-2, 2}));
    const Tensor batched = detail::make_pending(random_leaf(rng, dtype, {3, 7, 53}, {-2, 2}));
    const std::string name(dtype_name(dtype));
    expect_matches_interpreter({ir_of(relu(matmul(a, b) + bias))}, "relu(a @ b + bias) " + name);
    expect_matches_interpreter({ir_of(matmul(batched, b))}, "batched product " + name);
    for (int64_t rows : {70, 97}) {  // one row block of all of A (up to 96 rows), then blocks of 48
      const Tensor tall = detail::make_pending(random_leaf(rng, dtype, {rows, 53}, {-2, 2}));
      expect_matches_interpreter({ir_of(matmul(tall, b) + bias)}, fmt::format("{}-row product {}", rows, name));
    }
    expect_matches_interpreter({ir_of(matmul(transpose(b, 0, 1), transpose(a, 0, 1)))}, "product of transposes " + name);
    expect_matches_interpreter({ir_of(amax(a, {1})), ir_of(amin(a, {0})), ir_of(argmax(a, 1)), ir_of(argmax(a, 0))},
                               "extrema " + name);
    expect_matches_interpreter({ir_of(sum(a, {1})), ir_of(sum(a, {0})), ir_of(sum(a))}, "sums " + name);
    const Tensor positive = gt(a, 1.5), zero = eq(a, 0.0);  // some true rows and columns, some not
    expect_matches_interpreter({ir_of(any(positive, {1})), ir_of(all(a, {0})), ir_of(any(zero, {0})),
                                ir_of(all(logical_not(zero), {1})), ir_of(any(a)), ir_of(all(positive))},
                               "any and all " + name);
    const Tensor index = Tensor::from_vector<int64_t>({36, 0, 5, 5, 17}, {5});
    expect_matches_interpreter({ir_of(index_select(a, 0, index)), ir_of(index_select(a, 1, index)),
                                ir_of(cat({slice(a, 1, 3, 50, 4), slice(b, 0, 10, 47), transpose(slice(a, 1, 0, 37), 0, 1)}, 1)),
                                ir_of(flip(a, {0, 1}) * 2), ir_of(flip(transpose(b, 0, 1), {1}))},
                               "gathers and views " + name);
    const Tensor tokens = Tensor::from_vector<int32_t>({36, 0, 5, 5, 17, 2, 9, 1, 0, 36, 12, 3}, {3, 4});
    expect_matches_interpreter({ir_of(embedding(a, tokens)), ir_of(embedding(a, Tensor::from_vector<int64_t>({7}, {}))),
                                ir_of(embedding(a, tokens) * 2 + 1)},
                               "embeddings " + name);
  }
}

/// Scans and scatters on every dtype: both dims, negative dims, sizes 0 and 1, odd sizes;
/// fused operands, consumers that read them back, repeated indices (whose adds the fixed
/// order makes bit-exact), and a line split across the parallel path.
TEST(Differential, ScansAndScatters) {
  std::mt19937_64 rng(0x5ca7);
  for (DType dtype : kDTypes) {
    const std::string name(dtype_name(dtype));
    const Tensor a = detail::make_pending(random_leaf(rng, dtype, {37, 53}, {-2, 2}));
    const Tensor small = detail::make_pending(random_leaf(rng, dtype, {3, 4, 5}, {-2, 2}));
    const Tensor empty = detail::make_pending(random_leaf(rng, dtype, {0, 5}, {-2, 2}));
    const Tensor one = detail::make_pending(random_leaf(rng, dtype, {1}, {-2, 2}));
    const Tensor wide = detail::make_pending(random_leaf(rng, dtype, {3, 40000}, {-2, 2}));
    std::vector<ir::NodePtr> scans = {ir_of(cumsum(a, 1)), ir_of(cumsum(a, 0)), ir_of(cumsum(small, -2)),
                                      ir_of(cumsum(empty, 0)), ir_of(cumsum(empty, 1)), ir_of(cumsum(one, 0)),
                                      ir_of(cumsum(wide, -1)), ir_of(cumprod(small, 2)), ir_of(cumprod(one, -1))};
    if (dtype != DType::Bool) {
      scans.push_back(ir_of(cumsum(a * a - 1, 1) * 2));       // fused operand, consumer reads it back
      scans.push_back(ir_of(cumprod(small * 0.5 + 0.75, 0)));  // floats: products near 1
    }
    expect_matches_interpreter(scans, "scans " + name);

    const Tensor rows = Tensor::from_vector<int64_t>({36, 0, 5, 5, 17, 5}, {6});
    const Tensor src_rows = detail::make_pending(random_leaf(rng, dtype, {6, 53}, {-2, 2}));
    const Tensor src_cols = detail::make_pending(random_leaf(rng, dtype, {37, 6}, {-2, 2}));
    const Tensor per_element = Tensor::from_vector<int32_t>({2, 0, 2, 1, 1, 1, 0, 2}, {2, 4});
    const Tensor src_small = detail::make_pending(random_leaf(rng, dtype, {3, 5}, {-2, 2}));
    const Tensor none = Tensor::from_vector<int64_t>({}, {0});
    std::vector<ir::NodePtr> scatters = {
        ir_of(index_add(a, 0, rows, src_rows)), ir_of(index_add(a, -1, rows, src_cols)),
        ir_of(index_copy(a, 0, rows, src_rows)), ir_of(index_copy(a, 1, rows, src_cols)),
        ir_of(scatter_add(src_small, 0, per_element, src_small)), ir_of(scatter(src_small, 0, per_element, src_small)),
        ir_of(scatter_add(src_small, 1, per_element, src_small)), ir_of(scatter(src_small, -1, per_element, src_small)),
        ir_of(index_add(a, 0, none, detail::make_pending(random_leaf(rng, dtype, {0, 53}, {-2, 2})))),
        ir_of(index_put(a, Tensor::from_vector<int64_t>({-1, 3, -1}, {3}), slice(src_rows, 0, 0, 3), true)),
        ir_of(index_put(a, {Tensor::from_vector<int64_t>({-1, 3, -1, 0}, {4}), Tensor::from_vector<int32_t>({52, 0, 52, -53}, {4})},
                        reshape(slice(slice(src_rows, 0, 0, 1), 1, 0, 4), {4}), true))};
    if (dtype != DType::Bool) {
      scatters.push_back(ir_of(index_add(zeros({40, 53}, dtype), 0, rows, src_rows * 3) + 1));  // fused input and src
    }
    expect_matches_interpreter(scatters, "scatters " + name);

    const Tensor image = detail::make_pending(random_leaf(rng, dtype, {2, 3, 7, 6}, {-2, 2}));
    std::vector<ir::NodePtr> windows = {ir_of(unfold(image, 3)), ir_of(unfold(image, {2, 3}, {2, 1}, 1, {2, 3}))};
    if (dtype != DType::Bool) windows.push_back(ir_of(max_pool2d(image, 3, 2, 1)));
    expect_matches_interpreter(windows, "windows " + name);
  }
}

/// Random programs: a DAG of random ops over three leaves of broadcastable shapes, with
/// several results of different shapes (several kernels), and weak scalars.
TEST(Differential, RandomFusedPrograms) {
  const std::vector<OpRow> rows = elementwise_rows();
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> size(1, 9);
    const int64_t a = size(rng), b = size(rng);
    const ir::Shape shapes[] = {{a, b}, {a, 1}, {b}};
    std::vector<ir::NodePtr> pool;
    for (const ir::Shape& s : shapes) {
      const DType d = kDTypes[std::uniform_int_distribution<int>(1, 4)(rng)];
      pool.push_back(random_leaf(rng, d, s, {-2, 2}));
    }
    std::string program;
    for (int step = 0; step < 12; ++step) {
      const OpRow& row = rows[std::uniform_int_distribution<size_t>(0, rows.size() - 1)(rng)];
      if (row.op == OpKind::Log || row.op == OpKind::Sqrt || row.op == OpKind::Rsqrt || row.op == OpKind::Pow ||
          row.op == OpKind::Div || ir::divides(row.op)) {
        continue;  // domain-restricted: covered by OpTest
      }
      std::vector<ir::NodePtr> operands;
      for (int i = 0; i < row.arity; ++i) {
        if (std::uniform_int_distribution<int>(0, 4)(rng) == 0) {
          operands.push_back(ir::make_scalar(Scalar(0.5 * step - 1), DType::Float32));
        } else {
          operands.push_back(pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]);
        }
      }
      if (row.op == OpKind::Where) operands[0] = ir::make_cast(operands[0], DType::Bool);
      absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(row.op, operands);
      if (!node.ok()) continue;
      program += std::string(" ") + row.name;
      pool.push_back(*node);
    }
    std::vector<ir::NodePtr> results(pool.end() - std::min<size_t>(3, pool.size() - 3), pool.end());
    expect_matches_interpreter(results, fmt::format("random program seed {}:{}", seed, program));
  }
}

}  // namespace
}  // namespace lazyjit
