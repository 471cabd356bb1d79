// run_graph (gpu_graph.h): the CPU executor's launch sequence with device buffers.
#include "runtime/gpu_graph.h"

#include <cstring>

#include "codegen/kir_nvptx.h"
#include "fmt/format.h"
#include "lazyjit/error.h"
#include "lowering/fusion.h"
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

std::pair<std::string, std::string> ptx_target(const Gpu& gpu) {
  return {fmt::format("sm_{}", std::min(gpu.capability(), 90)), "ptx80"};
}

GraphRun run_graph(Gpu& gpu, const ir::Graph& graph) {
  const lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  const lowering::KernelPlan& plan = lowered.plan;
  auto [sm, ptx] = ptx_target(gpu);
  const codegen::GpuArch arch{sm, ptx};
  Buffers device(gpu);

  // The graph's buffer array, as device pointers: parameters, results, temporaries.
  std::vector<DevicePtr> buffers;
  for (const ir::Node* p : graph.parameters) {
    const DevicePtr pointer = value(device.add(p->data()->size_bytes()));
    ok(gpu.upload(pointer, p->data()->data(), p->data()->size_bytes()));
    buffers.push_back(pointer);
  }
  GraphRun run;
  for (int root : graph.roots) {
    const ir::Node& node = *graph.nodes[root];
    ir::HostTensor& result = run.results.emplace_back(ir::HostTensor{node.dtype(), node.shape(), {}});
    result.bytes.resize(static_cast<size_t>(result.numel() * dtype_size(node.dtype())));
    const DevicePtr pointer = value(device.add(result.bytes.size()));
    buffers.push_back(pointer);
  }
  const std::vector<int64_t> shapes = lowering::shape_table(graph);
  std::vector<int64_t> sizes;
  plan.sizes.evaluate(shapes.data(), sizes);
  for (const lowering::TempBuffer& temp : plan.temps) {
    const DevicePtr pointer = value(device.add(static_cast<size_t>(sizes[temp.bytes])));
    buffers.push_back(pointer);
  }
  std::vector<ir::ScalarValue> scalars;
  for (int s : graph.scalars) scalars.push_back(graph.nodes[s]->scalar());

  // Per kernel: its scalars, dims, status record (an int64) and status word (an int32) on the
  // device, and its launch parameters; the host copies live until the synchronisation.
  const size_t kernels = plan.kernels.size();
  std::vector<lowering::BoundFrame> frames(kernels);
  std::vector<std::vector<DevicePtr>> args(kernels);
  std::vector<int64_t> counts(kernels);
  std::vector<DevicePtr> words(kernels), records(kernels);
  std::vector<std::vector<void*>> params(kernels);
  int64_t host_record = 0;
  std::vector<void*> host_buffers(buffers.size());  // bind_frame's input: device addresses as pointers
  for (size_t b = 0; b < buffers.size(); ++b) host_buffers[b] = reinterpret_cast<void*>(buffers[b]);
  for (size_t k = 0; k < kernels; ++k) {
    const lowering::KernelSpec& spec = plan.kernels[k];
    if (spec.kind == lowering::KernelKind::Collective) {
      throw Error("GPU: collectives do not run on a GPU yet");
    }
    const lowering::LoweredKernel& kernel = lowered.kernels[k];
    const Function function = value(gpu.load(spec.symbol, [&] { return codegen::compile_ptx(kernel, arch); }));
    lowering::BoundFrame& frame = frames[k];
    lowering::bind_frame(spec.frame, host_buffers.data(), shapes.data(), scalars.data(), &host_record, frame);
    const DevicePtr record = value(device.add(sizeof(int64_t)));
    const DevicePtr word = value(device.add(sizeof(int32_t)));
    const DevicePtr dims = value(device.add(frame.dims.size() * sizeof(int64_t)));
    const DevicePtr scalar_frame = value(device.add(frame.scalars.size() * sizeof(uint64_t)));
    ok(gpu.fill_zero(record, sizeof(int64_t)));
    ok(gpu.fill_zero(word, sizeof(int32_t)));
    ok(gpu.upload(dims, frame.dims.data(), frame.dims.size() * sizeof(int64_t)));
    ok(gpu.upload(scalar_frame, frame.scalars.data(), frame.scalars.size() * sizeof(uint64_t)));
    records[k] = record;
    words[k] = word;
    for (size_t a = 0; a < spec.frame.buffers.size(); ++a) {
      const int b = spec.frame.buffers[a];
      args[k].push_back(b == lowering::KernelFrame::kScalars  ? scalar_frame
                        : b == lowering::KernelFrame::kStatus ? record
                                                              : reinterpret_cast<DevicePtr>(frame.args[a]));
    }
    args[k].push_back(dims);
    counts[k] = sizes[spec.count];
    args[k].push_back(word);
    for (size_t a = 0; a + 1 < args[k].size(); ++a) params[k].push_back(&args[k][a]);
    params[k].push_back(&counts[k]);
    params[k].push_back(&args[k].back());
    ok(gpu.launch(function, counts[k], params[k]));
  }

  std::vector<int32_t> codes(kernels);
  for (size_t k = 0; k < kernels; ++k) ok(gpu.download(&codes[k], words[k], sizeof(int32_t)));
  for (size_t r = 0; r < run.results.size(); ++r) {
    ok(gpu.download(run.results[r].bytes.data(), buffers[graph.parameters.size() + r], run.results[r].bytes.size()));
  }
  ok(gpu.synchronize());
  for (size_t k = 0; k < kernels; ++k) {
    if (codes[k] == 0) continue;
    run.failed_kernel = static_cast<int>(k);
    run.code = codes[k];
    ok(gpu.download(&run.offending, records[k], sizeof(int64_t)));
    ok(gpu.synchronize());
    break;
  }
  return run;
}

}  // namespace lazyjit::runtime::cuda
