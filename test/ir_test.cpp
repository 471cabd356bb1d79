// Unit tests of lib/ir: shapes, dtype promotion, the builder, graph keys, the verifier, the
// printer and the reference interpreter.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "host_data.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/graph_diff.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/shape.h"
#include "ir/structured.h"
#include "ir/types.h"
#include "ir/verifier.h"
#include "lazyjit/backend.h"

namespace lazyjit::ir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::HostData;

template <class T>
std::shared_ptr<HostData> host_data(std::vector<int64_t> shape, const std::vector<T>& values) {
  auto data = std::make_shared<HostData>(dtype_of_v<T>, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), data->numel());
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t*>(data->data())[i] = values[i];
  } else {
    std::memcpy(data->data(), values.data(), values.size() * sizeof(T));
  }
  return data;
}

/// A Parameter leaf over a fresh (zeroed) buffer of `shape`.
NodePtr param(DType dtype, std::vector<int64_t> shape) {
  return make_parameter(std::make_shared<HostData>(dtype, std::move(shape)));
}

template <class T>
NodePtr param_of(std::vector<int64_t> shape, const std::vector<T>& values) {
  return make_parameter(host_data<T>(std::move(shape), values));
}

/// make_elementwise that must succeed.
NodePtr ew(OpKind op, std::vector<NodePtr> operands) {
  absl::StatusOr<NodePtr> node = make_elementwise(op, operands);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *node : nullptr;
}

/// The message of make_elementwise's error ("<ok>" when it succeeded).
std::string ew_error(OpKind op, std::vector<NodePtr> operands) {
  absl::StatusOr<NodePtr> node = make_elementwise(op, operands);
  return node.ok() ? std::string("<ok>") : std::string(node.status().message());
}

Graph graph_of(std::vector<NodePtr> roots) {
  return build_graph(roots);
}

Hash128 key_of(std::vector<NodePtr> roots) { return graph_of(std::move(roots)).key; }

/// Interprets the graph over `root` and returns its one result as doubles.
std::vector<double> eval(const NodePtr& root) {
  const Graph graph = graph_of({root});
  std::vector<HostTensor> results = interpret(graph);
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].dtype, root->dtype());
  std::vector<double> out;
  for (int64_t i = 0; i < results[0].numel(); ++i) out.push_back(results[0].as_double(i));
  return out;
}

/// Element i of a host tensor in its storage type (for exact integer checks).
template <class T>
T element(const HostTensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Shapes and broadcasting

TEST(ShapeTest, BroadcastCompatibleShapes) {
  auto check = [](std::vector<int64_t> a, std::vector<int64_t> b, Shape expected) {
    absl::StatusOr<Shape> s = broadcast_shapes("add", a, b);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(*s, expected) << shape_to_string(a) << " with " << shape_to_string(b);
  };
  check({2, 3}, {2, 3}, {2, 3});
  check({2, 3}, {3}, {2, 3});
  check({3}, {2, 3}, {2, 3});
  check({2, 1}, {1, 3}, {2, 3});
  check({}, {2, 3}, {2, 3});
  check({2, 3}, {}, {2, 3});
  check({5, 1, 3}, {4, 1}, {5, 4, 3});
  check({0}, {1}, {0});
  check({1}, {0}, {0});
  check({0, 3}, {3}, {0, 3});
  check({}, {}, {});
}

TEST(ShapeTest, BroadcastErrorNamesOpShapesAndDim) {
  absl::StatusOr<Shape> s = broadcast_shapes("add", std::vector<int64_t>{2, 3}, std::vector<int64_t>{4, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "add: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)");
}

TEST(ShapeTest, BroadcastErrorDimIsTheResultDim) {
  // Dims are right-aligned: [3] against [2,4] clashes at dim 1 of the result.
  absl::StatusOr<Shape> s = broadcast_shapes("mul", std::vector<int64_t>{3}, std::vector<int64_t>{2, 4});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "mul: shapes [3] and [2,4] cannot be broadcast (dim 1: 3 vs 4)");

  s = broadcast_shapes("sub", std::vector<int64_t>{0}, std::vector<int64_t>{2});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "sub: shapes [0] and [2] cannot be broadcast (dim 0: 0 vs 2)");
}

