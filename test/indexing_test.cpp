// Indexing ops (index_select, gather, take_along_dim, embedding, one_hot, masked_fill, the
// scatters) and scans against the
// reference interpreter, and the kernel status word:
// an index out of range is a lazyjit::Error naming the op, the index and the bound, raised
// at the materialisation that finds it, with no tensor of that graph assigned and every
// input, donated or not, as it was.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "lazyjit/lazyjit.h"
#include "op_checks.h"

namespace lazyjit {
namespace {

/// `n` indices in [0, size), int32 or int64, materialised.
Tensor random_indices(std::mt19937& rng, int64_t n, int64_t size, DType dtype) {
  std::vector<int64_t> v(n);
  for (int64_t& i : v) i = size > 0 ? static_cast<int64_t>(rng() % size) : 0;
  Tensor t = dtype == DType::Int32 ? Tensor::from_vector<int32_t>(std::vector<int32_t>(v.begin(), v.end()), {n})
                                   : Tensor::from_vector<int64_t>(v, {n});
  sync({t});
  return t;
}

TEST(IndexSelectTest, MatchesTheInterpreterForEveryDtypeDimAndIndexType) {
  std::mt19937 rng(41);
  for (DType dtype : kAll) {
    for (DType index_dtype : {DType::Int32, DType::Int64}) {
      for (int trial = 0; trial < 6; ++trial) {
        const int rank = 1 + static_cast<int>(rng() % 3);
        Shape shape = random_shape(rng, rank);
        const int64_t dim = static_cast<int64_t>(rng() % rank) - (trial % 2 ? rank : 0);  // some negative
        const int64_t d = dim < 0 ? dim + rank : dim;
        if (shape[d] == 0) shape[d] = 3;  // something to select from
        const int64_t n = static_cast<int64_t>(rng() % 6);  // 0 included
        const Tensor x = random_tensor(rng, shape, dtype);
        const Tensor index = random_indices(rng, n, shape[d], index_dtype);
        expect_matches(index_select(x, dim, index),
                       fmt::format("index_select {} shape {} dim {} {} indices", dtype_name(dtype),
                                   fmt::join(shape, "x"), dim, n));
      }
    }
  }
}

TEST(IndexSelectTest, FusesWithProducersConsumersAndComputedIndices) {
  std::mt19937 rng(43);
  const Tensor x = random_tensor(rng, {7, 5}, DType::Float32);
  const Tensor w = random_tensor(rng, {6, 4}, DType::Float64);
  const Tensor index = random_indices(rng, 9, 7, DType::Int64);
  expect_matches(index_select(exp(x) * 2.0, 0, index) + 1.0, "of a computed operand");
  expect_matches(sum(index_select(x, 1, random_indices(rng, 3, 5, DType::Int32)), {1}), "into a fold", 3);
  // The row of each column's maximum: indices computed in the same graph.
  expect_matches(index_select(w, 0, reshape(argmax(x, 0), {5})) * 3.0, "at computed indices");
  // A rank-0 index selects one slice and keeps the dim.
  expect_matches(index_select(x, 0, Tensor::from_vector<int64_t>({4}, {})), "at a rank-0 index");
  const Metrics before = metrics();
  expect_matches(index_select(x, 0, index) * index_select(x, 0, index), "twice");
  EXPECT_EQ(metrics().kernels_launched - before.kernels_launched, 1);
}

TEST(IndexSelectTest, AnIndexOutOfRangeIsAnErrorNamingTheIndexAndTheBound) {
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  expect_error([&] { index_select(x, 0, Tensor::from_vector<int64_t>({0, 3}, {2})).to_vector<float>(); },
               "index_select: index 3 is out of range for dim 0 of size 3");
  expect_error([&] { index_select(x, 1, Tensor::from_vector<int32_t>({1, -1}, {2})).to_vector<float>(); },
               "index_select: index -1 is out of range for dim 1 of size 2");
  expect_error([&] { index_select(x, 0, Tensor::from_vector<int64_t>({int64_t{1} << 40}, {1})).to_vector<float>(); },
               "index_select: index 1099511627776 is out of range for dim 0 of size 3");
  expect_error([&] { index_select(zeros({0, 2}), 0, Tensor::from_vector<int64_t>({0}, {1})).to_vector<float>(); },
               "index_select: index 0 is out of range for dim 0 of size 0");
}

TEST(IndexSelectTest, ABadIndexInALargeRunFailsTheRunWhicheverThreadFindsIt) {
  const int64_t rows = 1 << 16;
  const Tensor table = randn({16, 32}, 3);
  for (int64_t bad_at : {int64_t{0}, rows / 2, rows - 1}) {
    std::vector<int64_t> v(rows);
    for (int64_t i = 0; i < rows; ++i) v[i] = i % 16;
    v[bad_at] = 16 + bad_at % 5;
    const Tensor y = index_select(table, 0, Tensor::from_vector<int64_t>(v, {rows})) * 2.0;
    expect_error([&] { sync({y}); },
                 fmt::format("index_select: index {} is out of range for dim 0 of size 16", 16 + bad_at % 5));
  }
}

// The failed graph assigns nothing: its other results stay pending, and once the index is
// fixed they materialise from the same inputs.
TEST(IndexSelectTest, AFailedRunAssignsNoResult) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor bad = Tensor::from_vector<int64_t>({2}, {1});
  const Tensor y = index_select(x, 0, bad) + 1.0;
  const Tensor z = x * 10.0;
  expect_error([&] { sync({y, z}); }, "index_select: index 2 is out of range for dim 0 of size 2");
  EXPECT_TRUE(y.impl()->ir() != nullptr);
  EXPECT_TRUE(z.impl()->ir() != nullptr);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
}

// At the step barrier a weight updated in place would give its buffer to the update's
// result; a step whose lookup fails must leave the weight as it was, so the kernel that
// checks runs before any kernel writes a donated buffer, and writes none itself.
TEST(IndexSelectTest, AFailedStepLeavesDonatedInputsAsTheyWere) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  mark_step();
  {  // a good step: the update of w takes over w's buffer
    const Tensor rows = index_select(w, 0, Tensor::from_vector<int64_t>({2, 0}, {2}));
    w -= 1.0;
    const int64_t donations = metrics().donations;
    mark_step();
    EXPECT_GT(metrics().donations, donations);
    EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{5, 6, 1, 2}));
  }
  const Tensor rows = index_select(w, 0, Tensor::from_vector<int64_t>({1, 3}, {2}));
  w -= 1.0;
  expect_error([&] { mark_step(); }, "index_select: index 3 is out of range for dim 0 of size 3");
  // w alone: its update runs once, from the values the failed step left intact.
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-1, 0, 1, 2, 3, 4}));
}

