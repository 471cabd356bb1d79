// The torch::lazy backend: lazyjit's BackendImplInterface over the TorchScript backend's
// tracing. LTC traces and lowers each graph to a torch::jit::Graph of aten ops (the TS
// lowering, reused); Compile translates it to a lazyjit Program (translate.h) and
// ExecuteComputation replays that on lazyjit tensors over PyTorch's buffers. A graph lazyjit
// cannot translate runs on the TorchScript executor, counted.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <unordered_set>

#include <ATen/Functions.h>
#include <torch/csrc/lazy/backend/backend_interface.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>
#include <torch/csrc/lazy/ts_backend/ts_lowering_context.h>

#include "lazyjit/backend.h"
#include "lazyjit/error.h"
#include "lazyjit/ops.h"
#include "lazyjit/runtime.h"
#include "lazyjit/torch.h"
#include "lazy_kernels.h"
#include "translate.h"

namespace lazyjit::ltc {
namespace {

namespace tl = ::torch::lazy;

struct Counters {
  std::atomic<int64_t> graphs_translated{0}, fallback_graphs{0}, lazyjit_executions{0}, fallback_executions{0}, buffers_offered{0};
  std::mutex mutex;
  std::map<std::string, int64_t> fallback_ops;
  std::map<std::string, std::string> fallback_reasons;
};
Counters& counters() {
  static Counters c;
  return c;
}

/// A graph left to TorchScript, with the op that stopped lazyjit and why.
void count_fallback(const std::string& op, const std::string& reason) {
  Counters& c = counters();
  c.fallback_graphs.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(c.mutex);
  ++c.fallback_ops[op];
  c.fallback_reasons[op] = reason;
}

/// PyTorch's CPU storage as a lazyjit buffer, not copied.
class TorchBuffer final : public BackendData {
 public:
  TorchBuffer(at::Tensor tensor, DType dtype) : BackendData(dtype, tensor.sizes().vec()), tensor_(std::move(tensor)) {}
  void* data() override { return tensor_.data_ptr(); }
  const at::Tensor& tensor() const { return tensor_; }

 private:
  at::Tensor tensor_;
};

bool is_aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0; }

/// An input of a run: LTC's device data (a CPU tensor, or a number) as a lazyjit tensor.
struct Input {
  Tensor tensor;
  BackendDataPtr buffer;
};
Input input_tensor(const tl::TSData& data) {
  if (data.scalar) {
    const at::Scalar& s = *data.scalar;
    if (s.isFloatingPoint()) return {Tensor::from_vector(std::vector<double>{s.toDouble()}, {}), nullptr};
    if (s.isBoolean()) return {Tensor::from_vector(std::vector<bool>{s.toBool()}, {}), nullptr};
    return {Tensor::from_vector(std::vector<int64_t>{s.toLong()}, {}), nullptr};
  }
  at::Tensor t = const_cast<tl::TSData&>(data).data();
  const std::optional<DType> dtype = to_dtype(t.scalar_type());
  TORCH_CHECK(dtype, "lazyjit: an input of dtype ", t.scalar_type(), " reached a translated graph");
  if (!t.is_contiguous() || !is_aligned(t)) t = t.clone(at::MemoryFormat::Contiguous);
  auto buffer = std::make_shared<TorchBuffer>(std::move(t), *dtype);
  return {tensor_from_data(buffer), buffer};
}

/// Whether nothing but this run can read the argument's buffer again: LTC holds the data only
/// in the run's parameter list (the step barrier has replaced the tensor's value and dropped
/// its IR), and no PyTorch tensor shares its storage. Such a buffer may take a result.
bool is_dead(const tl::BackendDataPtr& argument) {
  const auto& data = static_cast<const tl::TSData&>(*argument);
  if (argument.use_count() != 1 || data.scalar) return false;
  const at::Tensor t = const_cast<tl::TSData&>(data).data();  // a second reference while it lives
  return t.defined() && t.use_count() == 2 && t.storage().use_count() == 1;
}

/// A result as PyTorch's tensor: the buffer itself (kept alive by the tensor), or a copy
/// when another result or a live input already holds it (so that a later donation into one
/// buffer cannot change a second tensor).
at::Tensor output_tensor(const Tensor& t, std::unordered_set<const BackendData*>& returned,
                         const std::unordered_set<const BackendData*>& dead) {
  BackendDataPtr data = tensor_data(t);
  const bool shared = !returned.insert(data.get()).second;
  if (auto* torch_buffer = dynamic_cast<TorchBuffer*>(data.get())) {
    // An input's buffer: donated, or passed through; a live input's is copied.
    return dead.contains(data.get()) && !shared ? torch_buffer->tensor() : torch_buffer->tensor().clone();
  }
  const std::vector<int64_t> sizes = data->shape();
  void* p = data->data();
  at::Tensor result = at::from_blob(p, sizes, [data](void*) {}, at::TensorOptions().dtype(to_scalar_type(data->dtype())));
  return shared ? result.clone() : result;
}

/// A lowered graph: the TorchScript computation (the fallback) and, when lazyjit can express
/// it, its Program.
class Computation : public tl::TSComputation {
 public:
  Computation(std::shared_ptr<::torch::jit::Graph> graph, std::vector<tl::Shape> parameters, ValueShapes shapes)
      : TSComputation(graph), parameters_(std::move(parameters)), shapes_(std::move(shapes)) {}