TEST(ShapeTest, ShapeToStringAndNumel) {
  EXPECT_EQ(shape_to_string(std::vector<int64_t>{2, 3}), "[2,3]");
  EXPECT_EQ(shape_to_string(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(shape_to_string(std::vector<int64_t>{7}), "[7]");
  EXPECT_EQ(numel(std::vector<int64_t>{2, 3, 4}), 24);
  EXPECT_EQ(numel(std::vector<int64_t>{}), 1);
  EXPECT_EQ(numel(std::vector<int64_t>{5, 0}), 0);
}

TEST(ShapeTest, UnitDimMask) {
  EXPECT_EQ(unit_dim_mask(std::vector<int64_t>{}), 0u);
  EXPECT_EQ(unit_dim_mask(std::vector<int64_t>{2, 3}), 0u);
  EXPECT_EQ(unit_dim_mask(std::vector<int64_t>{1, 3, 1}), 0b101u);
  EXPECT_EQ(unit_dim_mask(std::vector<int64_t>{4, 1}), 0b10u);
  EXPECT_EQ(unit_dim_mask(std::vector<int64_t>{0, 1}), 0b10u);  // 0 is not a unit dim
  std::vector<int64_t> wide(64, 2);
  wide[63] = 1;
  EXPECT_EQ(unit_dim_mask(wide), uint64_t{1} << 63);
}

TEST(ShapeTest, ValidateDimsAcceptsOrdinaryShapes) {
  EXPECT_TRUE(validate_dims("full", std::vector<int64_t>{}).ok());
  EXPECT_TRUE(validate_dims("full", std::vector<int64_t>{2, 3}).ok());
  EXPECT_TRUE(validate_dims("full", std::vector<int64_t>{0, int64_t{1} << 62}).ok());
  EXPECT_TRUE(validate_dims("full", std::vector<int64_t>(kMaxRank, 1)).ok());
}

TEST(ShapeTest, ValidateDimsErrors) {
  absl::Status s = validate_dims("full", std::vector<int64_t>{2, -1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "full: dim 1 of shape [2,-1] is negative");

  s = validate_dims("from_vector", std::vector<int64_t>(kMaxRank + 1, 1));
  EXPECT_EQ(s.message(), "from_vector: rank 65 is past the maximum of 64");

  s = validate_dims("zeros", std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(s.message(), "zeros: shape [1099511627776,1099511627776] has too many elements");
}

// ---------------------------------------------------------------------------------------------
// Dtype promotion and weak scalars

TEST(TypesTest, PromoteTypes) {
  EXPECT_EQ(promote_types(DType::Bool, DType::Bool), DType::Bool);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Int32, DType::Bool), DType::Int32);
  EXPECT_EQ(promote_types(DType::Int32, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int32, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::Float64, DType::Bool), DType::Float64);
}

TEST(TypesTest, WeakScalarStaysInTheTensorsCategory) {
  using K = Scalar::Kind;
  // A floating number keeps a floating tensor's dtype and makes others float32.
  EXPECT_EQ(weak_scalar_dtype(K::Floating, DType::Float32), DType::Float32);
  EXPECT_EQ(weak_scalar_dtype(K::Floating, DType::Float64), DType::Float64);
  EXPECT_EQ(weak_scalar_dtype(K::Floating, DType::Int32), DType::Float32);
  EXPECT_EQ(weak_scalar_dtype(K::Floating, DType::Int64), DType::Float32);
  EXPECT_EQ(weak_scalar_dtype(K::Floating, DType::Bool), DType::Float32);
  // An integer keeps integer and floating dtypes; with bool it is int64.
  EXPECT_EQ(weak_scalar_dtype(K::Integral, DType::Int32), DType::Int32);
  EXPECT_EQ(weak_scalar_dtype(K::Integral, DType::Int64), DType::Int64);
  EXPECT_EQ(weak_scalar_dtype(K::Integral, DType::Float32), DType::Float32);
  EXPECT_EQ(weak_scalar_dtype(K::Integral, DType::Bool), DType::Int64);
  // A bool never widens anything.
  for (DType d : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    EXPECT_EQ(weak_scalar_dtype(K::Bool, d), d);
  }
}

TEST(TypesTest, ScalarKinds) {
  EXPECT_EQ(Scalar(true).kind(), Scalar::Kind::Bool);
  EXPECT_EQ(Scalar(3).kind(), Scalar::Kind::Integral);
  EXPECT_EQ(Scalar(int64_t{3}).kind(), Scalar::Kind::Integral);
  EXPECT_EQ(Scalar(0.5f).kind(), Scalar::Kind::Floating);
  EXPECT_EQ(Scalar(0.5).kind(), Scalar::Kind::Floating);
  EXPECT_EQ(Scalar(2.75).to_int64(), 2);
  EXPECT_EQ(Scalar(7).to_double(), 7.0);
}

TEST(TypesTest, ScalarValueConvertsLikeCpp) {
  EXPECT_EQ(scalar_value(Scalar(0.5), DType::Bool).i, 1);
  EXPECT_EQ(scalar_value(Scalar(0.0), DType::Bool).i, 0);
  EXPECT_EQ(scalar_value(Scalar((int64_t{1} << 33) + 5), DType::Int32).i, 5);  // wraps to 32 bits
  EXPECT_EQ(scalar_value(Scalar(2.9), DType::Int64).i, 2);
  EXPECT_EQ(scalar_value(Scalar(0.1), DType::Float32).f, static_cast<double>(0.1f));  // rounded to float
  EXPECT_EQ(scalar_value(Scalar(0.1), DType::Float64).f, 0.1);
  EXPECT_EQ(scalar_value(Scalar(3), DType::Float64).f, 3.0);
}

// ---------------------------------------------------------------------------------------------
// The builder

TEST(BuilderTest, MixedIntFloatCastsTheIntOperand) {
  NodePtr i = param(DType::Int32, {2, 3});
  NodePtr f = param(DType::Float32, {2, 3});
  NodePtr add = ew(OpKind::Add, {i, f});
  ASSERT_TRUE(add);
  EXPECT_EQ(add->op(), OpKind::Add);
  EXPECT_EQ(add->dtype(), DType::Float32);
  ASSERT_EQ(add->operands().size(), 2u);
  const Node& cast = add->operand(0);
  EXPECT_EQ(cast.op(), OpKind::Cast);
  EXPECT_EQ(cast.dtype(), DType::Float32);
  ASSERT_EQ(cast.operands().size(), 1u);
  EXPECT_EQ(cast.operands()[0], i);
  EXPECT_EQ(add->operands()[1], f);  // already float32: no cast
}

TEST(BuilderTest, SameDtypeInsertsNoCast) {
  NodePtr a = param(DType::Int64, {4});
  NodePtr b = param(DType::Int64, {4});
  NodePtr mul = ew(OpKind::Mul, {a, b});
  ASSERT_TRUE(mul);
  EXPECT_EQ(mul->dtype(), DType::Int64);
  EXPECT_EQ(mul->operands()[0], a);
  EXPECT_EQ(mul->operands()[1], b);
}

TEST(BuilderTest, DivOfIntsIsFloat32) {
  NodePtr a = param(DType::Int32, {4});
  NodePtr b = param(DType::Int64, {4});
  NodePtr div = ew(OpKind::Div, {a, b});
  ASSERT_TRUE(div);
  EXPECT_EQ(div->dtype(), DType::Float32);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(div->operand(k).op(), OpKind::Cast);
    EXPECT_EQ(div->operand(k).dtype(), DType::Float32);
  }
  // float64 stays float64.
  NodePtr d = param(DType::Float64, {4});
  NodePtr div64 = ew(OpKind::Div, {a, d});
  ASSERT_TRUE(div64);
  EXPECT_EQ(div64->dtype(), DType::Float64);
  EXPECT_EQ(div64->operand(0).op(), OpKind::Cast);
  EXPECT_EQ(div64->operands()[1], d);
}

TEST(BuilderTest, TranscendentalsPromoteIntsToFloat32) {
  NodePtr i = param(DType::Int32, {3});
  NodePtr e = ew(OpKind::Exp, {i});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->dtype(), DType::Float32);
  EXPECT_EQ(e->operand(0).op(), OpKind::Cast);

  NodePtr d = param(DType::Float64, {3});
  NodePtr e64 = ew(OpKind::Exp, {d});
  ASSERT_TRUE(e64);
  EXPECT_EQ(e64->dtype(), DType::Float64);
  EXPECT_EQ(e64->operands()[0], d);
}

