// Lazy kernels of lazyjit's own for aten ops that PyTorch 1.13's Lazy Tensor Core runs on
// eager CPU (it has no Lazy kernel for them: each such op splits a step into several graphs
// and copies tensors out and back). One boxed kernel serves every op in kOps: it records
// the op as a node that lowers to the very aten call the TorchScript lowering emits for its
// own nodes, so the translation table (aten_ops.cpp) reads it like any other. Shapes come
// from running the op on meta tensors; an op whose meta kernel fails runs eagerly on the CPU,
// as it would without this file. Autograd needs nothing here: the Autograd key's formulas
// call the forward and backward ops, which are lazy again.
// Below them, kernels that replace what LTC 1.13 gets wrong: split, chunk and unbind (whose
// pieces it left on the CPU) as lazy slices, and batch norm (whose running statistics it never
// updated) as lazy ops with the update.
#include <algorithm>
#include <optional>
#include <sstream>
#include <variant>

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/lazy/core/hash.h>
#include <torch/csrc/lazy/core/tensor.h>
#include <torch/csrc/lazy/ts_backend/ts_lowering_context.h>
#include <torch/csrc/lazy/ts_backend/ts_node.h>
#include <torch/library.h>

#include "lazy_kernels.h"

namespace lazyjit::ltc {
namespace {

namespace tl = ::torch::lazy;
namespace jit = ::torch::jit;

/// The ops, by their schema names (PyTorch's native_functions.yaml): each needs a meta kernel
/// (for its shape) and a row in aten_ops.cpp (or its graphs fall back to TorchScript).
constexpr const char* kOps[] = {
    "amax", "amin", "argmax", "argmin", "where.self", "erf", "mse_loss", "mse_loss_backward", "cumprod",
    "log1p", "expm1", "sin", "ceil", "round", "sign", "logical_not", "logical_and", "logical_or",
    "clamp_max", "floor_divide", "silu_backward", "index_add", "var.correction", "var_mean.correction", "any.dim",
    "tan", "sinh", "cosh", "log10", "exp2", "mish", "hardswish", "hardswish_backward", "roll",
    "scatter.value", "hardtanh", "hardtanh_backward", "prod", "prod.dim_int",
};

/// One argument of the aten call a node lowers to: an operand (by index) or a constant, and
/// its name when it is keyword-only.
struct NodeArg {
  std::variant<size_t, c10::IValue> value;
  std::optional<std::string> keyword;
};

/// An aten call as a lazy node: its operands, its constant arguments in schema order.
class AtenNode final : public tl::TsNode {
 public:
  AtenNode(c10::Symbol op, std::vector<tl::Value> operands, std::vector<tl::Shape> shapes, size_t num_outputs,
           std::vector<NodeArg> args, tl::hash_t hash)
      : TsNode(tl::OpKind(op), operands, std::move(shapes), num_outputs, hash), args_(std::move(args)) {}

  tl::TSOpVector Lower(std::shared_ptr<jit::GraphFunction> function, tl::TSLoweringContext* loctx) const override {
    std::vector<jit::NamedValue> arguments, keywords;
    for (const NodeArg& arg : args_) {
      const size_t* operand = std::get_if<size_t>(&arg.value);
      const std::string name = arg.keyword.value_or("");
      jit::NamedValue value = operand ? jit::NamedValue(name, loctx->GetOutputOp(operands().at(*operand)))
                                      : jit::NamedValue(name, std::get<c10::IValue>(arg.value));
      (arg.keyword ? keywords : arguments).push_back(std::move(value));
    }
    return tl::LowerTSBuiltin(function, op().op, arguments, keywords);
  }

