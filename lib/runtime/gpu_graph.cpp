// run_graph (gpu_graph.h): the CPU executor's launch sequence with device buffers.
#include "runtime/gpu_graph.h"

#include <cstring>

#include "codegen/kir_nvptx.h"
#include "fmt/format.h"
#include "lazyjit/error.h"
#include "lowering/shape_table.h"
#include "lowering/kernel_abi.h"
#include "lowering/lower.h"

namespace lazyjit::runtime::cuda {
namespace {

/// Device buffers released together when the run ends.
class Buffers {
 public:
  explicit Buffers(Gpu& gpu) : gpu_(gpu) {}
  ~Buffers() {
    for (DevicePtr p : held_) gpu_.release(p);
  }
  absl::StatusOr<DevicePtr> add(size_t bytes) {
    absl::StatusOr<DevicePtr> p = gpu_.allocate(bytes);
    if (p.ok()) held_.push_back(*p);
    return p;
  }

 private:
  Gpu& gpu_;
  std::vector<DevicePtr> held_;
};

/// The driver's errors, and PTX that cannot be made, are the caller's lazyjit::Error.
void ok(const absl::Status& status) {
  if (!status.ok()) throw Error("GPU: " + std::string(status.message()));
}
template <class T>
T value(absl::StatusOr<T> v) {
  ok(v.status());
  return *std::move(v);
}

}  // namespace

codegen::GpuArch ptx_target(const Gpu& gpu) {
  return {fmt::format("sm_{}", std::min(gpu.capability(), 90)), "ptx80"};
}

namespace {

/// One run of a graph on a GPU: its tables on the device, then each kernel launched.
class GraphLaunch {
 public:
  GraphLaunch(Gpu& gpu, const ir::Graph& graph)
      : gpu_(gpu), graph_(graph), lowered_(lowering::lower_graph(graph)), device_(gpu), arch_(ptx_target(gpu)),
        shapes_(lowering::shape_table(graph)) {
    lowered_.plan.sizes.evaluate(shapes_.data(), sizes_);
    for (int s : graph.scalars) scalars_.push_back(graph.nodes[s]->scalar());
  }

  GraphRun run(int timed_repeats) {
    GraphRun run = buffers();
    launches_.reserve(lowered_.kernels.size());  // the launch parameters point into them
    for (size_t k = 0; k < lowered_.kernels.size(); ++k) launch(k);
    for (int r = 0; r < timed_repeats; ++r) {
      run.repeat_ms.push_back(value(gpu_.time([&] {
        for (Launch& l : launches_) {
          if (absl::Status s = gpu_.launch(l.function, l.count, l.params); !s.ok()) return s;
        }
        return absl::OkStatus();
      })));
    }
    return collect(std::move(run));
  }

 private:
  /// Per kernel: its frame's device copies, and the parameters cuLaunchKernel reads.
  struct Launch {
    Function function = nullptr;
    lowering::BoundFrame frame;
    std::vector<DevicePtr> args;  // the frame's buffers, then the dims, then the status word
    int64_t count = 0;
    DevicePtr record = 0, word = 0;
    std::vector<void*> params;
  };

  /// The graph's buffer array on the device (parameters uploaded, results, temporaries), and
  /// the results' host tensors.
  /// Laid out as the CPU executor's (kernel_abi.h). The scalar table's slot stays 0: a kernel
  /// reads its scalars through its own frame (kScalars), uploaded per launch.
  GraphRun buffers() {
    GraphRun run;
    const int num_parameters = static_cast<int>(graph_.parameters.size());
    const int num_results = static_cast<int>(graph_.roots.size());
    const int num_temps = static_cast<int>(lowered_.plan.temps.size());
    buffers_.assign(static_cast<size_t>(lowering::temp_buffer_index(num_parameters, num_results, num_temps)), 0);
    for (int p = 0; p < num_parameters; ++p) {
      const BackendData& data = *graph_.parameters[p]->data();
      buffers_[p] = value(device_.add(data.size_bytes()));
      ok(gpu_.upload(buffers_[p], data.data(), data.size_bytes()));
    }
    for (int r = 0; r < num_results; ++r) {
      const ir::Node& node = *graph_.nodes[graph_.roots[r]];
      ir::HostTensor& result = run.results.emplace_back(ir::HostTensor{node.dtype(), node.shape(), {}});
      result.bytes.resize(static_cast<size_t>(result.numel() * dtype_size(node.dtype())));
      buffers_[num_parameters + r] = value(device_.add(result.bytes.size()));
    }
    for (int t = 0; t < num_temps; ++t) {
      const size_t bytes = static_cast<size_t>(sizes_[lowered_.plan.temps[t].bytes]);
      buffers_[lowering::temp_buffer_index(num_parameters, num_results, t)] = value(device_.add(bytes));
    }
    for (DevicePtr b : buffers_) addresses_.push_back(reinterpret_cast<void*>(b));
    return run;
  }