TEST(IndexSelectTest, BadArgumentsNameTheOpAndValues) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { index_select(x, 2, Tensor::from_vector<int64_t>({0}, {1})); },
               "index_select: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { index_select(x, 0, zeros({1})); }, "index_select: indices must be int32 or int64, got float32");
  expect_error([&] { index_select(x, 0, Tensor::from_vector<int64_t>({0, 1}, {1, 2})); },
               "index_select: the index must have rank 1, got shape [1,2]");
  expect_error([&] { index_select(zeros({}), 0, Tensor::from_vector<int64_t>({0}, {1})); },
               "index_select: a rank-0 tensor has no dim to select along");
}

/// Indices of `shape` in [0, size), int32 or int64, materialised.
Tensor random_index_tensor(std::mt19937& rng, const Shape& shape, int64_t size, DType dtype) {
  Tensor flat = random_indices(rng, numel(shape), size, dtype);
  Tensor t = reshape(flat, shape);
  sync({t});
  return t;
}

TEST(GatherTest, MatchesTheInterpreterForEveryDtypeDimAndIndexShape) {
  std::mt19937 rng(47);
  for (DType dtype : kAll) {
    for (int trial = 0; trial < 8; ++trial) {
      const int rank = 1 + static_cast<int>(rng() % 3);
      Shape shape = random_shape(rng, rank);
      const int64_t d = static_cast<int64_t>(rng() % rank);
      if (shape[d] == 0) shape[d] = 2;
      Shape index_shape = shape;  // no larger than the input outside dim, any size along it
      for (int64_t k = 0; k < rank; ++k) index_shape[k] = k == d ? static_cast<int64_t>(rng() % 4) : static_cast<int64_t>(rng() % (shape[k] + 1));
      const Tensor x = random_tensor(rng, shape, dtype);
      const Tensor index = random_index_tensor(rng, index_shape, shape[d], trial % 2 ? DType::Int32 : DType::Int64);
      expect_matches(gather(x, trial % 3 == 0 ? d - rank : d, index),
                     fmt::format("gather {} shape {} dim {} index {}", dtype_name(dtype), fmt::join(shape, "x"), d,
                                 fmt::join(index_shape, "x")));
    }
  }
}

