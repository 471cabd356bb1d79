// lazyjit-bench-gpu: the GPU target's kernels timed on a GPU (issue 18's rows), each graph run
// once through run_graph and its kernels relaunched, timed by the GPU's events; prints the
// median per row as CSV (row,ms,GB/s,TFLOP/s). Its peers (PyTorch eager and torch.compile) are
// benchmarks/gpu_peers.py, run beside it on the same machine. Without a GPU it says why and
// exits 0.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "lazyjit/error.h"
#include "lazyjit/lazyjit.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_graph.h"
#include "runtime/tensor_impl.h"

namespace {

using lazyjit::Tensor;
namespace cuda = lazyjit::runtime::cuda;

/// Values in [-4, 4) from a cheap hash of the index (2^28 of them in well under a second).
Tensor data(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    v[static_cast<size_t>(i)] = static_cast<float>(h >> 40) * (8.0f / 16777216.0f) - 4.0f;
  }
  return Tensor::from_vector(v, std::move(shape));
}

struct Row {
  std::string name;
  std::vector<Tensor> results;
  double bytes = 0;  ///< moved per run, for GB/s
  double flops = 0;  ///< for TFLOP/s
};

void run_row(cuda::Gpu& gpu, const Row& row, int repeats) {
  std::vector<lazyjit::ir::NodePtr> roots;
  for (const Tensor& t : row.results) roots.push_back(t.impl()->ir_value());
  const lazyjit::ir::Graph graph = lazyjit::ir::build_graph(roots);
  cuda::GraphRun run = cuda::run_graph(gpu, graph, repeats);
  if (run.failed_kernel >= 0) {
    std::printf("%s,failed: kernel %d check %d value %lld\n", row.name.c_str(), run.failed_kernel, run.code,
                static_cast<long long>(run.offending));
    return;
  }
  std::sort(run.repeat_ms.begin(), run.repeat_ms.end());
  const double ms = run.repeat_ms[run.repeat_ms.size() / 2];
  std::printf("%s,%.4f,%.0f,%.2f\n", row.name.c_str(), ms, row.bytes / (ms * 1e6), row.flops / (ms * 1e9));
  std::fflush(stdout);
}

}  // namespace

int main() {
  const absl::StatusOr<std::shared_ptr<cuda::Gpu>> gpu = cuda::Gpu::open(0);
  if (!gpu.ok()) {
    std::printf("no GPU: %s\n", std::string(gpu.status().message()).c_str());
    return 0;
  }
  std::printf("# %s, sm_%d, %d multiprocessors\nrow,ms,GB/s,TFLOP/s\n", (*gpu)->name().c_str(), (*gpu)->capability(),
              (*gpu)->multiprocessors());
  const int64_t n = int64_t{1} << 28;
  const double f = 4;  // bytes per float
  try {
    {
      const Tensor x = data({n});
      run_row(**gpu, {"ew_simple_2^28", {lazyjit::relu(x * 1.5 + 0.25) * 0.5 + x}, 2 * f * n}, 10);
      run_row(**gpu,
              {"ew_transcendental_2^28", {lazyjit::sigmoid(x) * lazyjit::tanh(x * 0.5 + 1.0) + x * x}, 2 * f * n}, 10);
    }
    const Tensor rows = data({16384, 4096});
    run_row(**gpu, {"softmax_16384x4096", {lazyjit::softmax(rows, -1)}, 2 * f * 16384 * 4096}, 5);
    run_row(**gpu, {"layer_norm_16384x4096", {lazyjit::layer_norm(rows, 1)}, 2 * f * 16384 * 4096}, 5);
    const int64_t m = 2048;
    const Tensor a = data({m, m}), b = data({m, m});
    run_row(**gpu, {"matmul_f32_2048^3", {lazyjit::matmul(a, b)}, 3 * f * m * m, 2.0 * m * m * m}, 3);
  } catch (const lazyjit::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