  /// Translates the graph and traces the Program once over zeros of the parameters' shapes
  /// (nothing runs), so that every shape and dtype lazyjit rejects is found here, and the
  /// graph falls back before it ever runs.
  void compile() {
    if (compiled_) return;
    compiled_ = true;
    Translation t = translate();
    program_ = std::move(t.program);
    fallback_reason_ = std::move(t.reason);
    if (program_) {
      counters().graphs_translated.fetch_add(1, std::memory_order_relaxed);
    } else {
      count_fallback(t.op, fallback_reason_);
    }
  }

  bool translated() const { return program_.has_value(); }

  /// A run whose replay lazyjit rejected: it, and every later run, goes to TorchScript.
  void fall_back_at_run(const Untranslatable& e) {
    program_.reset();
    fallback_reason_ = e.what();
    count_fallback(e.op(), fallback_reason_);
  }

  /// Runs the Program over the arguments' buffers. Arguments nothing else can read again
  /// (is_dead) are offered to lazyjit's mark_step, which writes results of the same shape
  /// into them (donation); the others stay referenced here until the run is done.
  std::vector<tl::BackendDataPtr> execute(c10::ArrayRef<tl::BackendDataPtr> arguments, const tl::BackendDevice& device) {
    counters().lazyjit_executions.fetch_add(1, std::memory_order_relaxed);
    std::vector<Tensor> inputs;
    std::vector<BackendDataPtr> live;
    std::unordered_set<const BackendData*> dead;
    inputs.reserve(arguments.size());
    for (const tl::BackendDataPtr& argument : arguments) {
      const bool donatable = is_dead(argument);
      Input input = input_tensor(static_cast<const tl::TSData&>(*argument));
      inputs.push_back(std::move(input.tensor));
      if (!input.buffer) continue;
      if (donatable) {
        dead.insert(input.buffer.get());
      } else {
        live.push_back(std::move(input.buffer));
      }
    }
    // The inputs' handles go with the run, so a dead buffer is held by its IR leaf alone. A
    // trace lazyjit rejects (arguments unlike those compiled for) falls back; errors found
    // when the graph runs (an index out of range) are the user's.
    std::vector<Tensor> outputs;
    try {
      outputs = program_->run(std::move(inputs));
    } catch (const Error& e) {
      throw Untranslatable("lazyjit error", e.what());
    }
    if (dead.empty()) {
      sync(outputs);
    } else {
      counters().buffers_offered.fetch_add(static_cast<int64_t>(dead.size()), std::memory_order_relaxed);
      mark_step();
    }
    std::vector<tl::BackendDataPtr> results;
    std::unordered_set<const BackendData*> returned;
    for (const Tensor& output : outputs) {
      at::Tensor t = output_tensor(output, returned, dead);
      tl::Shape shape(t.scalar_type(), t.sizes().vec());
      results.push_back(std::make_shared<tl::TSData>(t, shape, device));
    }
    return results;
  }

