// Misuse and extreme inputs: deep graphs on small stacks, overflowing bounds and scalars,
// threads that train side by side, compile cliffs, and the errors each must give.
#include <pthread.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <lazyjit/lazyjit.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/tensor_impl.h"

namespace lazyjit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t kSmallStack = 256 * 1024;
constexpr int kMillion = 1'000'000;

/// The what() of the lazyjit::Error that `f` throws; "<no error>" if it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// Runs `f` on a new thread with a `stack_bytes` stack and rethrows what it threw.
void on_small_stack(const std::function<void()>& f, size_t stack_bytes = kSmallStack) {
  struct Call {
    const std::function<void()>* f;
    std::exception_ptr error;
  } call{&f, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attr,
      [](void* arg) -> void* {
        auto* c = static_cast<Call*>(arg);
        try {
          (*c->f)();
        } catch (...) {
          c->error = std::current_exception();
        }
        return nullptr;
      },
      &call);
  pthread_attr_destroy(&attr);
  ASSERT_EQ(created, 0);
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
}

/// x + 1 + 1 + ... (`n` additions), traced and never read.
Tensor counting_chain(const Tensor& x, int n) {
  Tensor acc = x;
  for (int i = 0; i < n; ++i) acc += 1.0;
  return acc;
}

// Item 1: node destruction, graph building (post-order and key), verifying, printing,
// parsing, interpreting and differentiating a million-node chain need no deep stack.

TEST(DeepGraphTest, DroppingAMillionOpChainOnASmallStack) {
  on_small_stack([] {
    Tensor acc = counting_chain(zeros({1}), kMillion);
    EXPECT_EQ(acc.shape(), (std::vector<int64_t>{1}));
  });
}

TEST(DeepGraphTest, EveryWalkOverAMillionNodeChainOnASmallStack) {
  on_small_stack([] {
    const Tensor x = Tensor::from_vector<float>({2.0f});
    const Tensor acc = counting_chain(x, kMillion / 2);  // a Scalar leaf per add: a million nodes
    const ir::Graph graph = ir::build_graph(std::vector<ir::NodePtr>{acc.impl()->ir()});
    EXPECT_GT(graph.nodes.size(), static_cast<size_t>(kMillion));
    EXPECT_TRUE(ir::verify(graph).ok());
    const std::vector<ir::HostTensor> values = ir::interpret(graph);
    EXPECT_EQ(values[0].as_double(0), 2.0 + kMillion / 2);

    const std::string text = ir::print_graph(graph);
    absl::StatusOr<ir::ParsedGraph> parsed = ir::parse_graph(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(ir::build_graph(parsed->roots).key, graph.key);
    EXPECT_THAT(dump({acc}, DumpFormat::LazyIr), HasSubstr("return"));
  });
}

TEST(DeepGraphTest, DifferentiatingAMillionNodeChainOnASmallStack) {
  on_small_stack([] {
    Tensor x = Tensor::from_vector<float>({2.0f});
    x.requires_grad_();
    Tensor acc = x;
    for (int i = 0; i < kMillion / 2; ++i) acc = acc * 1.0;
    const std::vector<Tensor> g = grad(acc, {x});
    EXPECT_EQ(g[0].shape(), (std::vector<int64_t>{1}));
  });
}

TEST(DeepGraphTest, MaterialisingALongChainOnASmallStack) {
  on_small_stack([] {
    Tensor acc = counting_chain(zeros({3}), 5000);
    EXPECT_THAT(acc.to_vector<float>(), ElementsAre(5000, 5000, 5000));
  });
}

}  // namespace
}  // namespace lazyjit