TEST(GatherTest, TakeAlongDimBroadcastsAndPicksTheArgmax) {
  std::mt19937 rng(53);
  const Tensor x = random_tensor(rng, {4, 6}, DType::Float32);
  // The maximum of each row, found by its index: amax's value.
  const Tensor best = take_along_dim(x, unsqueeze(argmax(x, 1), 1), 1);
  EXPECT_EQ(best.to_vector<float>(), amax(x, {1}, true).to_vector<float>());
  expect_matches(take_along_dim(x, random_index_tensor(rng, {1, 3}, 6, DType::Int64), 1) * 2.0, "broadcast index");
  expect_matches(take_along_dim(random_tensor(rng, {1, 5}, DType::Int32), random_index_tensor(rng, {3, 2}, 5, DType::Int64), -1),
                 "broadcast tensor");
}

TEST(GatherTest, AnIndexOutOfRangeAndBadShapesAreErrors) {
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  expect_error([&] { gather(x, 1, Tensor::from_vector<int64_t>({0, 3, 1, 1}, {2, 2})).to_vector<float>(); },
               "gather: index 3 is out of range for dim 1 of size 3");
  expect_error([&] { gather(x, 0, Tensor::from_vector<int32_t>({-1}, {1, 1})).to_vector<float>(); },
               "gather: index -1 is out of range for dim 0 of size 2");
  expect_error([&] { gather(x, 0, Tensor::from_vector<int64_t>({0, 0, 0, 0}, {1, 4})); },
               "gather: index shape [1,4] exceeds input shape [2,3] in dim 1");
  expect_error([&] { gather(x, 0, Tensor::from_vector<int64_t>({0}, {1})); },
               "gather: the index must have the input's rank 2, got shape [1]");
  expect_error([&] { gather(x, 2, Tensor::from_vector<int64_t>({0}, {1, 1})); },
               "gather: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { take_along_dim(x, Tensor::from_vector<int64_t>({0}, {1}), 0); },
               "take_along_dim: the indices must have the tensor's rank 2, got shape [1]");
}

// A fused index that is the same for every element (a pending zeros) has its check hoisted
// out of the element loop; over a dim of 0 that loop runs no iteration, so there is no index
// to check (PyTorch's topk(empty, 0) then sum). Hoisted, the check once failed on the index
// no element reads. Out of a loop that runs, it still fails.
TEST(GatherTest, AnIndexNoElementReadsIsNotChecked) {
  EXPECT_EQ(sum(gather(zeros({0}), 0, zeros({0}, DType::Int64))).item<float>(), 0.0f);
  EXPECT_EQ(sum(gather(zeros({3, 0}), 1, zeros({3, 0}, DType::Int64)), {1}).to_vector<float>(),
            (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(sum(index_select(zeros({0, 2}), 0, zeros({0}, DType::Int64))).item<float>(), 0.0f);
  expect_error([&] { sum(gather(zeros({2}), 0, full({3}, int64_t{5}, DType::Int64))).item<float>(); },
               "gather: index 5 is out of range for dim 0 of size 2");
}

TEST(EmbeddingTest, RowsAtIndicesOfAnyShape) {
  const Tensor weight = Tensor::from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor rows = embedding(weight, Tensor::from_vector<int64_t>({2, 0, 1, 2}, {2, 2}));
  EXPECT_EQ(rows.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 10, 11, 20, 21}));
  // The lookup is an index_select inside; its error names the op the user called.
  expect_error([&] { embedding(weight, Tensor::from_vector<int64_t>({3}, {1})).to_vector<float>(); },
               "embedding: index 3 is out of range for dim 0 of size 3");
  expect_error([&] { embedding(weight, Tensor::from_vector<int32_t>({-1}, {1, 1}) + 0).to_vector<float>(); },
               "embedding: index -1 is out of range for dim 0 of size 3");
  expect_error([&] { embedding(weight, zeros({2})); }, "embedding: indices must be int32 or int64, got float32");
  expect_error([&] { embedding(zeros({3}), Tensor::from_vector<int64_t>({0}, {1})); },
               "embedding: the weight must have rank 2 ([num_embeddings, dim]), got shape [3]");
}

