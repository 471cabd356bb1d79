// PyTorch peers (libtorch's C++ API): eager on the CPU (torch_eager), Lazy Tensor Core with
// its TorchScript backend (torch_lazy) and with lazyjit as its backend (torch_lazyjit,
// frontends/torch), the same code on each device; each row checks its
// result, then times the ops and, on the lazy device, the step barrier that runs them. The
// compile_time rows time LTC's first step of a workload (and eager's, for gpt_train_step) in a
// fresh process (this binary re-run); the recompiles row counts LTC's compiles over batch sizes
// 1..64 after emptying its cache.
#include <benchmark/benchmark.h>
#include <torch/csrc/lazy/backend/backend_device.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/core/metrics.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>
#include <torch/torch.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef LAZYJIT_BENCH_HAVE_TORCH_BACKEND
#include "lazyjit/torch.h"
#endif

#include "bench_rows.h"
#include "gpt_problem.h"
#include "hand_loops.h"
#include "mlp_problem.h"
#include "peers.h"
#include "workloads.h"

namespace bench {

namespace {
/// The file a loaded shared library whose path ends in `name` resolves to (links followed),
/// or "".
std::string loaded_library(const std::string& name) {
  struct Query {
    const std::string& name;
    std::string found;
  } query{name, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& q = *static_cast<Query*>(data);
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (!path.ends_with(q.name)) return 0;
        std::error_code error;
        q.found = std::filesystem::canonical(path, error).string();
        return 1;
      },
      &query);
  return query.found;
}
}  // namespace

