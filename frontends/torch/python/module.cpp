// The Python module: `import lazyjit_torch; lazyjit_torch.init()` makes device='lazy' run
// on lazyjit (PyTorch's torch._lazy.mark_step() and friends work as with any LTC backend).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../lazy_kernels.h"
#include "lazyjit/runtime.h"
#include "lazyjit/torch.h"

namespace py = pybind11;

PYBIND11_MODULE(lazyjit_torch, m) {
  m.doc() = "lazyjit as PyTorch's Lazy Tensor Core backend (device='lazy')";
  lazyjit::ltc::set_python_error_reset([] {
    py::gil_scoped_acquire gil;
    PyErr_Clear();
  });
  m.def("init", &lazyjit::torch::init, "Registers lazyjit as the torch::lazy backend (idempotent).");
  m.def(
      "metrics",
      [] {
        const lazyjit::torch::Metrics t = lazyjit::torch::metrics();
        const lazyjit::Metrics l = lazyjit::metrics();
        py::dict d;
        d["graphs_translated"] = t.graphs_translated;
        d["fallback_graphs"] = t.fallback_graphs;
        d["lazyjit_executions"] = t.lazyjit_executions;
        d["fallback_executions"] = t.fallback_executions;
        d["buffers_offered"] = t.buffers_offered;
        d["fallback_ops"] = t.fallback_ops;
        d["fallback_reasons"] = t.fallback_reasons;
        d["graphs_executed"] = l.graphs_executed;
        d["graphs_planned"] = l.graphs_planned;
        d["compiles"] = l.compiles;
        d["kernels_compiled"] = l.kernels_compiled;
        d["cache_hits"] = l.cache_hits;
        d["donations"] = l.donations;
        d["bytes_allocated"] = l.bytes_allocated;
        d["kernels_launched"] = l.kernels_launched;
        return d;
      },
      "The backend's counters and lazyjit's, as a dict.");
  m.def("reset_metrics", [] {
    lazyjit::torch::reset_metrics();
    lazyjit::reset_metrics();
  });
  m.def("metrics_report", &lazyjit::torch::metrics_report);
}