TEST(MaskedFillTest, FillsWhereTheBroadcastMaskIsTrue) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(masked_fill(x, mask, -1.0).to_vector<float>(), (std::vector<float>{-1, 2, -1, -1, 5, -1}));
  expect_error([&] { masked_fill(x, zeros({3}), 0.0); }, "masked_fill: the mask must be bool, got float32");
  expect_error([&] { masked_fill(x, Tensor::from_vector<bool>({true, false}, {2, 1, 1}), 0.0); },
               "masked_fill: a mask of shape [2,1,1] does not broadcast to the tensor's shape [2,3]");
}

TEST(OneHotTest, MatchesTheInterpreterAndNamesAClassOutOfRange) {
  std::mt19937 rng(59);
  for (DType dtype : {DType::Int32, DType::Int64}) {
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{0}, Shape{3, 4}}) {
      const Tensor classes = random_index_tensor(rng, shape, 6, dtype);
      expect_matches(one_hot(classes, 6), fmt::format("one_hot {} of shape {}", dtype_name(dtype), fmt::join(shape, "x")));
    }
  }
  const Tensor hot = one_hot(Tensor::from_vector<int64_t>({2, 0}, {2}), 3);
  EXPECT_EQ(hot.dtype(), DType::Int64);
  EXPECT_EQ(hot.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0}));
  expect_error([&] { one_hot(Tensor::from_vector<int64_t>({1, 3}, {2}), 3).to_vector<int64_t>(); },
               "one_hot: index 3 is out of range for 3 classes");
  expect_error([&] { one_hot(Tensor::from_vector<int32_t>({-2}, {1}), 3).to_vector<int64_t>(); },
               "one_hot: index -2 is out of range for 3 classes");
  expect_error([&] { one_hot(zeros({2}), 3); }, "one_hot: indices must be int32 or int64, got float32");
  expect_error([&] { one_hot(Tensor::from_vector<int64_t>({0}, {1}), -1); },
               "one_hot: num_classes must be given and at least 0, got -1 (a count read from the data would make "
               "the shape depend on it)");
}

TEST(ScatterTest, AddsInSrcOrderAndCopiesKeepTheLastWrite) {
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  const Tensor src = Tensor::from_vector<float>({10, 20, 30, 40, 50, 60}, {3, 2});
  const Tensor rows = Tensor::from_vector<int64_t>({2, 0, 2}, {3});
  EXPECT_EQ(index_add(x, 0, rows, src).to_vector<float>(), (std::vector<float>{30, 41, 2, 3, 64, 85}));
  EXPECT_EQ(index_add(x, 0, rows, src, 2).to_vector<float>(), (std::vector<float>{60, 81, 2, 3, 124, 165}));
  EXPECT_EQ(index_copy(x, 0, rows, src).to_vector<float>(), (std::vector<float>{30, 40, 2, 3, 50, 60}));
  const Tensor per_element = Tensor::from_vector<int32_t>({1, 1, 0, 1}, {2, 2});
  EXPECT_EQ(scatter_add(x, 1, per_element, src).to_vector<float>(), (std::vector<float>{0, 31, 32, 43, 4, 5}));
  EXPECT_EQ(scatter(x, 1, per_element, src).to_vector<float>(), (std::vector<float>{0, 20, 30, 40, 4, 5}));
  // t[index] = values with negative indices and a broadcast value, as PyTorch's index_put.
  EXPECT_EQ(index_put(x, Tensor::from_vector<int64_t>({-1, 0}, {2}), full({2}, 7.0)).to_vector<float>(),
            (std::vector<float>{7, 7, 2, 3, 7, 7}));
  EXPECT_EQ(index_put(x, Tensor::from_vector<int64_t>({1, -2}, {2}), full({1}, 1.0), true).to_vector<float>(),
            (std::vector<float>{0, 1, 4, 5, 4, 5}));
}