 private:
  std::vector<NodeArg> args_;
};

/// The op run eagerly on the CPU, its results moved back to the lazy device (what LTC does
/// for ops with no Lazy kernel).
void run_eagerly(const c10::OperatorHandle& op, jit::Stack* stack, const c10::Device& device) {
  for (c10::IValue& v : *stack) {
    if (v.isTensor() && v.toTensor().device().type() == c10::kLazy) v = v.toTensor().cpu();
  }
  op.callBoxed(stack);
  for (c10::IValue& v : *stack) {
    if (v.isTensor()) v = v.toTensor().to(device);
  }
}

/// A call's arguments as a node sees them: lazy operands (wrapped numbers moved to the lazy
/// device), constants in schema order, the same call over meta tensors, and a hash seed.
struct NodeCall {
  std::vector<tl::Value> operands;
  std::vector<NodeArg> args;
  std::vector<c10::IValue> meta;
  std::string constants;
};

NodeCall node_call(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& inputs, const c10::Device& device) {
  NodeCall call;
  call.meta = inputs;
  std::ostringstream constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    const std::optional<std::string> keyword = argument.kwarg_only() ? std::optional(argument.name()) : std::nullopt;
    if (!inputs[i].isTensor()) {
      call.args.push_back({inputs[i], keyword});
      constants << inputs[i] << ";";
      continue;
    }
    at::Tensor t = inputs[i].toTensor();
    const bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();  // a Python number
    if (t.device().type() != c10::kLazy) t = t.to(device);
    call.args.push_back({call.operands.size(), keyword});
    call.operands.push_back(tl::TryGetLtcTensor(t)->GetIrValue());
    // A Python number stays itself (a CPU scalar) in the meta call: it keeps its standing in
    // type promotion (int32 // 2 is int32, int64 // 1.5 float32), and the node's hash tells it
    // from a 0-dim tensor, whose results' dtypes differ.
    if (!wrapped) call.meta[i] = at::empty(t.sizes(), t.options().device(at::kMeta));
    constants << (wrapped ? "N;" : "T;");
  }
  call.constants = constants.str();
  return call;
}

void (*python_error_reset)() = nullptr;

void lazy_kernel(const c10::OperatorHandle& op, jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> inputs(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  auto lazy = std::find_if(inputs.begin(), inputs.end(),
                           [](const c10::IValue& v) { return v.isTensor() && v.toTensor().device().type() == c10::kLazy; });
  TORCH_CHECK(lazy != inputs.end(), "lazyjit: ", schema.name(), " has no lazy tensor argument");
  const c10::Device device = lazy->toTensor().device();
  const tl::BackendDevice backend_device = tl::TryGetLtcTensor(lazy->toTensor())->GetDevice();

  NodeCall call = node_call(schema, inputs, device);
  // The results' shapes; a meta kernel that fails (its shape rules or, for a decomposition
  // written in Python, Python's exception: var over the dim of a 0-dim tensor) leaves the op
  // to eager, which computes it or raises its own error.
  bool shaped = false;
  try {
    op.callBoxed(&call.meta);
    shaped = true;
  } catch (const c10::Error&) {
  } catch (const std::exception&) {
    if (python_error_reset != nullptr) python_error_reset();
  }
  if (!shaped) {
    stack->insert(stack->end(), inputs.begin(), inputs.end());
    run_eagerly(op, stack, device);
    return;
  }
  std::vector<tl::Shape> shapes;
  for (const c10::IValue& result : call.meta) shapes.emplace_back(result.toTensor().scalar_type(), result.toTensor().sizes().vec());
  const tl::hash_t hash = tl::HashCombine(tl::Hash(schema.operator_name().overload_name), tl::Hash(call.constants));
  const size_t num_outputs = shapes.size();
  tl::NodePtr node = std::make_shared<AtenNode>(c10::Symbol::fromQualString(schema.name()), std::move(call.operands),
                                                std::move(shapes), num_outputs, std::move(call.args), hash);
  for (size_t i = 0; i < num_outputs; ++i) {
    torch::jit::push(*stack, tl::CreateAtenFromLtcTensor(tl::LazyTensor::Create(tl::Value(node, i), backend_device)));
  }
}

// split, chunk and unbind of a lazy tensor become split_copy, split_with_sizes_copy and
// unbind_copy under functionalisation. PyTorch 1.13's LTC has no Lazy kernel for them, and its
// eager fallback leaves the pieces on the CPU (the next op on one aborts the process: "Input
// tensor is not a lazy tensor"). Here each piece is LTC's own lazy slice_copy or select_copy.

const c10::DispatchKeySet kLazyKeys(c10::DispatchKey::Lazy);

std::vector<at::Tensor> slices(const at::Tensor& self, int64_t dim, c10::ArrayRef<int64_t> sizes) {
  std::vector<at::Tensor> pieces;
  int64_t start = 0;
  for (int64_t size : sizes) {
    pieces.push_back(at::_ops::slice_copy_Tensor::redispatch(kLazyKeys, self, dim, c10::SymInt(start),
                                                             c10::SymInt(start + size), c10::SymInt(1)));
    start += size;
  }
  return pieces;
}

std::vector<at::Tensor> split_with_sizes_copy(const at::Tensor& self, at::IntArrayRef sizes, int64_t dim) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  int64_t total = 0;
  for (int64_t size : sizes) {
    TORCH_CHECK(size >= 0, "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=", sizes);
    total += size;
  }
  TORCH_CHECK(total == self.size(dim), "split_with_sizes expects split_sizes to sum exactly to ", self.size(dim),
              " (input tensor's size at dimension ", dim, "), but got split_sizes=", sizes);
  return slices(self, dim, sizes);
}

std::vector<at::Tensor> split_copy(const at::Tensor& self, int64_t split_size, int64_t dim) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(split_size >= 0, "split expects split_size be non-negative, but got split_size=", split_size);
  const int64_t length = self.size(dim);
  TORCH_CHECK(split_size > 0 || length == 0, "split_size can only be 0 if dimension size is 0, but got dimension size of ",
              length);
  // As PyTorch: pieces of split_size, the last one shorter; a dim of 0 gives one empty piece.
  const int64_t count = split_size == 0 ? 1 : std::max<int64_t>((length + split_size - 1) / split_size, 1);
  std::vector<int64_t> sizes(static_cast<size_t>(count), split_size);
  sizes.back() = length - split_size * (count - 1);
  return slices(self, dim, sizes);
}