  /// Kernel `k`: its PTX loaded, its frame bound and copied to the device, its launch queued.
  void launch(size_t k) {
    const lowering::KernelSpec& spec = lowered_.plan.kernels[k];
    if (spec.kind == lowering::KernelKind::Collective) throw Error("GPU: collectives do not run on a GPU yet");
    const lowering::LoweredKernel& kernel = lowered_.kernels[k];
    const Function function = value(gpu_.load(spec.symbol, [&] { return codegen::compile_ptx(kernel, arch_); }));
    Launch& l = launches_.emplace_back();
    int64_t host_record = 0;  // bound, then replaced by the device's record
    lowering::bind_frame(spec.frame, addresses_.data(), shapes_.data(), scalars_.data(), &host_record, l.frame);
    l.record = value(device_.add(sizeof(int64_t)));
    l.word = value(device_.add(sizeof(int32_t)));
    const DevicePtr dims = value(device_.add(l.frame.dims.size() * sizeof(int64_t)));
    const DevicePtr scalars = value(device_.add(l.frame.scalars.size() * sizeof(uint64_t)));
    ok(gpu_.fill_zero(l.record, sizeof(int64_t)));
    ok(gpu_.fill_zero(l.word, sizeof(int32_t)));
    ok(gpu_.upload(dims, l.frame.dims.data(), l.frame.dims.size() * sizeof(int64_t)));
    ok(gpu_.upload(scalars, l.frame.scalars.data(), l.frame.scalars.size() * sizeof(uint64_t)));
    for (size_t a = 0; a < spec.frame.buffers.size(); ++a) {
      const int b = spec.frame.buffers[a];
      l.args.push_back(b == lowering::KernelFrame::kScalars  ? scalars
                       : b == lowering::KernelFrame::kStatus ? l.record
                                                             : reinterpret_cast<DevicePtr>(l.frame.args[a]));
    }
    l.args.push_back(dims);
    l.args.push_back(l.word);
    l.count = sizes_[spec.count];
    for (size_t a = 0; a + 1 < l.args.size(); ++a) l.params.push_back(&l.args[a]);
    l.params.push_back(&l.count);
    l.params.push_back(&l.args.back());
    l.function = function;
    ok(gpu_.launch(function, l.count, l.params));
  }

  /// The results and the status words downloaded; the first failing kernel's check reported.
  GraphRun collect(GraphRun run) {
    std::vector<int32_t> codes(launches_.size());
    for (size_t k = 0; k < launches_.size(); ++k) ok(gpu_.download(&codes[k], launches_[k].word, sizeof(int32_t)));
    for (size_t r = 0; r < run.results.size(); ++r) {
      ok(gpu_.download(run.results[r].bytes.data(), buffers_[graph_.parameters.size() + r], run.results[r].bytes.size()));
    }
    ok(gpu_.synchronize());
    for (size_t k = 0; k < launches_.size(); ++k) {
      if (codes[k] == 0) continue;
      run.failed_kernel = static_cast<int>(k);
      run.code = codes[k];
      ok(gpu_.download(&run.offending, launches_[k].record, sizeof(int64_t)));
      ok(gpu_.synchronize());
      break;
    }
    return run;
  }

  Gpu& gpu_;
  const ir::Graph& graph_;
  lowering::LoweredGraph lowered_;
  Buffers device_;
  codegen::GpuArch arch_;
  std::vector<int64_t> shapes_, sizes_;
  std::vector<ir::ScalarValue> scalars_;
  std::vector<DevicePtr> buffers_;  // the graph's buffer array on the device
  std::vector<void*> addresses_;    // the same, as bind_frame takes them
  std::vector<Launch> launches_;
};

}  // namespace

GraphRun run_graph(Gpu& gpu, const ir::Graph& graph, int timed_repeats) {
  return GraphLaunch(gpu, graph).run(timed_repeats);
}

}  // namespace lazyjit::runtime::cuda