  /// The Program and lazyjit's IR of its graph (LAZYJIT_TORCH_DUMP: plan, kernel_ir,
  /// llvm_ir or asm instead), or why the graph runs on the TorchScript executor. A graph LTC
  /// has not compiled (torch._lazy's debug dumps) is translated for the text alone.
  std::string text() const {
    Translation t = compiled_ ? Translation{program_, "", fallback_reason_} : translate();
    if (!t.program) return "lazyjit: runs on the TorchScript executor: " + t.reason + "\n" + to_string();
    const char* format = std::getenv("LAZYJIT_TORCH_DUMP");
    const std::string f = format ? format : "lazy_ir";
    const DumpFormat dump_format = f == "kernel_ir" ? DumpFormat::KernelIr
                                   : f == "plan"    ? DumpFormat::Plan
                                   : f == "llvm_ir" ? DumpFormat::OptimizedLlvmIr
                                   : f == "asm"     ? DumpFormat::Assembly
                                                    : DumpFormat::LazyIr;
    return t.program->to_string() + "\n" + dump(t.program->run(placeholders()), dump_format);
  }

 private:
  std::vector<Tensor> placeholders() const {
    std::vector<Tensor> inputs;
    for (const tl::Shape& shape : parameters_) {
      const std::optional<DType> dtype = to_dtype(shape.scalar_type());
      if (!dtype) throw Untranslatable("graph input", c10::str("a ", shape.scalar_type(), " input, a dtype lazyjit does not have"));
      inputs.push_back(zeros(shape.sizes().vec(), *dtype));
    }
    return inputs;
  }

  struct Translation {
    std::optional<Program> program;
    std::string op, reason;  // what stopped it
  };
  Translation translate() const {
    try {
      Program program = Program::translate(*graph(), shapes_);
      program.run(placeholders());
      return {std::move(program), "", ""};
    } catch (const Untranslatable& e) {
      return {std::nullopt, e.op(), e.what()};
    } catch (const Error& e) {
      return {std::nullopt, "lazyjit error", e.what()};
    }
  }

  std::vector<tl::Shape> parameters_;
  ValueShapes shapes_;
  bool compiled_ = false;
  std::optional<Program> program_;
  std::string fallback_reason_;
};

/// The TS lowering context, recording what LTC knows of each lowered value (its shape) for
/// the Computation it builds. LTC's alias hints (SetUpAlias) are not used: under 1.13's
/// functionalisation an in-place update gives the tensor a new id every step, so the hints
/// stop after the first step; execute() finds dead buffers from reference counts instead.
class LoweringContext : public tl::TSLoweringContext {
 public:
  LoweringContext(const std::string& name, tl::BackendDevice device, c10::ArrayRef<tl::Node*> post_order,
                  tl::Util::EmissionMap emit_status)
      : TSLoweringContext(name, device, post_order, emit_status) {
    for (const tl::Node* node : post_order) record_shapes(node);
  }
  LoweringContext(const std::string& name, tl::BackendDevice device) : TSLoweringContext(name, device) {}

  /// Without a post-order (LTC's debug dumps) the graph is lowered root by root: the shapes
  /// of the root's whole cone are recorded then.
  size_t AddResult(const tl::Output& output) override {
    const size_t index = TSLoweringContext::AddResult(output);
    for (const tl::Node* node : tl::Util::ComputePostOrder(output.node, &recorded_)) record_shapes(node);
    return index;
  }

