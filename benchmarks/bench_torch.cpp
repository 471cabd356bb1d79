// PyTorch peers (libtorch's C++ API): eager on the CPU (torch_eager) and Lazy Tensor Core with
// its TorchScript backend (torch_lazy), the same code on the two devices; each row checks its
// result, then times the ops and, on the lazy device, the step barrier that runs them.
#include <benchmark/benchmark.h>
#include <torch/csrc/lazy/backend/backend_device.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "hand_loops.h"
#include "mlp_problem.h"
#include "peers.h"
#include "workloads.h"

namespace bench {

void torch_setup() {
  torch::set_num_threads(kHandThreads);
  torch::lazy::InitTorchScriptBackend();
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  std::printf("PyTorch %s: %d threads; ATEN_CPU_CAPABILITY=%s; Lazy Tensor Core on the TorchScript backend\n",
              TORCH_VERSION, torch::get_num_threads(), capability ? capability : "(unset: the best the CPU has)");
}

}  // namespace bench

namespace {

const torch::Device kEager(torch::kCPU), kLazy(torch::kLazy);

// LTC's step barrier, as torch._lazy.mark_step(): runs the pending graph of every live tensor.
void mark_step(const torch::Device& device) {
  if (device.type() != torch::kLazy) return;
  const torch::lazy::BackendDevice lazy_device;
  torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&lazy_device, {}, /*wait=*/true);
  torch::lazy::LazyGraphExecutor::Get()->MarkStep(lazy_device);
}

torch::Tensor tensor(const std::vector<float>& data, std::vector<int64_t> shape, const torch::Device& device) {
  return torch::from_blob(const_cast<float*>(data.data()), shape, torch::kFloat32).clone().to(device);
}

