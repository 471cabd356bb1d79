// The text form: print -> parse -> print round trips (text and key), parse errors name line,
// column and what was expected, and a bounded mutation fuzz never crashes the parser.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/host_buffer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace lazyjit::ir {
namespace {

using testing::HasSubstr;

NodePtr leaf(std::mt19937_64& rng, DType dtype, std::vector<int64_t> shape) {
  auto buffer = std::make_shared<HostBuffer>(dtype, shape);
  auto* bytes = static_cast<uint8_t*>(buffer->data());
  for (int64_t i = 0; i < buffer->size_bytes(); ++i) bytes[i] = static_cast<uint8_t>(rng());
  if (dtype == DType::Bool) {
    for (int64_t i = 0; i < buffer->numel(); ++i) bytes[i] &= 1;
  }
  return make_parameter(std::move(buffer));
}

/// A random well-formed graph over every elementwise op, with values on its parameters.
std::vector<NodePtr> random_graph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  constexpr DType kDTypes[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
  std::vector<NodePtr> pool = {leaf(rng, kDTypes[rng() % 5], {3, 4}), leaf(rng, kDTypes[rng() % 5], {4}),
                               leaf(rng, kDTypes[rng() % 5], {3, 1}),
                               make_scalar(Scalar(0.25 * static_cast<double>(rng() % 9)), DType::Float32),
                               make_constant(ScalarValue::of_int(static_cast<int64_t>(rng() % 5)), DType::Int32, {}),
                               *make_arange(4, DType::Int32)};
  for (int step = 0; step < 16; ++step) {
    const auto op = static_cast<OpKind>(rng() % kNumOps);
    if (op_info(op).access != AccessPattern::Elementwise) continue;
    std::vector<NodePtr> operands;
    for (int i = 0; i < op_info(op).arity; ++i) operands.push_back(pool[rng() % pool.size()]);
    if (op == OpKind::Cast) {
      pool.push_back(make_cast(operands[0], kDTypes[rng() % 5]));
      continue;
    }
    if (op == OpKind::Where) operands[0] = make_cast(operands[0], DType::Bool);
    absl::StatusOr<NodePtr> node = make_elementwise(op, operands);
    if (node.ok()) pool.push_back(*node);
  }
  return {pool.end() - 2, pool.end()};
}

Graph graph_of(const std::vector<NodePtr>& roots) {
  return build_graph(roots);
}

TEST(ParserTest, PrintParsePrintIsTheSameTextAndKey) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const Graph original = graph_of(random_graph(seed));
    const std::string text = print_graph(original, {.with_key = true, .with_values = true});
    absl::StatusOr<ParsedGraph> parsed = parse_graph(text);
    ASSERT_TRUE(parsed.ok()) << "seed " << seed << ": " << parsed.status() << "\n" << text;
    const Graph reread = graph_of(parsed->roots);
    EXPECT_EQ(reread.key, original.key) << "seed " << seed;
    EXPECT_EQ(print_graph(reread, {.with_key = true, .with_values = true}), text) << "seed " << seed;
    EXPECT_TRUE(verify(reread).ok());
  }
}