TEST(BuilderTest, ComparisonsGiveBoolAfterPromotingOperands) {
  NodePtr f = param(DType::Float32, {2});
  NodePtr i = param(DType::Int64, {2});
  NodePtr lt = ew(OpKind::Lt, {f, i});
  ASSERT_TRUE(lt);
  EXPECT_EQ(lt->dtype(), DType::Bool);
  EXPECT_EQ(lt->operands()[0], f);
  EXPECT_EQ(lt->operand(1).op(), OpKind::Cast);
  EXPECT_EQ(lt->operand(1).dtype(), DType::Float32);

  NodePtr b = param(DType::Bool, {2});
  NodePtr eq = ew(OpKind::Eq, {b, b});
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->dtype(), DType::Bool);
}

TEST(BuilderTest, LogicalOpsCastOperandsToBool) {
  NodePtr i = param(DType::Int32, {3});
  NodePtr f = param(DType::Float32, {3});
  NodePtr both = ew(OpKind::LogicalAnd, {i, f});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->dtype(), DType::Bool);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(both->operand(k).op(), OpKind::Cast);
    EXPECT_EQ(both->operand(k).dtype(), DType::Bool);
  }
  NodePtr n = ew(OpKind::LogicalNot, {f});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->dtype(), DType::Bool);
  EXPECT_EQ(n->operand(0).op(), OpKind::Cast);

  NodePtr b = param(DType::Bool, {3});
  NodePtr either = ew(OpKind::LogicalOr, {b, b});
  ASSERT_TRUE(either);
  EXPECT_EQ(either->operands()[0], b);
}

TEST(BuilderTest, BoolArithmeticRejectedWhereNumericOnly) {
  NodePtr b = param(DType::Bool, {3});
  EXPECT_EQ(ew_error(OpKind::Sub, {b, b}), "sub: bool operands are not supported");
  EXPECT_EQ(ew_error(OpKind::Neg, {b}), "neg: bool operands are not supported");
  EXPECT_EQ(ew_error(OpKind::Pow, {b, b}), "pow: bool operands are not supported");
  EXPECT_EQ(ew_error(OpKind::Abs, {b}), "abs: bool operands are not supported");
  // Add and mul on bool are logical or / and; bool with an int promotes to the int.
  EXPECT_EQ(ew_error(OpKind::Add, {b, b}), "<ok>");
  EXPECT_EQ(ew_error(OpKind::Mul, {b, b}), "<ok>");
  NodePtr sub = ew(OpKind::Sub, {b, param(DType::Int32, {3})});
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->dtype(), DType::Int32);
}

TEST(BuilderTest, WhereConditionMustBeBool) {
  NodePtr c = param(DType::Float32, {3});
  NodePtr a = param(DType::Float32, {3});
  EXPECT_EQ(ew_error(OpKind::Where, {c, a, a}), "where: condition must be bool, got float32");
  EXPECT_EQ(ew_error(OpKind::Where, {param(DType::Int64, {3}), a, a}), "where: condition must be bool, got int64");
}

TEST(BuilderTest, WherePromotesOnlyTheValues) {
  NodePtr c = param(DType::Bool, {2, 1});
  NodePtr a = param(DType::Int32, {3});
  NodePtr b = param(DType::Float64, {2, 3});
  NodePtr w = ew(OpKind::Where, {c, a, b});
  ASSERT_TRUE(w);
  EXPECT_EQ(w->dtype(), DType::Float64);
  EXPECT_EQ(w->shape(), (Shape{2, 3}));
  EXPECT_EQ(w->operands()[0], c);
  EXPECT_EQ(w->operand(1).op(), OpKind::Cast);
  EXPECT_EQ(w->operand(1).dtype(), DType::Float64);
  EXPECT_EQ(w->operands()[2], b);
}

TEST(BuilderTest, BroadcastsShapesAndReportsMismatch) {
  NodePtr a = param(DType::Float32, {2, 3});
  NodePtr row = param(DType::Float32, {3});
  NodePtr add = ew(OpKind::Add, {a, row});
  ASSERT_TRUE(add);
  EXPECT_EQ(add->shape(), (Shape{2, 3}));
  // The cast of a broadcast operand keeps the operand's own shape.
  NodePtr mixed = ew(OpKind::Mul, {a, param(DType::Int32, {2, 1})});
  ASSERT_TRUE(mixed);
  EXPECT_EQ(mixed->shape(), (Shape{2, 3}));
  EXPECT_EQ(mixed->operand(1).shape(), (Shape{2, 1}));

  EXPECT_EQ(ew_error(OpKind::Add, {a, param(DType::Float32, {4, 3})}),
            "add: shapes [2,3] and [4,3] cannot be broadcast (dim 0: 2 vs 4)");
  // Clamp broadcasts all three operands.
  EXPECT_EQ(ew_error(OpKind::Clamp, {a, param(DType::Float32, {3}), param(DType::Float32, {2})}),
            "clamp: shapes [2,3] and [2] cannot be broadcast (dim 1: 3 vs 2)");
}

TEST(BuilderTest, ArityAndKindErrors) {
  NodePtr a = param(DType::Float32, {3});
  EXPECT_EQ(ew_error(OpKind::Add, {a}), "add: expected 2 operands, got 1");
  EXPECT_EQ(ew_error(OpKind::Neg, {a, a}), "neg: expected 1 operands, got 2");
  EXPECT_EQ(ew_error(OpKind::Cast, {a}), "cast is not an elementwise op");
  EXPECT_EQ(ew_error(OpKind::Parameter, {}), "parameter is not an elementwise op");
}