// t[i0, i1] = values, as PyTorch's index_put with a tuple of indices: the indices broadcast
// together, each selects along its own dim, the dims after them go whole; negative indices
// count from the end; accumulate adds repeated positions in order.
TEST(ScatterTest, IndexPutWithOneIndexPerLeadingDim) {
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector<float>(values, {3, 4, 2});
  const Tensor i0 = Tensor::from_vector<int64_t>({0, 2, -1}, {3});
  const Tensor i1 = Tensor::from_vector<int32_t>({1, -1, 0}, {3});
  std::vector<float> expected = values;
  for (int64_t c = 0; c < 2; ++c) {
    expected[(0 * 4 + 1) * 2 + c] = 100;
    expected[(2 * 4 + 3) * 2 + c] = 101;  // (2, -1) is (2, 3); (-1, 0) is (2, 0)
    expected[(2 * 4 + 0) * 2 + c] = 102;
  }
  EXPECT_EQ(index_put(x, {i0, i1}, Tensor::from_vector<float>({100, 101, 102}, {3, 1})).to_vector<float>(), expected);
  // A whole row (index 0 broadcast against a column of indices), all three dims, and adds.
  const Tensor row = Tensor::from_vector<int64_t>({1}, {1});
  const Tensor columns = Tensor::from_vector<int64_t>({0, 1, 2, 3}, {4});
  std::vector<float> filled = values;
  for (int64_t c = 0; c < 8; ++c) filled[8 + c] = -1;
  EXPECT_EQ(index_put(x, {row, columns}, full({}, -1.0)).to_vector<float>(), filled);
  const Tensor twice = Tensor::from_vector<int64_t>({2, 2}, {2});
  std::vector<float> added = values;
  added[(2 * 4 + 3) * 2 + 1] += 10 + 20;
  EXPECT_EQ(index_put(x, {twice, Tensor::from_vector<int64_t>({3}, {1}), Tensor::from_vector<int64_t>({-1}, {1})},
                      Tensor::from_vector<float>({10, 20}, {2}), true)
                .to_vector<float>(),
            added);
  // Each index is checked against its own dim, in range of the others' or not.
  expect_error([&] { index_put(x, {i0, Tensor::from_vector<int64_t>({1, 4, 0}, {3})}, ones({2})).to_vector<float>(); },
               "index_put: index 4 is out of range for dim 1 of size 4");
  expect_error([&] { index_put(x, {Tensor::from_vector<int64_t>({-4}, {1}), row}, ones({2})).to_vector<float>(); },
               "index_put: index -4 is out of range for dim 0 of size 3");
  expect_error([&] { index_put(x, {row, row, Tensor::from_vector<int64_t>({2}, {1})}, ones({})).to_vector<float>(); },
               "index_put: index 2 is out of range for dim 2 of size 2");
  expect_error([&] { index_put(x, {row, row, row, row}, ones({})); },
               "index_put: expected one to 3 index tensors for a tensor of shape [3,4,2], got 4");
  expect_error([&] { index_put(x, {row, full({1}, 1.0).to(DType::Bool)}, ones({})); },
               "index_put: index 1 of 2 must be int32 or int64 (a bool mask goes alone), got bool");
  expect_error([&] { index_put(x, {i0, Tensor::from_vector<int64_t>({0, 1}, {2})}, ones({})); },
               "index_put: index 1 of shape [2] does not broadcast with the others' [3]");
}

