// lazyjit as PyTorch's torch::lazy backend (the PyTorch Debian ships: 1.13): a model on
// device 'lazy' is traced by PyTorch's Lazy Tensor Core, compiled by lazyjit, and run on
// lazyjit's kernels. Standard library types only; link lazyjit_torch.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace lazyjit::torch {

/// Registers lazyjit as the backend of PyTorch's Lazy Tensor Core (`torch::kLazy`,
/// `device='lazy'`). Idempotent. It registers the TorchScript backend's lazy kernels first
/// when no backend is registered yet (lazyjit reuses its tracing and lowering), so call it
/// instead of `torch::lazy::InitTorchScriptBackend()`, or after it.
void init();

/// What the backend did since start or reset_metrics().
struct Metrics {
  int64_t graphs_translated = 0;    ///< LTC graphs lazyjit runs
  int64_t fallback_graphs = 0;      ///< LTC graphs left to the TorchScript executor
  int64_t lazyjit_executions = 0;   ///< runs of translated graphs
  int64_t fallback_executions = 0;  ///< runs on the TorchScript executor
  int64_t buffers_offered = 0;      ///< inputs' buffers nothing could read again, offered for donation
  std::map<std::string, int64_t> fallback_ops;           ///< the op that made each fallback graph
  std::map<std::string, std::string> fallback_reasons;  ///< the last reason each op gave
};
Metrics metrics();
void reset_metrics();
/// metrics() as text, then lazyjit's own metrics_report().
std::string metrics_report();

}  // namespace lazyjit::torch