TEST(BuilderTest, LeavesAndCasts) {
  NodePtr a = param(DType::Float32, {3});
  EXPECT_EQ(make_cast(a, DType::Float32), a);  // no-op cast is the node itself
  NodePtr c = make_cast(a, DType::Int64);
  EXPECT_EQ(c->op(), OpKind::Cast);
  EXPECT_EQ(c->dtype(), DType::Int64);
  EXPECT_EQ(c->shape(), (Shape{3}));

  NodePtr s = make_scalar(Scalar(2.5), DType::Float32);
  EXPECT_EQ(s->op(), OpKind::Scalar);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->scalar().f, 2.5);

  absl::StatusOr<NodePtr> r = make_arange(5, DType::Int32);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->shape(), (Shape{5}));
  EXPECT_EQ(make_arange(-1, DType::Int64).status().message(), "arange: n must be >= 0, got -1");
  EXPECT_EQ(make_arange(3, DType::Bool).status().message(), "arange: dtype bool is not supported");

  auto data = std::make_shared<HostData>(DType::Int32, std::vector<int64_t>{2, 2});
  NodePtr p = make_parameter(data);
  EXPECT_EQ(p->op(), OpKind::Parameter);
  EXPECT_EQ(p->dtype(), DType::Int32);
  EXPECT_EQ(p->shape(), (Shape{2, 2}));
  EXPECT_EQ(p->data().get(), data.get());
}

TEST(OpTableTest, NamesRoundTrip) {
  for (int i = 0; i < kNumOps; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    std::optional<OpKind> back = op_from_name(op_name(op));
    ASSERT_TRUE(back.has_value()) << op_name(op);
    EXPECT_EQ(*back, op);
  }
  EXPECT_FALSE(op_from_name("no_such_op").has_value());
  EXPECT_EQ(op_name(OpKind::LogicalAnd), "logical_and");
}

// ---------------------------------------------------------------------------------------------
// Graphs and keys

/// x * y + s over fresh buffers of `shape` and `dtype`.
NodePtr mul_add(DType dtype, std::vector<int64_t> shape, double s = 1.0) {
  NodePtr x = param(dtype, shape);
  NodePtr y = param(dtype, shape);
  return ew(OpKind::Add, {ew(OpKind::Mul, {x, y}), make_scalar(Scalar(s), dtype)});
}

TEST(GraphKeyTest, SameStructureDifferentSizesSameKey) {
  EXPECT_EQ(key_of({mul_add(DType::Float32, {2, 3})}), key_of({mul_add(DType::Float32, {5, 7})}));
  EXPECT_EQ(key_of({mul_add(DType::Float32, {0, 3})}), key_of({mul_add(DType::Float32, {1000, 3})}));
}

