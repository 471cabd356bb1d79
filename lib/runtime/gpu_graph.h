// A graph run on a GPU: its plan lowered as for the CPU, each kernel's PTX made and loaded
// once per GPU, the parameters uploaded, the kernels launched in plan order on the GPU's
// stream, the results downloaded. The first piece of the GPU runtime (issue 18): the
// executor's GPU path, with device-resident tensors, is to be built on it.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "codegen/kir_nvptx.h"
#include "ir/interpreter.h"
#include "runtime/cuda_driver.h"

namespace lazyjit::runtime::cuda {

struct GraphRun {
  std::vector<ir::HostTensor> results;  ///< per root; meaningless when a check failed
  int failed_kernel = -1;               ///< the first kernel (plan order) whose check failed, or -1
  int code = 0;                         ///< that check's code (kernel_abi.h)
  int64_t offending = 0;                ///< and the value it found
  std::vector<float> repeat_ms;         ///< per timed repeat: the GPU's milliseconds for every kernel
};

/// The PTX target for `gpu`: its own sm up to sm_90 (newer GPUs run sm_90 PTX through the
/// driver's JIT), PTX ISA 8.0.
codegen::GpuArch ptx_target(const Gpu& gpu);

/// Runs `graph` on `gpu`, then launches its kernels `timed_repeats` more times, timed by the
/// GPU's events (the same results: a graph run here writes none of its inputs). Throws
/// lazyjit::Error for a kernel that cannot be made into PTX and for the driver's errors.
GraphRun run_graph(Gpu& gpu, const ir::Graph& graph, int timed_repeats = 0);

}  // namespace lazyjit::runtime::cuda