void torch_setup() {
  torch::set_num_threads(kHandThreads);
  torch::lazy::InitTorchScriptBackend();
  if (std::getenv(kColdStepEnv) || std::getenv(kFirstStepsEnv)) return;  // a child: its stdout is the result
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  std::printf("PyTorch %s: %d threads; ATEN_CPU_CAPABILITY=%s; Lazy Tensor Core on the TorchScript backend\n",
              TORCH_VERSION, torch::get_num_threads(), capability ? capability : "(unset: the best the CPU has)");
  // Debian's libtorch calls the BLAS that update-alternatives picks for libblas.so.3: with
  // OpenBLAS not installed, the reference BLAS, which runs a product 10-100x slower.
  const std::string blas = loaded_library("libblas.so.3");
  if (blas.find("/blas/") != std::string::npos) {
    std::printf("note: PyTorch runs on the reference BLAS (%s): its products are not what users get; install\n"
                "  OpenBLAS (scripts/setup.sh --peers) for the recorded figures\n",
                blas.c_str());
  }
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

void conv2d_fwd(benchmark::State& state, const torch::Device& device) {
  using namespace bench::conv;
  const torch::Tensor x = tensor(x_data(), {kN, kC, kH, kW}, device), w = tensor(w_data(), {kC, kC, kK, kK}, device);
  const torch::Tensor b = tensor(bias_data(), {kC}, device);
  run_torch(state, device, forward_ref(), [&] { return torch::conv2d(x, w, b, 1, 1); });
}
void conv2d_fwd_bwd(benchmark::State& state, const torch::Device& device) {
  using namespace bench::conv;
  torch::Tensor x = tensor(x_data(), {kN, kC, kH, kW}, device).requires_grad_(true);
  torch::Tensor w = tensor(w_data(), {kC, kC, kK, kK}, device).requires_grad_(true);
  const torch::Tensor b = tensor(bias_data(), {kC}, device), gy = tensor(gy_data(), {kN, kC, kH, kW}, device);
  torch::Tensor y;  // kept live, so that the lazy device's step computes it too
  run_torch(state, device, weight_grad_ref(), [&] {
    x.mutable_grad().reset();
    w.mutable_grad().reset();
    y = torch::conv2d(x, w, b, 1, 1);
    (y * gy).sum().backward();
    return w.grad();
  });
}
void embedding_fwd(benchmark::State& state, const torch::Device& device) {
  using namespace bench::embed;
  const torch::Tensor weight = tensor(weight_data(), {kVocab, kDim}, device);
  const torch::Tensor tokens = torch::tensor(token_data(), torch::kInt64).reshape({kBatch, kSeq}).to(device);
  run_torch(state, device, forward_ref(), [&] { return torch::embedding(weight, tokens); });
}
void embedding_fwd_bwd(benchmark::State& state, const torch::Device& device) {
  using namespace bench::embed;
  torch::Tensor weight = tensor(weight_data(), {kVocab, kDim}, device).requires_grad_(true);
  const torch::Tensor tokens = torch::tensor(token_data(), torch::kInt64).reshape({kBatch, kSeq}).to(device);
  const torch::Tensor gy = tensor(gy_data(), {kBatch, kSeq, kDim}, device);
  torch::Tensor y;
  run_torch(state, device, weight_grad_ref(), [&] {
    weight.mutable_grad().reset();
    y = torch::embedding(weight, tokens);
    (y * gy).sum().backward();
    return weight.grad();
  });
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
class TorchMlp {
 public:
  explicit TorchMlp(const torch::Device& device) : device_(device) {
    using namespace bench::mlp;
    const Params p = initial_params();
    x_ = tensor(inputs(), {kBatch, kIn}, device);
    labels_ = torch::argmax(tensor(one_hot(), {kBatch, kOut}, torch::kCPU), 1).to(device);
    params_ = {tensor(p.w1, {kIn, kHidden}, device),     tensor(p.b1, {kHidden}, device),
               tensor(p.w2, {kHidden, kHidden}, device), tensor(p.b2, {kHidden}, device),
               tensor(p.w3, {kHidden, kOut}, device),    tensor(p.b3, {kOut}, device)};
    for (torch::Tensor& t : params_) t.requires_grad_(true);
  }

  /// One SGD step; returns the loss before it.
  torch::Tensor step() {
    const torch::Tensor h1 = torch::relu(torch::addmm(params_[1], x_, params_[0]));
    const torch::Tensor h2 = torch::relu(torch::addmm(params_[3], h1, params_[2]));
    torch::Tensor loss = torch::nn::functional::cross_entropy(torch::addmm(params_[5], h2, params_[4]), labels_);
    loss.backward();
    {
      const torch::NoGradGuard no_grad;
      for (torch::Tensor& t : params_) {
        t.sub_(t.grad() * bench::mlp::kLr);
        t.mutable_grad().reset();
      }
    }
    mark_step(device_);
    return loss;
  }

 private:
  torch::Device device_;
  torch::Tensor x_, labels_;
  std::vector<torch::Tensor> params_;
};

void mlp_train_step(benchmark::State& state, const torch::Device& device) {
  try {
    TorchMlp model(device);
    std::vector<double> losses;
    for (int i = 0; i < bench::mlp::kCheckSteps; ++i) losses.push_back(model.step().item<float>());
    const std::string err = bench::mlp::check_losses(losses);
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) model.step();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The GPT of gpt_problem.h with autograd and torch::optim::Adam, as a PyTorch user writes it:
// the causal mask made once (nanoGPT's registered buffer), gradients set to none after each
// step (PyTorch 2's zero_grad default: backward then writes them instead of adding to zeros).
class TorchGpt {
 public:
  explicit TorchGpt(const torch::Device& device) : device_(device) {
    using namespace bench::gpt;
    std::vector<int64_t> ids(kTokens);
    for (int64_t t = 0; t < kTokens; ++t) ids[t] = input_id(t);
    x_ = torch::from_blob(ids.data(), {kBatch, kSeq}, torch::kInt64).clone().to(device);
    std::vector<int64_t> y = targets();
    y_ = torch::from_blob(y.data(), {kTokens}, torch::kInt64).clone().to(device);
    const torch::Tensor positions = torch::arange(kSeq, torch::kInt64);
    causal_ = (positions.unsqueeze(1) >= positions).to(device);
    for (const Param& p : initial_params()) params_.push_back(tensor(p.data, p.shape, device).requires_grad_(true));
    adam_ = std::make_unique<torch::optim::Adam>(params_, torch::optim::AdamOptions(kLr));
  }

  /// One Adam step; returns the loss before it.
  torch::Tensor step() {
    torch::Tensor loss = this->loss();
    loss.backward();
    adam_->step();
    for (torch::Tensor& t : params_) t.mutable_grad().reset();
    mark_step(device_);
    return loss;
  }

 private:
  torch::Tensor loss() const {
    using namespace bench::gpt;
    const std::vector<torch::Tensor>& p = params_;
    torch::Tensor h = (torch::embedding(p[kEmb], x_) + p[kPos]).view({kTokens, kModel});
    for (int64_t l = 0; l < kLayers; ++l) h = block(h, l);
    const torch::Tensor logits = torch::matmul(torch::layer_norm(h, {kModel}, p[kLnfG], p[kLnfB], kEps), p[kHead]);
    return torch::nn::functional::cross_entropy(logits, y_);
  }

  torch::Tensor block(const torch::Tensor& h, int64_t l) const {
    using namespace bench::gpt;
    auto p = [&](BlockParam k) -> const torch::Tensor& { return params_[param_index(l, k)]; };
    const torch::Tensor ln1 = torch::layer_norm(h, {kModel}, p(kLn1G), p(kLn1B), kEps);
    const torch::Tensor qkv = torch::addmm(p(kBqkv), ln1, p(kWqkv));
    auto heads = [&](int64_t i) {  // [kBatch, kHeads, kSeq, kHeadDim]: q, k or v
      const torch::Tensor part = qkv.slice(1, i * kModel, (i + 1) * kModel);
      return part.reshape({kBatch, kSeq, kHeads, kHeadDim}).permute({0, 2, 1, 3});
    };
    const double scale = 1.0 / std::sqrt(double{kHeadDim}), inf = std::numeric_limits<double>::infinity();
    const torch::Tensor scores = torch::matmul(heads(0), heads(1).transpose(-2, -1)) * scale;
    const torch::Tensor att = torch::softmax(scores.masked_fill(causal_.logical_not(), -inf), -1);
    const torch::Tensor mixed = torch::matmul(att, heads(2)).permute({0, 2, 1, 3}).reshape({kTokens, kModel});
    const torch::Tensor r = h + torch::addmm(p(kBo), mixed, p(kWo));
    const torch::Tensor ln2 = torch::layer_norm(r, {kModel}, p(kLn2G), p(kLn2B), kEps);
    const torch::Tensor fc = torch::gelu(torch::addmm(p(kBfc), ln2, p(kWfc)));
    return r + torch::addmm(p(kBproj), fc, p(kWproj));
  }

  torch::Device device_;
  torch::Tensor x_, y_, causal_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Adam> adam_;
};

// Before timing, the losses must pass gpt_problem.h's checks and follow lazyjit's step by step.
void gpt_train_step(benchmark::State& state, const torch::Device& device) {
  try {
    TorchGpt model(device);
    std::vector<double> losses;
    for (int i = 0; i < bench::gpt::kCheckSteps; ++i) losses.push_back(model.step().item<float>());
    std::string err = bench::gpt::check_losses(losses);
    if (err.empty()) err = bench::gpt::compare_losses(losses, bench::gpt::lazyjit_losses());
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) model.step();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// compile_time: the steps of bench_compile.cpp's rows (ew_simple, softmax and matmul on
// [1024, 1024], mlp_train_step, gpt_train_step), each ending with the step barrier.
std::function<void()> compile_step(const std::string& workload, const torch::Device& device) {
  if (workload == "mlp_train_step") return [mlp = std::make_shared<TorchMlp>(device)] { mlp->step(); };
  if (workload == "gpt_train_step") return [gpt = std::make_shared<TorchGpt>(device)] { gpt->step(); };
  std::function<torch::Tensor(const torch::Tensor&)> f;
  if (workload == "ew_simple" || workload == "ew_simple_64k") {
    f = [](const torch::Tensor& x) { return torch::relu(x * 1.5 + 0.25) * 0.5 + x; };
  }
  if (workload == "ew_simple_64k") {  // over 2^16 elements, the result read as a user would
    return [f, device, x = tensor(bench::ew::input(1 << 16), {1 << 16}, device)] {
      const torch::Tensor y = f(x);
      mark_step(device);
      (void)y.cpu();
    };
  }
  if (workload == "softmax") f = [](const torch::Tensor& x) { return torch::softmax(x, -1); };
  if (workload == "matmul") f = [](const torch::Tensor& x) { return torch::matmul(x, x); };
  if (!f) throw std::invalid_argument("no compile_time step " + workload);
  return [f, device, x = tensor(bench::ew::input(1 << 20), {1024, 1024}, device)] {
    const torch::Tensor y = f(x);
    mark_step(device);
  };
}

double seconds(const std::function<void()>& step) {
  const auto start = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Iteration time: cold - steady, read from a fresh process (bench::torch_cold_step; `step` is
// a workload, run on LTC, or "workload:eager"); settle_seconds: how much longer the next steps
// take than steady ones.
void compile_time_torch(benchmark::State& state, const std::string& step) {
  const std::string command = std::string(bench::kColdStepEnv) + "=" + step + " '" +
                              std::filesystem::read_symlink("/proc/self/exe").string() + "'";
  double settle_seconds = 0;
  for (auto _ : state) {
    FILE* child = popen(command.c_str(), "r");
    char line[512] = "";
    double cold = 0, steady = 0, settle = 0;
    const bool read = child && std::fgets(line, sizeof line, child) &&
                      std::sscanf(line, "%lf %lf %lf", &cold, &steady, &settle) == 3;
    const int status = child ? pclose(child) : -1;
    if (!read || status != 0) {
      state.SkipWithError(("fresh process (" + command + ") exited " + std::to_string(status) + ": " + line).c_str());
      break;
    }
    state.SetIterationTime(cold - steady);
    settle_seconds += settle;
  }
  state.counters["settle_seconds"] = benchmark::Counter(settle_seconds, benchmark::Counter::kAvgIterations);
}

// recompiles: bench_compile.cpp's program, relu(x @ w + b) for x[batch, 128], w[128, 64] at
// batch 1..64, each batch ended with the step barrier, from an emptied LTC computation cache
// (LazyGraphExecutor::GetComputationCache()->Clear(), so every repetition counts a cold sweep
// in this process); `compiles` is the rise of LTC's UncachedCompile counter over that sweep,
// `first_sweep_seconds` its time; the iterations time the sweep from the cache.

int64_t ltc_uncached_compiles() {
  const torch::lazy::CounterData* counter = torch::lazy::GetCounter("UncachedCompile");
  return counter ? counter->Value() : 0;  // registered on LTC's first compile
}

void recompiles(benchmark::State& state, const torch::Device& device) {
  using namespace bench::recompiles;
  const std::vector<float>&xs = x_data(), &ws = w_data(), &bs = b_data();
  try {
    const torch::Tensor w = tensor(ws, {kK, kN}, device), b = tensor(bs, {kN}, device);
    std::vector<torch::Tensor> x;
    for (int64_t batch = 1; batch <= kMaxBatch; ++batch)
      x.push_back(tensor(std::vector<float>(xs.begin(), xs.begin() + batch * kK), {batch, kK}, device));
    mark_step(device);  // the inputs' uploads are not part of the sweep
    auto sweep = [&] {
      torch::Tensor last;
      for (const torch::Tensor& xb : x) {
        last = torch::relu(torch::addmm(b, xb, w));
        mark_step(device);
      }
      return last;
    };
    torch::lazy::LazyGraphExecutor::Get()->GetComputationCache()->Clear();
    const int64_t compiles = ltc_uncached_compiles();
    const int64_t llvm_compiles = lazyjit::metrics().compiles;
    const auto start = std::chrono::steady_clock::now();
    const torch::Tensor got = sweep().to(torch::kCPU).contiguous();
    state.counters["first_sweep_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.counters["compiles"] = static_cast<double>(ltc_uncached_compiles() - compiles);
    // On lazyjit, LTC's per-size compiles are translations; LLVM compiles the graph once.
    state.counters["lazyjit_compiles"] = static_cast<double>(lazyjit::metrics().compiles - llvm_compiles);
    const bench::Reference ref = last_batch_ref();
    const std::string err = got.numel() == ref.n ? ref.check(got.data_ptr<float>())
                                                 : "result has " + std::to_string(got.numel()) + " elements";
    if (!err.empty()) return state.SkipWithError(err.c_str());
    for (auto _ : state) sweep();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_recompiles_torch_lazy(benchmark::State& state) { recompiles(state, kLazy); }

#ifdef LAZYJIT_BENCH_HAVE_TORCH_BACKEND
// The torch_lazyjit rows run after every torch_lazy row (they are registered last): the first
// makes lazyjit LTC's backend for the rest of the process, and empties LTC's cache of graphs
// the TorchScript backend compiled.
void use_lazyjit_backend() {
  static const bool once = [] {
    lazyjit::torch::init();
    torch::lazy::LazyGraphExecutor::Get()->GetComputationCache()->Clear();
    return true;
  }();
  (void)once;
}
/// A torch_lazyjit row: the workload, which must not have left lazyjit (a graph run on the
/// TorchScript executor would time TorchScript under lazyjit's name).
void on_lazyjit(benchmark::State& state, void (*workload)(benchmark::State&, const torch::Device&)) {
  use_lazyjit_backend();
  const int64_t before = lazyjit::torch::metrics().fallback_executions;
  workload(state, kLazy);
  const lazyjit::torch::Metrics after = lazyjit::torch::metrics();
  if (after.fallback_executions == before) return;
  std::string reasons;
  for (const auto& [op, reason] : after.fallback_reasons) reasons += reason + "; ";
  state.SkipWithError(("graphs ran on TorchScript: " + reasons).c_str());
}
#define TORCH_LAZYJIT_ROW(workload) \
  void BM_##workload##_torch_lazyjit(benchmark::State& s) { on_lazyjit(s, workload); }
#else
#define TORCH_LAZYJIT_ROW(workload)
#endif

#define TORCH_ROWS(workload)                                                            \
  void BM_##workload##_torch_eager(benchmark::State& s) { workload(s, kEager); }        \
  void BM_##workload##_torch_lazy(benchmark::State& s) { workload(s, kLazy); }          \
  TORCH_LAZYJIT_ROW(workload)
TORCH_ROWS(ew_simple)
TORCH_ROWS(ew_transcendental)
TORCH_ROWS(softmax)
TORCH_ROWS(layer_norm)
TORCH_ROWS(matmul)
TORCH_ROWS(linear_relu)
TORCH_ROWS(trace_overhead)
TORCH_ROWS(mlp_train_step)
TORCH_ROWS(gpt_train_step)
TORCH_ROWS(conv2d_fwd)
TORCH_ROWS(conv2d_fwd_bwd)
TORCH_ROWS(embedding_fwd)
TORCH_ROWS(embedding_fwd_bwd)
TORCH_LAZYJIT_ROW(recompiles)

#define COMPILE_TIME_ROW(workload) \
  void BM_compile_time_##workload##_torch_lazy(benchmark::State& s) { compile_time_torch(s, #workload); }
COMPILE_TIME_ROW(ew_simple)
COMPILE_TIME_ROW(softmax)
COMPILE_TIME_ROW(matmul)
COMPILE_TIME_ROW(mlp_train_step)
COMPILE_TIME_ROW(gpt_train_step)
// Eager's first step of the model, in a fresh process with nothing run before it: what a
// PyTorch user waits for before the first loss, to set beside lazyjit's and LTC's compiles.
void BM_compile_time_gpt_train_step_torch_eager(benchmark::State& s) { compile_time_torch(s, "gpt_train_step:eager"); }

}  // namespace

namespace bench {

int torch_cold_step(const std::string& spec) {
  constexpr int kSettleSteps = 5, kSteadySteps = 5;
  try {
    torch_setup();
    const size_t colon = spec.find(':');
    const std::string workload = spec.substr(0, colon);
    const bool eager = colon != std::string::npos && spec.substr(colon + 1) == "eager";
    if (!eager) {
      compile_step(workload, kEager)();  // ATen's kernels, the threads and the allocator warm
      torch::Tensor unrelated = tensor({1.0f}, {1}, kLazy) + 1.0;
      mark_step(kLazy);  // LTC's start-up, on the process's first graph
    }
    const std::function<void()> step = compile_step(workload, eager ? kEager : kLazy);
    const double cold = seconds(step);
    double settle = 0;  // TorchScript's profiling executor optimises the graph on its next runs
    for (int i = 0; i < kSettleSteps; ++i) settle += seconds(step);
    std::vector<double> steady(kSteadySteps);
    for (double& t : steady) t = seconds(step);
    std::nth_element(steady.begin(), steady.begin() + kSteadySteps / 2, steady.end());
    const double median = steady[kSteadySteps / 2];
    std::printf("%.9g %.9g %.9g\n", cold, median, settle - kSettleSteps * median);
    return 0;
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}

int torch_first_steps(const std::string& peer, const std::string& workload, int steps) {
  return print_step_seconds(
      [&] {
        torch_setup();
        return compile_step(workload, peer == "eager" ? kEager : kLazy);
      },
      steps);
}

}  // namespace bench

// The timed rows of every workload PyTorch runs: workload, unit, minimum time, and an optional
// last argument appended to the registration (->Arg(n)).
#define TORCH_WORKLOADS(X)                                            \
  X(ew_simple, benchmark::kMillisecond, 0.2, ->Arg(1 << 24))          \
  X(ew_simple, benchmark::kMicrosecond, 0.1, ->Arg(1 << 16))          \
  X(ew_transcendental, benchmark::kMillisecond, 0.3, ->Arg(1 << 24))  \
  X(softmax, benchmark::kMillisecond, 0.2)                            \
  X(layer_norm, benchmark::kMillisecond, 0.2)                         \
  X(matmul, benchmark::kMillisecond, 0.3)                             \
  X(linear_relu, benchmark::kMillisecond, 0.3)                        \
  X(trace_overhead, benchmark::kMicrosecond, 0.1)                     \
  X(mlp_train_step, benchmark::kMillisecond, 0.3)                     \
  X(gpt_train_step, benchmark::kMillisecond, 0.5)                     \
  X(conv2d_fwd, benchmark::kMillisecond, 0.5)                         \
  X(conv2d_fwd_bwd, benchmark::kMillisecond, 0.5)                     \
  X(embedding_fwd, benchmark::kMillisecond, 0.3)                      \
  X(embedding_fwd_bwd, benchmark::kMillisecond, 0.3)

#define TORCH_BENCH(workload, unit, min_time, ...)                      \
  LAZYJIT_BENCH(BM_##workload##_torch_eager, unit, min_time) __VA_ARGS__; \
  LAZYJIT_BENCH(BM_##workload##_torch_lazy, unit, min_time) __VA_ARGS__;
TORCH_WORKLOADS(TORCH_BENCH)

LAZYJIT_BENCH(BM_recompiles_torch_lazy, benchmark::kMicrosecond, 0.1);

// After every torch_lazy row: see use_lazyjit_backend().
#ifdef LAZYJIT_BENCH_HAVE_TORCH_BACKEND
#define TORCH_LAZYJIT_BENCH(workload, unit, min_time, ...) \
  LAZYJIT_BENCH(BM_##workload##_torch_lazyjit, unit, min_time) __VA_ARGS__;
TORCH_WORKLOADS(TORCH_LAZYJIT_BENCH)
TORCH_LAZYJIT_BENCH(recompiles, benchmark::kMicrosecond, 0.1)
#endif

// As bench_compile.cpp's rows; each iteration is a fresh process.
#define COMPILE_TIME_BENCH(workload)                                                                               \
  BENCHMARK(BM_compile_time_##workload##_torch_lazy)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2) \
      LAZYJIT_BENCH_REPEATED
COMPILE_TIME_BENCH(ew_simple);
COMPILE_TIME_BENCH(softmax);
COMPILE_TIME_BENCH(matmul);
COMPILE_TIME_BENCH(mlp_train_step);
COMPILE_TIME_BENCH(gpt_train_step);
BENCHMARK(BM_compile_time_gpt_train_step_torch_eager)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2)
    LAZYJIT_BENCH_REPEATED;