TEST(GraphKeyTest, KeyIsDeterministic) {
  const Hash128 a = key_of({mul_add(DType::Float32, {2, 3})});
  const Hash128 b = key_of({mul_add(DType::Float32, {2, 3})});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.to_hex().size(), 32u);
  EXPECT_EQ(a.to_hex().find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(GraphKeyTest, DtypeRankAndBroadcastPatternChangeTheKey) {
  const Hash128 base = key_of({mul_add(DType::Float32, {2, 3})});
  EXPECT_NE(base, key_of({mul_add(DType::Float64, {2, 3})}));  // dtype
  EXPECT_NE(base, key_of({mul_add(DType::Int32, {2, 3})}));
  EXPECT_NE(base, key_of({mul_add(DType::Float32, {6})}));        // rank
  EXPECT_NE(base, key_of({mul_add(DType::Float32, {2, 3, 4})}));
  EXPECT_NE(base, key_of({mul_add(DType::Float32, {1, 3})}));     // broadcast pattern
  EXPECT_NE(base, key_of({mul_add(DType::Float32, {2, 1})}));
  EXPECT_NE(key_of({mul_add(DType::Float32, {1, 3})}), key_of({mul_add(DType::Float32, {2, 1})}));

  // Broadcasting an operand against a full one: [2,3] + [3] vs [2,3] + [1,3] vs [2,3] + [2,3].
  auto bcast = [](std::vector<int64_t> b) {
    return key_of({ew(OpKind::Add, {param(DType::Float32, {2, 3}), param(DType::Float32, b)})});
  };
  EXPECT_NE(bcast({3}), bcast({1, 3}));
  EXPECT_NE(bcast({1, 3}), bcast({2, 3}));
  EXPECT_NE(bcast({2, 1}), bcast({1, 3}));
  EXPECT_EQ(bcast({3}), bcast({3}));
}

/// A reshape's groups: the finest runs of dims on both sides that hold the same elements,
/// one entry per result dim other than 1 (the operand dims its group takes, or 0 where no
/// group ends); none where they say no more than the linear index does.
TEST(StructuredTest, AReshapesGroupsAreTheFinestRunsOfDimsWithTheSameElements) {
  using Attrs = Node::Attrs;
  EXPECT_EQ(reshape_groups({16, 64, 4, 32}, {1024, 128}), (Attrs{2, 2}));  // a head merge
  EXPECT_EQ(reshape_groups({1024, 128}, {16, 64, 4, 32}), (Attrs{0, 1, 0, 1}));  // a head split
  EXPECT_EQ(reshape_groups({2, 3}, {2, 1, 3}), (Attrs{1, 1}));  // unit dims alone
  EXPECT_EQ(reshape_groups({1, 5, 1}, {5}), (Attrs{1}));
  EXPECT_EQ(reshape_groups({4, 6, 5}, {2, 2, 30}), (Attrs{0, 1, 2}));
  EXPECT_EQ(reshape_groups({6, 5, 4}, {2, 15, 4}), (Attrs{0, 2, 1}));  // two dims to two, then one
  EXPECT_EQ(reshape_groups({2, 1, 12}, {2, 3, 1, 4}), (Attrs{1, 0, 1}));
  EXPECT_EQ(reshape_groups({6, 4}, {4, 6}), Attrs{});   // one group, not dim for dim
  EXPECT_EQ(reshape_groups({16, 64}, {1024}), Attrs{});  // a flatten: the linear index
  EXPECT_EQ(reshape_groups({1, 1}, {1}), Attrs{});
  EXPECT_EQ(reshape_groups({3, 0, 4}, {0, 4}), Attrs{});
  EXPECT_EQ(reshape_groups({}, {1, 1}), Attrs{});
  EXPECT_TRUE(unit_dims_only({2, 3}, {2, 1, 3}));
  EXPECT_FALSE(unit_dims_only({2, 12}, {2, 3, 4}));
}

/// Which operands a product reads in place through a window: the walk from the operand
/// down to the buffer whose runs its rows are (window_rows_base).
TEST(StructuredTest, AWindowsRowsAreRunsOfItsBaseThroughPermutesSlicesAndReshapes) {
  auto structured = [](OpKind op, NodePtr operand, Node::Attrs attrs, std::vector<int64_t> to = {}) {
    const Shape shape(to.begin(), to.end());
    return *make_structured(op, {std::move(operand)}, std::move(attrs), to.empty() ? nullptr : &shape);
  };
  auto unfold = [&](NodePtr x, int64_t kh, int64_t kw, int64_t dh, int64_t dw) {
    return structured(OpKind::Unfold, std::move(x), {1, kh, kw, 1, 1, 0, 0, dh, dw});
  };
  // conv2d over the padded width: a window one column wide, its rows laid end to end, a
  // window one row high over them, cut to whole rows.
  const NodePtr padded = param(DType::Float32, {2, 3, 7, 8});
  const NodePtr columns = unfold(padded, 3, 1, 1, 1);  // [2, 1, 9, 5, 8]
  const NodePtr laid = structured(OpKind::Reshape, columns, {}, {2, 9, 1, 40});
  const NodePtr rows = unfold(laid, 1, 3, 1, 1);  // [2, 1, 27, 1, 38]
  const NodePtr b = structured(OpKind::Reshape, structured(OpKind::Slice, rows, {4, 0, 1}, {2, 1, 27, 1, 32}), {},
                               {2, 1, 27, 32});
  EXPECT_EQ(window_rows_base(*b), padded.get());
  // A window wider than one column: its rows laid end to end skip the columns it cannot
  // reach, so they are not one run.
  const NodePtr wide = unfold(padded, 3, 2, 1, 1);  // [2, 1, 18, 5, 7]
  EXPECT_EQ(window_rows_base(*structured(OpKind::Reshape, wide, {}, {2, 18, 1, 35})), nullptr);
  EXPECT_EQ(window_rows_base(*wide), padded.get());  // its rows alone are
  // A slice that skips along the rows, or cuts the inner dim of a merged run.
  EXPECT_EQ(window_rows_base(*structured(OpKind::Slice, wide, {4, 0, 2}, {2, 1, 18, 5, 4})), nullptr);
  const NodePtr cut = structured(OpKind::Slice, columns, {4, 0, 1}, {2, 1, 9, 5, 6});
  EXPECT_EQ(window_rows_base(*structured(OpKind::Reshape, cut, {}, {2, 9, 1, 30})), nullptr);
  // Rows read across a slice of the base's other dims, and a split of its last dim.
  const NodePtr top = structured(OpKind::Slice, padded, {2, 0, 1}, {2, 3, 6, 8});
  EXPECT_EQ(window_rows_base(*unfold(top, 3, 3, 1, 1)), padded.get());
  const NodePtr flat = param(DType::Float32, {2, 3, 56});
  EXPECT_EQ(window_rows_base(*unfold(structured(OpKind::Reshape, flat, {}, {2, 3, 7, 8}), 3, 3, 1, 1)), flat.get());
  // A value read through no window is not a window.
  EXPECT_EQ(window_rows_base(*structured(OpKind::Reshape, flat, {}, {6, 56})), nullptr);
}

/// The groups are in the graph key: sizes that keep them keep the key, sizes that change
/// them change it (a kernel maps its index by them).
TEST(GraphKeyTest, AReshapesGroupsAreInTheKeyAndTheirSizesAreNot) {
  auto merge = [](std::vector<int64_t> from, Shape to) {
    return key_of({*make_structured(OpKind::Reshape, {param(DType::Float32, std::move(from))}, {}, &to)});
  };
  EXPECT_EQ(merge({16, 64, 4, 32}, {1024, 128}), merge({8, 32, 2, 16}, {256, 32}));
  EXPECT_NE(merge({16, 64, 4, 32}, {1024, 128}), merge({16, 64, 4, 32}, {512, 256}));
}

/// A compile's explanation names a reshape whose new sizes group its dims otherwise, and
/// any other attrs that differ.
TEST(GraphKeyTest, TheDifferenceNamesAReshapesGroupsAndOtherAttrs) {
  auto reshaped = [](std::vector<int64_t> from, Shape to) {
    return graph_of({*make_structured(OpKind::Reshape, {param(DType::Float32, std::move(from))}, {}, &to)});
  };
  EXPECT_EQ(describe_difference(signature_of(reshaped({16, 64, 4, 32}, {512, 256})), signature_of(reshaped({16, 64, 4, 32}, {1024, 128}))),
            "node %1 (reshape): dim groups [], cached [2,2] (new sizes group the reshape's dims otherwise)");
  const NodePtr x = param(DType::Float32, {2, 3, 4});
  auto permuted = [&](Node::Attrs perm) { return graph_of({*make_structured(OpKind::Permute, {x}, std::move(perm))}); };
  EXPECT_EQ(describe_difference(signature_of(permuted({1, 0, 2})), signature_of(permuted({0, 2, 1}))),
            "node %1 (permute): attrs [1,0,2], cached [0,2,1]");
  EXPECT_EQ(describe_difference(signature_of(permuted({1, 0, 2})), signature_of(permuted({1, 0, 2}))), "");
}

TEST(GraphKeyTest, OpChangesTheKey) {
  NodePtr x = param(DType::Float32, {4});
  NodePtr y = param(DType::Float32, {4});
  EXPECT_NE(key_of({ew(OpKind::Add, {x, y})}), key_of({ew(OpKind::Sub, {x, y})}));
  EXPECT_NE(key_of({ew(OpKind::Add, {x, y})}), key_of({ew(OpKind::Add, {y, ew(OpKind::Neg, {x})})}));
}

TEST(GraphKeyTest, SameBufferTwiceDiffersFromTwoBuffers) {
  NodePtr x = param(DType::Float32, {4});
  NodePtr y = param(DType::Float32, {4});
  const Graph xx = graph_of({ew(OpKind::Mul, {x, x})});
  const Graph xy = graph_of({ew(OpKind::Mul, {x, y})});
  EXPECT_NE(xx.key, xy.key);
  EXPECT_EQ(xx.parameters.size(), 1u);
  EXPECT_EQ(xy.parameters.size(), 2u);

  // Two leaves over one buffer share a parameter slot.
  auto data = std::make_shared<HostData>(DType::Float32, std::vector<int64_t>{4});
  NodePtr p1 = make_parameter(data);
  NodePtr p2 = make_parameter(data);
  const Graph shared = graph_of({ew(OpKind::Mul, {p1, p2})});
  EXPECT_EQ(shared.parameters.size(), 1u);
  EXPECT_THAT(shared.parameter_slot, ElementsAre(0, 0, -1));
  NodePtr q1 = make_parameter(std::make_shared<HostData>(DType::Float32, std::vector<int64_t>{4}));
  NodePtr q2 = make_parameter(std::make_shared<HostData>(DType::Float32, std::vector<int64_t>{4}));
  EXPECT_NE(shared.key, key_of({ew(OpKind::Mul, {q1, q2})}));
}

TEST(GraphKeyTest, DagSharingIsPartOfTheKey) {
  NodePtr x = param(DType::Float32, {8});
  NodePtr a = ew(OpKind::Add, {x, make_scalar(Scalar(1.0), DType::Float32)});
  const Graph shared = graph_of({ew(OpKind::Mul, {a, a})});
  NodePtr a1 = ew(OpKind::Add, {x, make_scalar(Scalar(1.0), DType::Float32)});
  NodePtr a2 = ew(OpKind::Add, {x, make_scalar(Scalar(1.0), DType::Float32)});
  const Graph unshared = graph_of({ew(OpKind::Mul, {a1, a2})});
  EXPECT_NE(shared.key, unshared.key);
  EXPECT_EQ(shared.nodes.size(), 4u);    // x, s, add, mul
  EXPECT_EQ(unshared.nodes.size(), 6u);  // x, s1, add1, s2, add2, mul
}

TEST(GraphKeyTest, ScalarValuesAreNotInTheKey) {
  NodePtr x = param(DType::Float32, {8});
  EXPECT_EQ(key_of({ew(OpKind::Mul, {x, make_scalar(Scalar(0.5), DType::Float32)})}),
            key_of({ew(OpKind::Mul, {x, make_scalar(Scalar(0.25), DType::Float32)})}));
  EXPECT_EQ(key_of({mul_add(DType::Int64, {3, 3}, 1.0)}), key_of({mul_add(DType::Int64, {3, 3}, -7.0)}));
}

TEST(GraphTest, PostOrderParametersAndScalars) {
  NodePtr x = param(DType::Float32, {2, 3});
  NodePtr s = make_scalar(Scalar(2.0), DType::Float32);
  NodePtr y = param(DType::Float32, {3});
  NodePtr add = ew(OpKind::Add, {x, s});
  NodePtr mul = ew(OpKind::Mul, {add, y});
  const Graph g = graph_of({mul});
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_EQ(g.nodes[0], x.get());
  EXPECT_EQ(g.nodes[1], s.get());
  EXPECT_EQ(g.nodes[2], add.get());
  EXPECT_EQ(g.nodes[3], y.get());
  EXPECT_EQ(g.nodes[4], mul.get());
  EXPECT_THAT(g.roots, ElementsAre(4));
  EXPECT_EQ(g.index_of_root(0), 4);
  ASSERT_EQ(g.parameters.size(), 2u);
  EXPECT_EQ(g.parameters[0], x.get());
  EXPECT_EQ(g.parameters[1], y.get());
  EXPECT_THAT(g.parameter_slot, ElementsAre(0, -1, -1, 1, -1));
  EXPECT_THAT(g.scalars, ElementsAre(1));
  EXPECT_THAT(g.root_shape_class, ElementsAre(0));
}

TEST(GraphTest, SeveralRootsShareNodes) {
  NodePtr x = param(DType::Float32, {2, 3});
  NodePtr n = ew(OpKind::Neg, {x});
  NodePtr e = ew(OpKind::Exp, {n});
  NodePtr v = param(DType::Float32, {4});
  NodePtr a = ew(OpKind::Abs, {v});
  const Graph g = graph_of({e, a, n, e});
  // x, neg, exp, v, abs: each node once, operands first.
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_THAT(g.roots, ElementsAre(2, 4, 1, 2));
  // Roots with equal shapes share a shape class (the first root with that shape).
  EXPECT_THAT(g.root_shape_class, ElementsAre(0, 1, 0, 0));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const NodePtr& operand : g.nodes[i]->operands()) {
      auto it = std::find(g.nodes.begin(), g.nodes.end(), operand.get());
      ASSERT_NE(it, g.nodes.end());
      EXPECT_LT(static_cast<size_t>(it - g.nodes.begin()), i) << "operand after its user";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Verifier

TEST(VerifierTest, AcceptsBuilderGraphs) {
  NodePtr x = param(DType::Int32, {2, 3});
  NodePtr f = param(DType::Float32, {3});
  NodePtr c = ew(OpKind::Gt, {x, f});
  NodePtr w = ew(OpKind::Where, {c, x, f});
  NodePtr cl = ew(OpKind::Clamp, {w, make_scalar(Scalar(0.0), DType::Float32), make_scalar(Scalar(1.0), DType::Float32)});
  absl::Status s = verify(graph_of({cl, c}));
  EXPECT_TRUE(s.ok()) << s;
}

TEST(VerifierTest, WrongResultDtype) {
  NodePtr x = param(DType::Float32, {2, 3});
  NodePtr y = param(DType::Float32, {2, 3});
  auto bad = std::make_shared<Node>(OpKind::Add, DType::Int32, Shape{2, 3}, Node::Operands{x, y});
  absl::Status s = verify(graph_of({bad}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "verifier: %2 (add): result dtype int32 should be float32");
}

TEST(VerifierTest, CompareMustGiveBool) {
  NodePtr x = param(DType::Float32, {2});
  auto bad = std::make_shared<Node>(OpKind::Lt, DType::Float32, Shape{2}, Node::Operands{x, x});
  EXPECT_EQ(verify(graph_of({bad})).message(), "verifier: %1 (lt): result dtype float32 should be bool");
}

TEST(VerifierTest, OperandsOfDifferentDtypes) {
  NodePtr x = param(DType::Float32, {2});
  NodePtr i = param(DType::Int32, {2});
  NodePtr ok = ew(OpKind::Neg, {x});  // %1, fine
  auto bad = std::make_shared<Node>(OpKind::Mul, DType::Float32, Shape{2}, Node::Operands{ok, i});
  EXPECT_EQ(verify(graph_of({bad})).message(), "verifier: %3 (mul): operands differ in dtype");
}

TEST(VerifierTest, ArityAdmitsConditionShapeAndBuffer) {
  NodePtr b = param(DType::Bool, {2});
  NodePtr x = param(DType::Float32, {2});
  auto arity = std::make_shared<Node>(OpKind::Add, DType::Float32, Shape{2}, Node::Operands{x});
  EXPECT_EQ(verify(graph_of({arity})).message(), "verifier: %1 (add): has 1 operands, expected 2");

  auto admits = std::make_shared<Node>(OpKind::Sub, DType::Bool, Shape{2}, Node::Operands{b, b});
  EXPECT_EQ(verify(graph_of({admits})).message(), "verifier: %1 (sub): does not admit bool");

  auto cond = std::make_shared<Node>(OpKind::Where, DType::Float32, Shape{2}, Node::Operands{x, x, x});
  EXPECT_EQ(verify(graph_of({cond})).message(), "verifier: %1 (where): condition is not bool");

  auto shape = std::make_shared<Node>(OpKind::Add, DType::Float32, Shape{3}, Node::Operands{x, x});
  EXPECT_EQ(verify(graph_of({shape})).message(), "verifier: %1 (add): shape [3] is not the broadcast [2]");

  NodePtr wide = param(DType::Float32, {3});
  auto clash = std::make_shared<Node>(OpKind::Add, DType::Float32, Shape{2}, Node::Operands{x, wide});
  EXPECT_EQ(verify(graph_of({clash})).message(),
            "verifier: %2 (add): add: shapes [2] and [3] cannot be broadcast (dim 0: 2 vs 3)");

  auto orphan = std::make_shared<Node>(OpKind::Parameter, DType::Float32, Shape{2}, Node::Operands{});
  EXPECT_EQ(verify(graph_of({orphan})).message(), "verifier: %0 (parameter): has no buffer");
}

// ---------------------------------------------------------------------------------------------
// Printer

TEST(PrinterTest, SmallGraph) {
  NodePtr x = param(DType::Float32, {4, 8});
  NodePtr s = make_scalar(Scalar(1.5), DType::Float32);
  NodePtr mul = ew(OpKind::Mul, {x, s});
  const Graph g = graph_of({mul});
  EXPECT_EQ(print_graph(g, {.with_key = false}),
            "graph {\n"
            "  %0 = parameter 0 : float32[4,8]\n"
            "  %1 = scalar 1.5 : float32[]\n"
            "  %2 = mul %0, %1 : float32[4,8]\n"
            "  return %2\n"
            "}\n");
  EXPECT_EQ(print_graph(g), "// key " + g.key.to_hex() + "\n" + print_graph(g, {.with_key = false}));
}

TEST(PrinterTest, CastsIntScalarsBoolScalarsAndSeveralRoots) {
  NodePtr i = param(DType::Int32, {3});
  NodePtr j = param(DType::Int32, {3});
  NodePtr add = ew(OpKind::Add, {i, make_scalar(Scalar(7), DType::Int32)});
  NodePtr half = ew(OpKind::Div, {add, j});
  NodePtr b = ew(OpKind::LogicalAnd, {make_scalar(Scalar(true), DType::Bool), ew(OpKind::Lt, {i, j})});
  const Graph g = graph_of({half, b});
  EXPECT_EQ(print_graph(g, {.with_key = false}),
            "graph {\n"
            "  %0 = parameter 0 : int32[3]\n"
            "  %1 = scalar 7 : int32[]\n"
            "  %2 = add %0, %1 : int32[3]\n"
            "  %3 = cast %2 : float32[3]\n"
            "  %4 = parameter 1 : int32[3]\n"
            "  %5 = cast %4 : float32[3]\n"
            "  %6 = div %3, %5 : float32[3]\n"
            "  %7 = scalar true : bool[]\n"
            "  %8 = lt %0, %4 : bool[3]\n"
            "  %9 = logical_and %7, %8 : bool[3]\n"
            "  return %6, %9\n"
            "}\n");
}

// ---------------------------------------------------------------------------------------------
// Reference interpreter

TEST(InterpreterTest, BroadcastAdd) {
  NodePtr x = param_of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  NodePtr y = param_of<float>({3}, {10, 20, 30});
  EXPECT_THAT(eval(ew(OpKind::Add, {x, y})), ElementsAre(11, 22, 33, 14, 25, 36));

  NodePtr col = param_of<float>({2, 1}, {100, 200});
  NodePtr row = param_of<float>({1, 3}, {1, 2, 3});
  EXPECT_THAT(eval(ew(OpKind::Add, {col, row})), ElementsAre(101, 102, 103, 201, 202, 203));

  NodePtr scalar = make_scalar(Scalar(0.5), DType::Float32);
  EXPECT_THAT(eval(ew(OpKind::Mul, {x, scalar})), ElementsAre(0.5, 1, 1.5, 2, 2.5, 3));
}

TEST(InterpreterTest, MixedDtypesPromote) {
  NodePtr i = param_of<int32_t>({3}, {1, 2, 3});
  NodePtr f = param_of<double>({3}, {0.5, 0.25, 0.125});
  EXPECT_THAT(eval(ew(OpKind::Add, {i, f})), ElementsAre(1.5, 2.25, 3.125));
  NodePtr j = param_of<int32_t>({3}, {2, 4, -2});
  EXPECT_THAT(eval(ew(OpKind::Div, {i, j})), ElementsAre(0.5, 0.5, -1.5));  // true division
}

TEST(InterpreterTest, IntegerArithmeticWraps) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  NodePtr a = param_of<int32_t>({3}, {kMax, kMin, 65536});
  NodePtr b = param_of<int32_t>({3}, {1, -1, 65536});
  const Graph g = graph_of({ew(OpKind::Add, {a, b}), ew(OpKind::Sub, {a, b}), ew(OpKind::Mul, {a, b}),
                            ew(OpKind::Neg, {a}), ew(OpKind::Abs, {a})});
  std::vector<HostTensor> r = interpret(g);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(element<int32_t>(r[0], 0), kMin);          // max + 1
  EXPECT_EQ(element<int32_t>(r[0], 1), kMax);          // min + -1
  EXPECT_EQ(element<int32_t>(r[1], 0), kMax - 1);
  EXPECT_EQ(element<int32_t>(r[1], 1), kMin + 1);
  EXPECT_EQ(element<int32_t>(r[2], 2), 0);             // 2^16 * 2^16 wraps to 0
  EXPECT_EQ(element<int32_t>(r[2], 0), kMax);
  EXPECT_EQ(element<int32_t>(r[3], 1), kMin);          // -min wraps to min
  EXPECT_EQ(element<int32_t>(r[4], 1), kMin);          // |min| wraps to min

  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  NodePtr c = param_of<int64_t>({1}, {kMax64});
  std::vector<HostTensor> r64 = interpret(graph_of({ew(OpKind::Add, {c, make_scalar(Scalar(1), DType::Int64)})}));
  EXPECT_EQ(element<int64_t>(r64[0], 0), std::numeric_limits<int64_t>::min());
}

TEST(InterpreterTest, IntegerPow) {
  NodePtr base = param_of<int32_t>({9}, {2, 1, -1, -1, 0, 5, 3, -2, 2});
  NodePtr expo = param_of<int32_t>({9}, {-1, -5, -3, -2, -1, 0, 4, 3, 31});
  std::vector<HostTensor> r = interpret(graph_of({ew(OpKind::Pow, {base, expo})}));
  ASSERT_EQ(r[0].dtype, DType::Int32);
  const std::vector<int32_t> expected = {0, 1, -1, 1, 0, 1, 81, -8, std::numeric_limits<int32_t>::min()};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(element<int32_t>(r[0], i), expected[i]) << "element " << i;
}

TEST(InterpreterTest, MaximumAndMinimumPropagateNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  NodePtr a = param_of<double>({4}, {nan, 1.0, 2.0, -3.0});
  NodePtr b = param_of<double>({4}, {1.0, nan, -2.0, 3.0});
  std::vector<double> mx = eval(ew(OpKind::Maximum, {a, b}));
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 2.0);
  EXPECT_EQ(mx[3], 3.0);
  std::vector<double> mn = eval(ew(OpKind::Minimum, {a, b}));
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_TRUE(std::isnan(mn[1]));
  EXPECT_EQ(mn[2], -2.0);
  EXPECT_EQ(mn[3], -3.0);
}

TEST(InterpreterTest, ClampWithLoAboveHiGivesHi) {
  NodePtr x = param_of<float>({4}, {-5, 0, 2, 5});
  NodePtr lo = make_scalar(Scalar(3.0), DType::Float32);
  NodePtr hi = make_scalar(Scalar(1.0), DType::Float32);
  EXPECT_THAT(eval(ew(OpKind::Clamp, {x, lo, hi})), ElementsAre(1, 1, 1, 1));
  // Ordinary clamp, and NaN stays NaN.
  NodePtr y = param_of<float>({4}, {-5, 0.5f, 5, std::numeric_limits<float>::quiet_NaN()});
  std::vector<double> c = eval(ew(OpKind::Clamp, {y, hi, lo}));
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[1], 1);
  EXPECT_EQ(c[2], 3);
  EXPECT_TRUE(std::isnan(c[3]));
  NodePtr i = param_of<int32_t>({3}, {-5, 2, 9});
  EXPECT_THAT(eval(ew(OpKind::Clamp, {i, make_scalar(Scalar(4), DType::Int32), make_scalar(Scalar(1), DType::Int32)})),
              ElementsAre(1, 1, 1));
}