  tl::ComputationPtr Build() override {
    auto ts = std::static_pointer_cast<tl::TSComputation>(TSLoweringContext::Build());
    std::vector<tl::Shape> parameters;
    for (const tl::BackendDataPtr& data : GetParametersData()) parameters.push_back(data->shape());
    return std::make_shared<Computation>(ts->graph(), std::move(parameters), std::move(shapes_));
  }

 private:
  void record_shapes(const tl::Node* node) {
    const c10::ArrayRef<tl::Shape> shapes = node->shapes();  // empty for ops LTC cannot infer (cat)
    for (size_t i = 0; i < shapes.size() && i < node->num_outputs(); ++i) {
      shapes_.emplace(GetOutputOp(tl::Output(node, i)), shapes[i]);
    }
  }

  ValueShapes shapes_;
  tl::Util::EmissionMap recorded_;  // the nodes whose shapes are recorded, for AddResult
};

/// lazyjit's backend: the TorchScript backend's tracing, data and devices; lazyjit's
/// lowering context, compile and execution.
class Backend final : public tl::BackendImplInterface {
 public:
  explicit Backend(tl::BackendImplInterface* ts) : ts_(ts) {}

  void InitializeAtenBindings() const override { ts_->InitializeAtenBindings(); }
  void PrepareToExit() const override { ts_->PrepareToExit(); }
  void SetRngSeed(size_t seed) const override { ts_->SetRngSeed(seed); }
  const tl::IrBuilder* GetIrBuilder() const override { return ts_->GetIrBuilder(); }

  /// Always a copy PyTorch does not share: the runtime may donate the buffer to a result.
  tl::BackendDataPtr MakeComputationDataFromTensor(const at::Tensor& tensor, const tl::Shape& shape,
                                                   const tl::BackendDevice& device) const override {
    at::Tensor copy = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).memory_format(at::MemoryFormat::Contiguous));
    copy.copy_(tensor);
    return std::make_shared<tl::TSData>(copy, shape, device);
  }
  tl::BackendDataPtr MakeComputationDataFromScalar(const at::Scalar& scalar, const tl::BackendDevice& device) const override {
    return ts_->MakeComputationDataFromScalar(scalar, device);
  }
  tl::BackendDataPtr CreateDataPlaceholder(const tl::BackendDevice& device, const tl::Shape& shape) const override {
    return ts_->CreateDataPlaceholder(device, shape);
  }
  tl::BackendDataPtr GetComputationDataFromNode(tl::Node* node) const override { return ts_->GetComputationDataFromNode(node); }
  at::Tensor MakeTensorFromComputationData(const tl::BackendDataPtr data,
                                           c10::optional<at::ScalarType> logical_scalar_type) const override {
    return ts_->MakeTensorFromComputationData(data, logical_scalar_type);
  }

  std::unique_ptr<tl::LoweringContext> CreateLoweringContext(const std::string& name, tl::BackendDevice device,
                                                             c10::ArrayRef<tl::Node*> post_order,
                                                             tl::Util::EmissionMap emit_status) const override {
    return std::make_unique<LoweringContext>(name, device, post_order, emit_status);
  }
  std::unique_ptr<tl::LoweringContext> CreateLoweringContext(const std::string& name, tl::BackendDevice device) const override {
    return std::make_unique<LoweringContext>(name, device);
  }
  std::vector<std::string> GetCompilationDevices(const std::string& device, c10::ArrayRef<std::string> devices) const override {
    return ts_->GetCompilationDevices(device, devices);
  }

  std::vector<tl::ComputationPtr> Compile(std::vector<tl::ComputationPtr> instances) const override {
    for (const tl::ComputationPtr& instance : instances) {
      if (auto* c = dynamic_cast<Computation*>(instance.get())) c->compile();
    }
    return instances;
  }

  std::vector<tl::BackendDataPtr> ExecuteComputation(tl::ComputationPtr computation, c10::ArrayRef<tl::BackendDataPtr> arguments,
                                                     const tl::BackendDevice& device) const override {
    auto* c = dynamic_cast<Computation*>(computation.get());
    if (c && c->translated()) {
      try {
        return c->execute(arguments, device);
      } catch (const Untranslatable& e) {
        // Arguments of other sizes than those compiled for (LTC reusing IR): nothing ran yet.
        c->fall_back_at_run(e);
      } catch (const Error& e) {
        TORCH_CHECK(false, e.what());  // as PyTorch's error (a RuntimeError in Python)
      }
    }
    counters().fallback_executions.fetch_add(1, std::memory_order_relaxed);
    return ts_->ExecuteComputation(computation, arguments, device);
  }

  std::shared_ptr<tl::BackendDeviceType> GetDefaultDeviceType() const override { return ts_->GetDefaultDeviceType(); }
  void SetDefaultDeviceType(int8_t type) override { ts_->SetDefaultDeviceType(type); }
  int64_t GetDefaultDeviceOrdinal() const override { return ts_->GetDefaultDeviceOrdinal(); }
  void SetDefaultDeviceOrdinal(int64_t ordinal) override { ts_->SetDefaultDeviceOrdinal(ordinal); }
  at::DeviceType EagerFallbackDeviceType() const override { return ts_->EagerFallbackDeviceType(); }
  std::vector<tl::BackendDevice> GetBackendDevices() const override { return ts_->GetBackendDevices(); }
  tl::BackendDevice GetBackendDevice(c10::Device device) const override { return ts_->GetBackendDevice(device); }

  std::string CreateMetricReport() const override { return lazyjit::torch::metrics_report(); }

  std::string GetComputationBackendText(const tl::ComputationPtr computation) const override {
    if (auto* c = dynamic_cast<Computation*>(computation.get())) return c->text();
    return ts_->GetComputationBackendText(computation);
  }

 private:
  tl::BackendImplInterface* ts_;
};

}  // namespace
}  // namespace lazyjit::ltc