// Checks f()'s result against ref, then times f() and the step barrier.
template <class F>
void run_torch(benchmark::State& state, const torch::Device& device, const bench::Reference& ref, F f) {
  try {
    torch::Tensor got = f();
    mark_step(device);
    got = got.to(torch::kCPU).contiguous();
    const std::string err = got.numel() == ref.n ? ref.check(got.data_ptr<float>())
                                                 : "result has " + std::to_string(got.numel()) + " elements";
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) {
      torch::Tensor y = f();
      mark_step(device);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void ew_simple(benchmark::State& state, const torch::Device& device) {
  const int64_t n = state.range(0);
  const torch::Tensor x = tensor(bench::ew::input(n), {n}, device);
  run_torch(state, device, bench::ew::simple_ref(n), [&] { return torch::relu(x * 1.5 + 0.25) * 0.5 + x; });
}
void ew_transcendental(benchmark::State& state, const torch::Device& device) {
  const int64_t n = state.range(0);
  const torch::Tensor x = tensor(bench::ew::input(n), {n}, device);
  run_torch(state, device, bench::ew::transcendental_ref(n),
            [&] { return torch::sigmoid(x) * torch::tanh(x * 0.5 + 1.0) + x * x; });
}
void softmax(benchmark::State& state, const torch::Device& device) {
  using namespace bench::norm;
  const torch::Tensor x = tensor(x_data(), {kRows, kCols}, device);
  run_torch(state, device, softmax_ref(), [&] { return torch::softmax(x, -1); });
}
void layer_norm(benchmark::State& state, const torch::Device& device) {
  using namespace bench::norm;
  const torch::Tensor x = tensor(x_data(), {kRows, kCols}, device);
  const torch::Tensor gamma = tensor(gamma_data(), {kCols}, device), beta = tensor(beta_data(), {kCols}, device);
  run_torch(state, device, layer_norm_ref(), [&] { return torch::layer_norm(x, {kCols}, gamma, beta, kEps); });
}
void matmul(benchmark::State& state, const torch::Device& device) {
  using namespace bench::gemm;
  const torch::Tensor a = tensor(a_data(), {kDim, kDim}, device), b = tensor(b_data(), {kDim, kDim}, device);
  run_torch(state, device, matmul_ref(), [&] { return torch::matmul(a, b); });
}
void linear_relu(benchmark::State& state, const torch::Device& device) {
  using namespace bench::gemm;
  const torch::Tensor x = tensor(x_data(), {kBatch, kDim}, device), w = tensor(b_data(), {kDim, kDim}, device);
  const torch::Tensor bias = tensor(bias_data(), {kDim}, device);
  run_torch(state, device, linear_relu_ref(), [&] { return torch::relu(torch::addmm(bias, x, w)); });
}

void trace_overhead(benchmark::State& state, const torch::Device& device) {
  const std::vector<float>& data = bench::ew::input(bench::kTraceElems);
  std::vector<float> want(bench::kTraceElems);
  bench::trace_peer(data.data(), want.data());
  const torch::Tensor x = tensor(data, {bench::kTraceElems}, device);
  run_torch(state, device, {bench::kTraceElems, [&](int64_t i) { return double{want[i]}; }, 1e-4, 1e-4}, [&] {
    torch::Tensor y = x;
    for (int i = 0; i < bench::kTraceOps; ++i) y = (i % 2 == 0) ? y + 1.0 : y * 0.999;
    return y;
  });
  state.counters["time_per_op"] = benchmark::Counter(static_cast<double>(bench::kTraceOps * state.iterations()),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The MLP with autograd and SGD in place, as a PyTorch user writes it.
void mlp_train_step(benchmark::State& state, const torch::Device& device) {
  using namespace bench::mlp;
  try {
    const Params p = initial_params();
    const torch::Tensor x = tensor(inputs(), {kBatch, kIn}, device);
    const torch::Tensor labels = torch::argmax(tensor(one_hot(), {kBatch, kOut}, torch::kCPU), 1).to(device);
    std::vector<torch::Tensor> params = {
        tensor(p.w1, {kIn, kHidden}, device),     tensor(p.b1, {kHidden}, device),
        tensor(p.w2, {kHidden, kHidden}, device), tensor(p.b2, {kHidden}, device),
        tensor(p.w3, {kHidden, kOut}, device),    tensor(p.b3, {kOut}, device)};
    for (torch::Tensor& t : params) t.requires_grad_(true);
    auto step = [&] {
      const torch::Tensor h1 = torch::relu(torch::addmm(params[1], x, params[0]));
      const torch::Tensor h2 = torch::relu(torch::addmm(params[3], h1, params[2]));
      torch::Tensor loss = torch::nn::functional::cross_entropy(torch::addmm(params[5], h2, params[4]), labels);
      loss.backward();
      {
        const torch::NoGradGuard no_grad;
        for (torch::Tensor& t : params) {
          t.sub_(t.grad() * kLr);
          t.mutable_grad().reset();
        }
      }
      mark_step(device);
      return loss;
    };
    std::vector<double> losses;
    for (int i = 0; i < kCheckSteps; ++i) losses.push_back(step().item<float>());
    const std::string err = check_losses(losses);
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) step();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

#define TORCH_ROWS(workload)                                                            \
  void BM_##workload##_torch_eager(benchmark::State& s) { workload(s, kEager); }        \
  void BM_##workload##_torch_lazy(benchmark::State& s) { workload(s, kLazy); }
TORCH_ROWS(ew_simple)
TORCH_ROWS(ew_transcendental)
TORCH_ROWS(softmax)
TORCH_ROWS(layer_norm)
TORCH_ROWS(matmul)
TORCH_ROWS(linear_relu)
TORCH_ROWS(trace_overhead)
TORCH_ROWS(mlp_train_step)

}  // namespace

// Both rows of a workload; the optional last argument is appended to each (->Arg(n)).
#define TORCH_BENCH(workload, unit, min_time, ...)                      \
  LAZYJIT_BENCH(BM_##workload##_torch_eager, unit, min_time) __VA_ARGS__; \
  LAZYJIT_BENCH(BM_##workload##_torch_lazy, unit, min_time) __VA_ARGS__
TORCH_BENCH(ew_simple, benchmark::kMillisecond, 0.2, ->Arg(1 << 24));
TORCH_BENCH(ew_simple, benchmark::kMicrosecond, 0.1, ->Arg(1 << 16));
TORCH_BENCH(ew_transcendental, benchmark::kMillisecond, 0.3, ->Arg(1 << 24));
TORCH_BENCH(softmax, benchmark::kMillisecond, 0.2);
TORCH_BENCH(layer_norm, benchmark::kMillisecond, 0.2);
TORCH_BENCH(matmul, benchmark::kMillisecond, 0.3);
TORCH_BENCH(linear_relu, benchmark::kMillisecond, 0.3);
TORCH_BENCH(trace_overhead, benchmark::kMicrosecond, 0.1);
TORCH_BENCH(mlp_train_step, benchmark::kMillisecond, 0.3);