TEST(InterpreterTest, CastFloatToBoolIsNonzeroSoNanIsTrue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  NodePtr x = param_of<float>({5}, {nan, 0.0f, -0.0f, 0.5f, -2.0f});
  EXPECT_THAT(eval(make_cast(x, DType::Bool)), ElementsAre(1, 0, 0, 1, 1));
  NodePtr y = param_of<float>({3}, {2.7f, -2.7f, 1e3f});
  EXPECT_THAT(eval(make_cast(y, DType::Int32)), ElementsAre(2, -2, 1000));  // truncation
  NodePtr b = param_of<bool>({2}, {true, false});
  EXPECT_THAT(eval(make_cast(b, DType::Float64)), ElementsAre(1, 0));
}

TEST(InterpreterTest, ComparisonsWhereAndLogic) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  NodePtr a = param_of<double>({3}, {1.0, nan, 3.0});
  NodePtr b = param_of<double>({3}, {1.0, nan, 2.0});
  EXPECT_THAT(eval(ew(OpKind::Eq, {a, b})), ElementsAre(1, 0, 0));
  EXPECT_THAT(eval(ew(OpKind::Ne, {a, b})), ElementsAre(0, 1, 1));
  EXPECT_THAT(eval(ew(OpKind::Gt, {a, b})), ElementsAre(0, 0, 1));
  NodePtr c = param_of<bool>({3}, {true, false, true});
  NodePtr x = param_of<int32_t>({3}, {1, 2, 3});
  EXPECT_THAT(eval(ew(OpKind::Where, {c, x, make_scalar(Scalar(-1), DType::Int32)})), ElementsAre(1, -1, 3));
  NodePtr d = param_of<bool>({3}, {true, true, false});
  EXPECT_THAT(eval(ew(OpKind::Add, {c, d})), ElementsAre(1, 1, 1));  // bool add is or
  EXPECT_THAT(eval(ew(OpKind::Mul, {c, d})), ElementsAre(1, 0, 0));  // bool mul is and
  EXPECT_THAT(eval(ew(OpKind::LogicalNot, {x})), ElementsAre(0, 0, 0));
}

TEST(InterpreterTest, LeavesArangeScalarAndEmpty) {
  absl::StatusOr<NodePtr> r = make_arange(4, DType::Float32);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(eval(*r), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(eval(make_scalar(ScalarValue::of_int(9), DType::Int64, Shape{2, 2})), ElementsAre(9, 9, 9, 9));
  NodePtr empty = param(DType::Float32, {0, 3});
  EXPECT_TRUE(eval(ew(OpKind::Exp, {empty})).empty());
}

}  // namespace
}  // namespace lazyjit::ir