namespace lazyjit::torch {

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    namespace tl = ::torch::lazy;
    if (!tl::hasBackend()) tl::InitTorchScriptBackend();  // its lazy kernels; not idempotent
    static ltc::Backend backend(tl::GetTSBackendImpl());
    static tl::BackendRegistrar registrar(&backend);
    ltc::register_lazy_kernels();
  });
}

Metrics metrics() {
  ltc::Counters& c = ltc::counters();
  Metrics m;
  m.graphs_translated = c.graphs_translated.load();
  m.fallback_graphs = c.fallback_graphs.load();
  m.lazyjit_executions = c.lazyjit_executions.load();
  m.fallback_executions = c.fallback_executions.load();
  m.buffers_offered = c.buffers_offered.load();
  std::lock_guard lock(c.mutex);
  m.fallback_ops = c.fallback_ops;
  m.fallback_reasons = c.fallback_reasons;
  return m;
}

void reset_metrics() {
  ltc::Counters& c = ltc::counters();
  c.graphs_translated = c.fallback_graphs = c.lazyjit_executions = c.fallback_executions = c.buffers_offered = 0;
  std::lock_guard lock(c.mutex);
  c.fallback_ops.clear();
  c.fallback_reasons.clear();
}

std::string metrics_report() {
  const Metrics m = metrics();
  std::ostringstream os;
  os << "torch_graphs_translated: " << m.graphs_translated << "\n"
     << "torch_fallback_graphs: " << m.fallback_graphs << "\n"
     << "torch_lazyjit_executions: " << m.lazyjit_executions << "\n"
     << "torch_fallback_executions: " << m.fallback_executions << "\n"
     << "torch_buffers_offered: " << m.buffers_offered << "\n";
  for (const auto& [op, count] : m.fallback_ops) {
    os << "torch_fallback_op " << op << ": " << count << " (last: " << m.fallback_reasons.at(op) << ")\n";
  }
  return os.str() + lazyjit::metrics_report();
}

}  // namespace lazyjit::torch
