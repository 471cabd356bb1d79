// The kernel code cache: each distinct kernel compiles once, whichever graph it is in.
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lazyjit {
namespace {

/// A pre-norm residual MLP block: x + W2 gelu(W1 layer_norm(x)).
struct Block {
  nn::Linear up, down;
  explicit Block(uint64_t seed) : up(32, 64, seed), down(64, 32, seed + 1) {}
  Tensor operator()(const Tensor& x) const { return x + down(gelu(up(layer_norm(x, 1, Tensor(), Tensor(), 1e-5)))); }
};

/// The forward pass of `depth` blocks over a batch, between an input projection (as a
/// transformer's embedding) and a normalised head, and its loss.
struct Model {
  std::vector<Block> blocks;
  nn::Linear embed{32, 32, 77};
  nn::Linear head{32, 4, 99};
  explicit Model(int depth) {
    for (int b = 0; b < depth; ++b) blocks.emplace_back(10 * b + 1);
  }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all = head.parameters();
    for (const Tensor& p : embed.parameters()) all.push_back(p);
    for (const Block& b : blocks) {
      for (const Tensor& p : b.up.parameters()) all.push_back(p);
      for (const Tensor& p : b.down.parameters()) all.push_back(p);
    }
    return all;
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = embed(x);
    for (const Block& b : blocks) h = b(h);
    return nn::mse_loss(head(layer_norm(h, 1, Tensor(), Tensor(), 1e-5)), y);
  }
};

Tensor batch(uint64_t seed, std::vector<int64_t> shape) { return randn(std::move(shape), seed); }

/// Kernels compiled by one training step of `model` (forward, backward, SGD, one graph).
int64_t kernels_compiled_by_a_step(Model& model) {
  for (Tensor& p : model.parameters()) p.requires_grad_();
  optim::SGD opt(model.parameters(), {.lr = 0.01});
  mark_step();  // the parameters' initial values, on their own
  const int64_t before = metrics().kernels_compiled;
  model.loss(batch(1, {8, 32}), batch(2, {8, 4})).backward();
  opt.step();
  opt.zero_grad();
  mark_step();
  return metrics().kernels_compiled - before;
}

/// Kernels compiled by the forward pass of `model` (its loss, read).
int64_t kernels_compiled_by_a_forward_pass(Model& model) {
  mark_step();  // the parameters' initial values, on their own
  const int64_t before = metrics().kernels_compiled;
  EXPECT_GT(model.loss(batch(1, {8, 32}), batch(2, {8, 4})).item<float>(), 0.0f);
  return metrics().kernels_compiled - before;
}

// A new graph made of a known graph and one more result compiles one kernel, not the graph.
TEST(KernelCacheTest, ANewGraphCompilesOnlyItsNewKernels) {
  Model model(2);
  const int64_t first = kernels_compiled_by_a_forward_pass(model);
  EXPECT_GT(first, 1);
  const Metrics before = metrics();
  const Tensor loss = model.loss(batch(1, {8, 32}), batch(2, {8, 4}));
  const Tensor extra = sum(batch(5, {3, 7}) * 2.0, {1});
  sync({loss, extra});
  const Metrics after = metrics();
  EXPECT_EQ(after.kernels_compiled - before.kernels_compiled, 1);
  EXPECT_EQ(after.kernel_cache_hits - before.kernel_cache_hits, after.kernels_launched - before.kernels_launched - 1);
  EXPECT_EQ(after.compiles - before.compiles, 1);
}

// The blocks of a deep model are one set of kernels: the residual stream is stored before
// each block (a value that merges several streams and that several ops read: the embedding's
// product and bias, a block's input and its MLP's), so block 2's kernels read their input
// from memory as block 1's do, and a second block compiles nothing.
TEST(KernelCacheTest, ASecondBlockCompilesNoNewKernel) {
  const Tensor x = batch(1, {8, 32}), y = batch(2, {8, 4});
  Model one(1), two(2);
  mark_step();  // the batch and the weights in memory, as a training loop has them
  int64_t compiled = metrics().kernels_compiled;
  EXPECT_GT(one.loss(x, y).item<float>(), 0.0f);
  EXPECT_GT(metrics().kernels_compiled - compiled, 0);
  compiled = metrics().kernels_compiled;
  const int64_t hits = metrics().kernel_cache_hits;
  EXPECT_GT(two.loss(x, y).item<float>(), 0.0f);
  EXPECT_EQ(metrics().kernels_compiled - compiled, 0);
  EXPECT_GT(metrics().kernel_cache_hits - hits, 0);
}

// The forward-only evaluation graph after training compiles only the kernels the step did
// not have.
TEST(KernelCacheTest, AnEvalGraphAfterTrainingCompilesOnlyItsNewKernels) {
  Model model(1);
  kernels_compiled_by_a_step(model);
  const Metrics before = metrics();
  const float loss = model.loss(batch(3, {8, 32}), batch(4, {8, 4})).item<float>();
  EXPECT_GT(loss, 0.0f);
  const Metrics after = metrics();
  EXPECT_GT(after.kernel_cache_hits - before.kernel_cache_hits, 0);
  EXPECT_LT(after.kernels_compiled - before.kernels_compiled,
            after.kernels_launched - before.kernels_launched);
}

// A graph is planned once per key: later steps (a cache hit at the barrier, with its
// donations) and a new batch size (the same key) plan nothing, and their donations still
// happen. A sync that hits the cache plans nothing either.
TEST(KernelCacheTest, AStepThatHitsTheCachePlansNothing) {
  Model model(1);
  for (Tensor& p : model.parameters()) p.requires_grad_();
  optim::SGD opt(model.parameters(), {.lr = 0.01});
  auto step = [&](int64_t rows) {
    model.loss(batch(1, {rows, 32}), batch(2, {rows, 4})).backward();
    opt.step();
    opt.zero_grad();
    mark_step();
  };
  mark_step();
  step(8);
  step(8);  // the first step's graph held the initial weights' leaves; this one holds the updated
  const Metrics before = metrics();
  step(8);
  step(16);
  const Metrics after = metrics();
  EXPECT_EQ(after.graphs_planned - before.graphs_planned, 0);
  EXPECT_EQ(after.compiles - before.compiles, 0);
  EXPECT_GT(after.donations - before.donations, 0);
  const Metrics synced = metrics();
  EXPECT_GT(model.loss(batch(3, {8, 32}), batch(4, {8, 4})).item<float>(), 0.0f);
  EXPECT_GT(model.loss(batch(3, {8, 32}), batch(4, {8, 4})).item<float>(), 0.0f);
  EXPECT_EQ(metrics().graphs_planned - synced.graphs_planned, 1);
}

}  // namespace
}  // namespace lazyjit