std::vector<at::Tensor> unbind_copy(const at::Tensor& self, int64_t dim) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<at::Tensor> pieces;
  for (int64_t i = 0; i < self.size(dim); ++i) pieces.push_back(at::_ops::select_copy_int::redispatch(kLazyKeys, self, dim, i));
  return pieces;
}

// native_batch_norm: LTC 1.13's Lazy kernel records it without the in-place update of the
// running statistics that eager makes in training (its schema does not mark them as written),
// so a model's BatchNorm running statistics never moved on the lazy device. Here the batch
// norm is lazy ops, and the running statistics are updated in place with copy_, as eager does:
// running = (1 - momentum) * running + momentum * batch (the variance unbiased).
using OptionalTensor = c10::optional<at::Tensor>;

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input, const OptionalTensor& weight,
                                                                 const OptionalTensor& bias,
                                                                 const OptionalTensor& running_mean,
                                                                 const OptionalTensor& running_var, bool training,
                                                                 double momentum, double eps) {
  const bool has_mean = running_mean.has_value() && running_mean->defined();
  const bool has_var = running_var.has_value() && running_var->defined();
  TORCH_CHECK(training || (has_mean && has_var), "running_mean and running_var must be defined in evaluation mode");
  std::vector<int64_t> dims = {0}, channel_shape(static_cast<size_t>(input.dim()), 1);
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  channel_shape[1] = input.size(1);
  // Below functionalisation a view is its _copy op.
  auto per_channel = [&](const at::Tensor& t) { return at::view_copy(t, channel_shape); };
  at::Tensor mean, invstd, save_mean, save_invstd;
  if (training) {
    mean = input.mean(dims);
    // The biased variance as a mean of squares: LTC 1.13 runs var on eager CPU, which would
    // split the step into two graphs.
    const at::Tensor centered = input.sub(per_channel(mean));
    const at::Tensor var = centered.mul(centered).mean(dims);
    invstd = var.add(eps).rsqrt();
    save_mean = mean;
    save_invstd = invstd;
    const int64_t n = input.numel() / std::max<int64_t>(input.size(1), 1);
    const double unbiased = static_cast<double>(n) / static_cast<double>(std::max<int64_t>(n - 1, 1));
    if (has_mean) running_mean->copy_(running_mean->mul(1 - momentum).add(mean.mul(momentum)));
    if (has_var) running_var->copy_(running_var->mul(1 - momentum).add(var.mul(momentum * unbiased)));
  } else {
    mean = *running_mean;
    invstd = running_var->add(eps).rsqrt();
    save_mean = at::empty({0}, input.options());  // as eager: nothing saved in evaluation
    save_invstd = at::empty({0}, input.options());
  }
  at::Tensor out = input.sub(per_channel(mean)).mul(per_channel(invstd));
  if (weight.has_value() && weight->defined()) out = out.mul(per_channel(*weight));
  if (bias.has_value() && bias->defined()) out = out.add(per_channel(*bias));
  return {out, save_mean, save_invstd};
}

}  // namespace

void set_python_error_reset(void (*reset)()) { python_error_reset = reset; }

void register_lazy_kernels() {
  static torch::Library* library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Lazy, __FILE__, __LINE__);
    for (const char* name : kOps) lib->impl(name, torch::CppFunction::makeFromBoxedFunction<&lazy_kernel>());
    lib->impl("split_copy.Tensor", TORCH_FN(split_copy));
    lib->impl("split_with_sizes_copy", TORCH_FN(split_with_sizes_copy));
    lib->impl("unbind_copy.int", TORCH_FN(unbind_copy));
    // The unsafe variants (chunk in PyTorch's own LSTM and GRU cells) are not views: the same
    // slices serve, where PyTorch's composite reaches as_strided, which LTC has no kernel for.
    lib->impl("unsafe_split.Tensor", TORCH_FN(split_copy));
    lib->impl("unsafe_split_with_sizes", TORCH_FN(split_with_sizes_copy));
    {
      // It replaces LTC's own kernel: PyTorch warns of that, which users need not see.
      struct Quiet : c10::WarningHandler {
        void process(const c10::SourceLocation&, const std::string&, bool) override {}
      } quiet;
      c10::Warning::WarningHandlerGuard guard(&quiet);
      lib->impl("native_batch_norm", TORCH_FN(native_batch_norm));
    }
    return lib;
  }();
  (void)library;
}

}  // namespace lazyjit::ltc