// Sizes are not in the graph key: a scatter whose index covers its input's lines and one whose
// index is narrower share a compiled kernel, which must still leave the uncovered lines alone.
TEST(ScatterTest, AKernelCompiledForACoveringIndexServesANarrowerOne) {
  const Tensor index = Tensor::from_vector<int64_t>({2, 0, 1, 2, 0, 0, 2, 1}, {2, 4});
  const Tensor wide = scatter_add(zeros({3, 4}), 0, index, ones({2, 4}));
  EXPECT_EQ(wide.to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1}));
  const int64_t planned = metrics().graphs_planned;
  const Tensor narrow = scatter_add(zeros({3, 5}), 0, index, ones({2, 5}));
  EXPECT_EQ(narrow.to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(metrics().graphs_planned, planned);  // the same graph key: its plan and kernels reused
}

// An index of one row, narrower than the input's lines, with a larger src: the lines past the
// index's columns read no index. Its check once ran on every line, outside the loop that the
// index's coverage guards: it read past the index's end and failed with that garbage as the
// index out of range (tier 0), or read it and passed (compiled code).
TEST(ScatterTest, TheLinesPastANarrowIndexReadNoIndex) {
  const Tensor src = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(scatter_add(zeros({4, 5}), 0, Tensor::from_vector<int64_t>({3, 1}, {1, 2}), src).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(scatter_add(zeros({4, 5}), 1, Tensor::from_vector<int64_t>({1, 0}, {2, 1}), src).to_vector<float>(),
            (std::vector<float>{0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(ScatterTest, AnIndexOutOfRangeAndBadArgumentsAreErrors) {
  const Tensor x = zeros({3, 2});
  expect_error([&] { index_add(x, 0, Tensor::from_vector<int64_t>({0, 3}, {2}), ones({2, 2})).to_vector<float>(); },
               "index_add: index 3 is out of range for dim 0 of size 3");
  expect_error([&] { index_copy(x, 1, Tensor::from_vector<int32_t>({-1}, {1}), ones({3, 1})).to_vector<float>(); },
               "index_copy: index -1 is out of range for dim 1 of size 2");
  expect_error([&] { scatter_add(x, 1, Tensor::from_vector<int64_t>({0, 2}, {1, 2}), ones({1, 2})).to_vector<float>(); },
               "scatter_add: index 2 is out of range for dim 1 of size 2");
  expect_error([&] { scatter(x, 0, Tensor::from_vector<int64_t>({5}, {1, 1}), ones({1, 1})).to_vector<float>(); },
               "scatter: index 5 is out of range for dim 0 of size 3");
  expect_error([&] { index_put(x, Tensor::from_vector<int64_t>({-4}, {1}), ones({2})).to_vector<float>(); },
               "index_put: index -4 is out of range for dim 0 of size 3");
  expect_error([&] { index_put(x, Tensor::from_vector<int64_t>({1, 3}, {2}), ones({2}), true).to_vector<float>(); },
               "index_put: index 3 is out of range for dim 0 of size 3");
  expect_error([&] { index_add(zeros({0, 2}), 0, Tensor::from_vector<int64_t>({0}, {1}), ones({1, 2})).to_vector<float>(); },
               "index_add: index 0 is out of range for dim 0 of size 0");
  expect_error([&] { index_add(x, 0, Tensor::from_vector<int64_t>({0}, {1}), ones({1, 3})); },
               "index_add: src shape [1,3] should be [3,2] with 1 indices along dim 0");
  expect_error([&] { index_add(x, 0, Tensor::from_vector<int64_t>({0}, {1}), ones({1, 2}, DType::Float64)); },
               "index_add: src must have the input's dtype float32, got float64");
  expect_error([&] { scatter_add(x, 0, Tensor::from_vector<int64_t>({0, 1, 2}, {1, 3}), ones({1, 3})); },
               "scatter_add: index shape [1,3] exceeds src shape [1,3] or input shape [3,2] in dim 1");
  expect_error([&] { scatter(x, 2, Tensor::from_vector<int64_t>({0}, {1, 1}), ones({1, 1})); },
               "scatter: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { index_add(x, 0, zeros({1}), ones({1, 2})); }, "index_add: indices must be int32 or int64, got float32");
  expect_error([&] { index_put(x, zeros({1}), ones({2})); },
               "index_put: indices must be int32, int64 or a bool mask, got float32");
}

// t[mask] = values, as PyTorch's index_put with a bool mask: the mask covers the leading
// dims, and the values one selected row (the selection's size is data, so they cannot depend on it).
TEST(ScatterTest, ABoolMaskPutsOneValueOrOneRowAtEverySelectedPlace) {
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  const Tensor rows = Tensor::from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(index_put(x, rows, full({}, 9.0)).to_vector<float>(), (std::vector<float>{9, 9, 2, 3, 9, 9}));
  EXPECT_EQ(index_put(x, rows, Tensor::from_vector<float>({7, 8}, {1, 2})).to_vector<float>(),
            (std::vector<float>{7, 8, 2, 3, 7, 8}));
  EXPECT_EQ(index_put(x, rows, Tensor::from_vector<float>({10, 20}, {2}), true).to_vector<float>(),
            (std::vector<float>{10, 21, 2, 3, 14, 25}));
  const Tensor elements = lt(x, 2.5);  // x[x < 2.5] = -1
  EXPECT_EQ(index_put(x, elements, full({}, -1.0)).to_vector<float>(), (std::vector<float>{-1, -1, -1, 3, 4, 5}));
  EXPECT_EQ(index_put(x, full({}, 1.0).to(DType::Bool), full({}, 4.0)).to_vector<float>(),
            (std::vector<float>{4, 4, 4, 4, 4, 4}));
  expect_error([&] { index_put(x, rows, ones({2, 2})); },
               "index_put: values of shape [2,2] do not broadcast to [1,2], one row of the selection: with a bool mask "
               "the selection's size depends on the data, so the values cannot");
  expect_error([&] { index_put(x, Tensor::from_vector<bool>({true, false}, {2}), full({}, 1.0)); },
               "index_put: a bool mask of shape [2] must match the leading dims of the tensor's shape [3,2]");
  expect_error([&] { index_put(x, rows, full({}, 1.0, DType::Float64)); },
               "index_put: values must have the input's dtype float32, got float64");
}

// A failed scatter leaves every input as it was, also one whose buffer a result of the same
// step could have taken over.
TEST(ScatterTest, AFailedStepLeavesDonatedInputsAsTheyWere) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  mark_step();
  Tensor updated = index_add(w, 0, Tensor::from_vector<int64_t>({1, 3}, {2}), ones({2, 2}));
  w -= 1.0;
  expect_error([&] { mark_step(); }, "index_add: index 3 is out of range for dim 0 of size 3");
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(ScanTest, RunningSumsAndProductsInPyTorchsDtypes) {
  const Tensor x = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(cumsum(x, 1).dtype(), DType::Int64);
  EXPECT_EQ(cumsum(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(cumsum(x, -2).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(cumprod(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 6, 4, 20, 120}));
  EXPECT_EQ(cumsum(Tensor::from_vector<bool>({true, false, true}, {3}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(cumsum(full({}, 2.5), -1).to_vector<float>(), (std::vector<float>{2.5f}));
  // Float32 accumulates in float64: 2^24 + 1 + 1 keeps both ones before the store rounds.
  EXPECT_EQ(cumsum(Tensor::from_vector<float>({16777216.0f, 1, 1}, {3}), 0).to_vector<float>(),
            (std::vector<float>{16777216.0f, 16777216.0f, 16777218.0f}));
  expect_error([&] { cumsum(x, 2); }, "cumsum: dim 2 is out of range for a tensor of rank 2 (expected -2 to 1)");
  expect_error([&] { cumprod(full({}, 1.0), 1); }, "cumprod: dim 1 is out of range for a tensor of rank 0 (expected -1 to 0)");
}

}  // namespace
}  // namespace lazyjit