/// A reshape written without its groups gets them, as a traced one has them: the same key.
TEST(ParserTest, AReshapeWithoutGroupsGetsThem) {
  absl::StatusOr<ParsedGraph> parsed =
      parse_graph("graph {\n  %0 = parameter 0 : float32[8,3]\n  %1 = reshape %0 : float32[2,4,3]\n  return %1\n}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->roots[0]->attrs(), (Node::Attrs{0, 1, 1}));
}

std::string error_of(std::string_view text) {
  absl::StatusOr<ParsedGraph> parsed = parse_graph(text);
  return parsed.ok() ? "<parsed>" : std::string(parsed.status().message());
}

TEST(ParserTest, ErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_EQ(error_of(""), "line 1, column 1: expected 'graph', got end of input");
  EXPECT_EQ(error_of("graph {\n  %1 = scalar 1 : int32[]\n"),
            "line 2, column 3: expected %0 (values are numbered in order), got %1");
  EXPECT_EQ(error_of("graph {\n  %0 = scalar 1 : int33[]\n"),
            "line 2, column 19: expected a dtype (bool, int32, int64, float32, float64), got 'int33'");
  EXPECT_EQ(error_of("graph {\n  %0 = scalar 1.5 : int32[]\n"),
            "line 2, column 15: expected a int32 literal, got '1.5'");
  EXPECT_EQ(error_of("graph {\n  %0 = scalar 3000000000 : int32[]\n"),
            "line 2, column 15: expected a int32 literal, got '3000000000'");
  EXPECT_EQ(error_of("graph {\n  %0 = parameter 1 : float32[2]\n"),
            "line 2, column 18: expected parameter slot 0 or less (slots are numbered in order)");
  EXPECT_EQ(error_of("graph {\n  %0 = parameter 0 : float32[-2]\n"),
            "line 2, column 30: dims must not be negative, got -2");
  EXPECT_EQ(error_of("graph {\n  %0 = parameter 0 : float32[2]\n  %1 = parameter 0 : int32[2]\n"),
            "line 3, column 22: parameter 0 was declared float32[2] above");
  EXPECT_EQ(error_of("graph {\n  %0 = arange : bool[3]\n  return %0\n}"),
            "line 2, column 8: arange: expected a 1-D integer or float type");
  EXPECT_EQ(error_of("graph {\n  %0 = scalar 1 : int32[]\n  return %0\n}\n}"),
            "line 5, column 1: expected end of input after '}'");
  EXPECT_EQ(error_of("graph {\n  %0 = scalar 1 : int32[]\n  %1 = sub %0 : int32[]\n"),
            "line 3, column 8: sub: has 1 operands, expected 2");
  EXPECT_THAT(error_of("graph {\n  %0 = parameter 0 : float32[4096,4096,4096]\n"),
              HasSubstr("parameter too large for a text graph"));
  // A reshape's groups are checked against the shapes: a kernel trusts them.
  EXPECT_THAT(error_of("graph {\n  %0 = parameter 0 : float32[2,12]\n  %1 = reshape[1] %0 : float32[4,6]\n"),
              HasSubstr("reshape: attrs [1] do not group [2,12] to [4,6], whose groups are []"));
  EXPECT_THAT(error_of("graph {\n  %0 = parameter 0 : float32[8,3]\n  %1 = reshape[1,1] %0 : float32[2,4,3]\n"),
              HasSubstr("reshape: attrs [1,1] do not group [8,3] to [2,4,3], whose groups are [0,1,1]"));
  EXPECT_EQ(error_of("graph {\n  %0 = parameter 0 : float32[8,3]\n  %1 = reshape[0,1,1] %0 : float32[2,4,3]\n  return %1\n}"),
            "<parsed>");
  EXPECT_EQ(error_of("graph {\n  %0 = parameter 0 : float32[2,3]\n  %1 = reshape[1,1] %0 : float32[2,1,3]\n  return %1\n}"),
            "<parsed>");
}

/// Random edits of valid texts: deletions, insertions of grammar characters, duplications,
/// truncations. The parser answers every one with a graph that verifies or an error, never
/// a crash or a hang. Bounded in time so CI stays fast.
TEST(ParserTest, FuzzedTextNeverCrashes) {
  std::vector<std::string> seeds;
  for (uint64_t s = 1; s <= 20; ++s) {
    seeds.push_back(print_graph(graph_of(random_graph(s)), {.with_values = true}));
  }
  constexpr std::string_view kAlphabet = "%=:,[]{}()0123456789-+.e \n/abcdefghijklmnopqrstuvwxyz";
  std::mt19937_64 rng(0xf022);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int parsed_ok = 0, runs = 0;
  while (runs < 200000 && std::chrono::steady_clock::now() < deadline) {
    std::string text = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 5) {
        case 0: text.erase(at, 1 + rng() % 8); break;
        case 1: text.insert(at, 1, kAlphabet[rng() % kAlphabet.size()]); break;
        case 2: text.insert(at, text.substr(rng() % text.size(), rng() % 24)); break;
        case 3: text.resize(at); break;
        case 4: text[at] = kAlphabet[rng() % kAlphabet.size()]; break;
      }
    }
    absl::StatusOr<ParsedGraph> parsed = parse_graph(text);
    ++runs;
    if (!parsed.ok()) {
      EXPECT_THAT(std::string(parsed.status().message()), testing::StartsWith("line ")) << text;
      continue;
    }
    ++parsed_ok;
    const Graph graph = graph_of(parsed->roots);
    EXPECT_TRUE(verify(graph).ok()) << text;
  }
  EXPECT_GT(runs, 1000);
  RecordProperty("runs", runs);
  RecordProperty("parsed", parsed_ok);
}

}  // namespace
}  // namespace lazyjit::ir
