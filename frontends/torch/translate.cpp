// Translation of a lowered LTC graph to a Program, and its replay.
#include "translate.h"

#include <sstream>
#include <unordered_map>

#include <c10/util/Exception.h>
#include <torch/csrc/jit/ir/constants.h>

#include "lazyjit/ops.h"

namespace lazyjit::ltc {

namespace jit = ::torch::jit;

std::optional<DType> to_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return DType::Bool;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Float: return DType::Float32;
    case c10::ScalarType::Double: return DType::Float64;
    default: return std::nullopt;
  }
}

c10::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return c10::ScalarType::Bool;
    case DType::Int32: return c10::ScalarType::Int;
    case DType::Int64: return c10::ScalarType::Long;
    case DType::Float32: return c10::ScalarType::Float;
    case DType::Float64: return c10::ScalarType::Double;
  }
  return c10::ScalarType::Undefined;
}

namespace {

template <class T>
Tensor copy_of(const at::Tensor& t) {
  const T* p = t.data_ptr<T>();
  return Tensor::from_vector(std::vector<T>(p, p + t.numel()), t.sizes().vec());
}

/// A constant tensor of the graph (LTC's scalars, lowered as `prim::Constant` tensors): a 0-dim
/// one as a scalar of the graph (no buffer to fill on every replay), others copied.
Tensor from_constant(const at::Tensor& constant, const std::string& op) {
  const std::optional<DType> dtype = to_dtype(constant.scalar_type());
  if (!dtype) throw Untranslatable(op, c10::str("a constant of dtype ", constant.scalar_type()));
  if (constant.dim() == 0) {
    const Scalar value = is_floating(*dtype) ? Scalar(constant.item<double>())
                         : *dtype == DType::Bool ? Scalar(constant.item<bool>())
                                                 : Scalar(constant.item<int64_t>());
    return full({}, value, *dtype);
  }
  const at::Tensor t = constant.contiguous();
  switch (*dtype) {
    case DType::Bool: return copy_of<bool>(t);
    case DType::Int32: return copy_of<int32_t>(t);
    case DType::Int64: return copy_of<int64_t>(t);
    case DType::Float32: return copy_of<float>(t);
    case DType::Float64: return copy_of<double>(t);
  }
  throw Untranslatable(op, "unreachable dtype");
}

/// A constant argument as a tensor: numbers as PyTorch wraps them (0-dim float64, int64, bool).
Tensor constant_tensor(const c10::IValue& value, const std::string& op) {
  if (value.isTensor()) return from_constant(value.toTensor(), op);
  if (value.isDouble()) return full({}, value.toDouble(), DType::Float64);
  if (value.isInt()) return full({}, value.toInt(), DType::Int64);
  if (value.isBool()) return full({}, value.toBool(), DType::Bool);
  throw Untranslatable(op, c10::str("a constant ", value.tagKind(), " where a tensor is expected"));
}

Tensor slot_tensor(const std::vector<Tensor>& slots, int slot, const std::string& op) {
  if (!slots[slot].defined()) throw Untranslatable(op, c10::str("reads %", slot, " before it is computed"));
  return slots[slot];
}

Tensor arg_tensor(const Arg& arg, const std::vector<Tensor>& slots, const std::string& op) {
  if (arg.slot >= 0 && arg.transposed) return transpose(slot_tensor(slots, arg.slot, op), -2, -1);
  if (arg.slot >= 0) return slot_tensor(slots, arg.slot, op);
  if (arg.constant) return constant_tensor(*arg.constant, op);
  throw Untranslatable(op, "a list where a tensor is expected");
}

std::string arg_text(const Arg& arg) {
  if (arg.slot >= 0) return c10::str(arg.transposed ? "%" : "%", arg.slot, arg.transposed ? ".mT" : "");
  if (arg.constant) {
    std::ostringstream os;
    os << *arg.constant;
    return os.str();
  }
  std::string text = "[";
  for (size_t i = 0; i < arg.slots.size(); ++i) text += c10::str(i ? ", %" : "%", arg.slots[i]);
  return text + "]";
}

/// Constant elements as one constant list of T.
template <class T>
Arg constant_list(const std::vector<const Arg*>& elements) {
  c10::List<T> list;
  for (const Arg* a : elements) list.push_back(a->constant->to<T>());
  return Arg{.constant = c10::IValue(list)};
}

/// A `prim::ListConstruct` of constants as one constant list, or of values as a list of slots.
Arg list_arg(const jit::Node& node, const ArgsOf& args_of) {
  const std::string op = node.kind().toQualString();
  std::vector<const Arg*> elements;
  for (const jit::Value* input : node.inputs()) elements.push_back(&args_of.at(input));
  const bool all_constant = std::all_of(elements.begin(), elements.end(), [](const Arg* a) { return a->constant.has_value(); });
  const bool all_slots = std::all_of(elements.begin(), elements.end(), [](const Arg* a) { return a->slot >= 0; });
  const c10::TypePtr element_type = node.output()->type()->containedType(0);
  if (all_constant && element_type->kind() == c10::TypeKind::IntType) return constant_list<int64_t>(elements);
  if (all_constant && element_type->kind() == c10::TypeKind::FloatType) return constant_list<double>(elements);
  if (all_constant && element_type->kind() == c10::TypeKind::BoolType) return constant_list<bool>(elements);
  if (all_slots && element_type->kind() == c10::TypeKind::TensorType) {
    Arg list;
    for (const Arg* a : elements) list.slots.push_back(a->slot);
    return list;
  }
  throw Untranslatable(op, c10::str("a list of ", element_type->str(), " that is not all constants or all tensors"));
}

bool is_implicit_conversion(c10::Symbol kind) {
  return kind == c10::aten::IntImplicit || kind == c10::aten::FloatImplicit || kind == c10::aten::ScalarImplicit;
}

/// IntImplicit and friends of a constant tensor, folded to the number.
c10::IValue implicit_constant(const jit::Node& node, const Arg& input) {
  const std::string op = node.kind().toQualString();
  if (!input.constant || !input.constant->isTensor() || input.constant->toTensor().numel() != 1) {
    throw Untranslatable(op, "the number is computed at run time");
  }
  const at::Tensor t = input.constant->toTensor();
  if (node.kind() == c10::aten::IntImplicit) return t.item().toLong();
  if (node.kind() == c10::aten::FloatImplicit) return t.item().toDouble();
  return at::isFloatingType(t.scalar_type()) ? c10::IValue(t.item().toDouble()) : c10::IValue(t.item().toLong());
}

bool is_view(c10::Symbol kind) {
  return kind == c10::aten::view_copy || kind == c10::aten::view || kind == c10::aten::_unsafe_view ||
         kind == c10::aten::reshape;
}

/// Whether `node` swaps the last two dims of a rank-3 tensor (transpose(x, 1, 2), as
/// autograd writes bmm's gradients).
bool swaps_last_two_dims(const jit::Node& node) {
  if (node.kind() != c10::aten::transpose_copy && node.kind() != c10::aten::transpose) return false;
  const c10::optional<c10::IValue> d0 = jit::toIValue(node.input(1)), d1 = jit::toIValue(node.input(2));
  if (!d0 || !d1 || !d0->isInt() || !d1->isInt()) return false;
  const int64_t a = (d0->toInt() + 3) % 3, b = (d1->toInt() + 3) % 3;
  return std::min(a, b) == 1 && std::max(a, b) == 2;
}

/// The operands of a bmm when both are views that merge leading dims ([B, H, M, K] viewed as
/// [B*H, M, K], as PyTorch's matmul of 4-D tensors lowers), each perhaps transposed after: the
/// unmerged tensors, which lazyjit's matmul reads through their index maps, where a merged
/// view of a permuted tensor would cost a division per element read. nullopt when the pattern
/// does not hold.
std::optional<std::pair<Arg, Arg>> unmerged_bmm_operands(const jit::Node& bmm, const ArgsOf& args_of,
                                                         const ValueShapes& shapes) {
  std::vector<Arg> sources;
  std::vector<int64_t> batch;
  for (size_t i = 0; i < 2; ++i) {
    const jit::Value* merged = bmm.input(i);
    const bool transposed = swaps_last_two_dims(*merged->node());
    if (transposed) merged = merged->node()->input(0);
    const jit::Node* view = merged->node();
    if (!is_view(view->kind())) return std::nullopt;
    const jit::Value* source = view->input(0);
    const auto from = shapes.find(source), to = shapes.find(merged);
    const auto arg = args_of.find(source);
    if (from == shapes.end() || to == shapes.end() || arg == args_of.end() || arg->second.slot < 0) return std::nullopt;
    const std::vector<int64_t>& src = from->second.sizes().vec(), dst = to->second.sizes().vec();
    if (src.size() < 4 || dst.size() != 3 || src[src.size() - 2] != dst[1] || src.back() != dst[2]) return std::nullopt;
    const std::vector<int64_t> leading(src.begin(), src.end() - 2);
    int64_t batch_size = 1;
    for (int64_t d : leading) batch_size *= d;
    if (batch_size != dst[0] || (i == 1 && leading != batch)) return std::nullopt;
    batch = leading;
    sources.push_back(arg->second);
    sources.back().transposed = transposed;
  }
  return std::pair{sources[0], sources[1]};
}

bool is_number_type(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::FloatType || type->kind() == c10::TypeKind::IntType ||
         type->kind() == c10::TypeKind::BoolType;
}

}  // namespace

// --- Call ---------------------------------------------------------------------------------

const Arg& Call::arg(std::string_view name) const {
  const std::vector<c10::Argument>& arguments = node_.schema().arguments();
  for (size_t i = 0; i < arguments.size() && i < args_.size(); ++i) {
    if (arguments[i].name() == name) return args_[i];
  }
  unsupported(c10::str("the overload ", node_.schema().overload_name(), " has no argument '", name, "'"));
}

const c10::IValue& Call::constant(std::string_view name, const char* kind) const {
  const Arg& a = arg(name);
  if (!a.constant) unsupported(c10::str("'", name, "' must be a constant ", kind, ", it is a value computed at run time"));
  return *a.constant;
}

bool Call::has(std::string_view name) const {
  const std::vector<c10::Argument>& arguments = node_.schema().arguments();
  for (size_t i = 0; i < arguments.size() && i < args_.size(); ++i) {
    if (arguments[i].name() == name) return !(args_[i].constant && args_[i].constant->isNone());
  }
  return false;
}

Tensor Call::tensor(std::string_view name) const { return arg_tensor(arg(name), slots_, op()); }

Tensor Call::optional_tensor(std::string_view name) const { return has(name) ? tensor(name) : Tensor(); }

std::vector<Tensor> Call::tensors(std::string_view name) const {
  const Arg& a = arg(name);
  if (a.slot >= 0 || a.constant) unsupported(c10::str("'", name, "' must be a list of tensors"));
  std::vector<Tensor> out;
  for (int slot : a.slots) out.push_back(slot_tensor(slots_, slot, op()));
  return out;
}

int64_t Call::integer(std::string_view name) const {
  const c10::IValue& v = constant(name, "int");
  if (!v.isInt()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not an int"));
  return v.toInt();
}

double Call::real(std::string_view name) const {
  const c10::IValue& v = constant(name, "float");
  if (!v.isDouble() && !v.isInt()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not a number"));
  return v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
}

bool Call::boolean(std::string_view name) const {
  const c10::IValue& v = constant(name, "bool");
  if (!v.isBool()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not a bool"));
  return v.toBool();
}

Scalar Call::scalar(std::string_view name) const {
  const c10::IValue& v = constant(name, "number");
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool();
  unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not a number"));
}

std::optional<double> Call::constant_number(std::string_view name) const {
  const Arg& a = arg(name);
  if (!a.constant) return std::nullopt;
  if (a.constant->isDouble()) return a.constant->toDouble();
  if (a.constant->isInt()) return static_cast<double>(a.constant->toInt());
  if (a.constant->isBool()) return a.constant->toBool() ? 1.0 : 0.0;
  unsupported(c10::str("'", name, "' is ", a.constant->tagKind(), ", not a number"));
}

std::string Call::string(std::string_view name) const {
  const c10::IValue& v = constant(name, "string");
  if (!v.isString()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not a string"));
  return v.toStringRef();
}

std::vector<int64_t> Call::ints(std::string_view name) const {
  const c10::IValue& v = constant(name, "int[]");
  if (v.isInt()) return {v.toInt()};  // int[1] arguments accept one int
  if (!v.isIntList()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not an int[]"));
  return v.toIntVector();
}

std::vector<bool> Call::bools(std::string_view name) const {
  const c10::IValue& v = constant(name, "bool[]");
  if (!v.isBoolList()) unsupported(c10::str("'", name, "' is ", v.tagKind(), ", not a bool[]"));
  const c10::List<bool> list = v.toBoolList();
  return std::vector<bool>(list.begin(), list.end());
}

std::optional<DType> Call::dtype(std::string_view name) const {
  if (!has(name)) return std::nullopt;
  const c10::ScalarType type = static_cast<c10::ScalarType>(integer(name));
  const std::optional<DType> dtype = to_dtype(type);
  if (!dtype) unsupported(c10::str("lazyjit has no dtype ", type));
  return dtype;
}

bool Call::output_read_only_by(size_t i, std::string_view reader) const {
  const c10::Symbol kind = c10::Symbol::fromQualString(std::string(reader));
  const auto& uses = node_.outputs().at(i)->uses();
  return std::all_of(uses.begin(), uses.end(), [&](const ::torch::jit::Use& use) {
    // The NamedTuple a multi-result builtin leaves behind reads it but is read by nothing.
    const bool dead_tuple = use.user->kind() == c10::prim::TupleConstruct && !use.user->output()->hasUses();
    return use.user->kind() == kind || dead_tuple;
  });
}

void Call::unsupported(const std::string& why) const { throw Untranslatable(op(), why); }

// --- Program ------------------------------------------------------------------------------

Program Program::translate(const jit::Graph& graph, const ValueShapes& shapes) {
  Program program;
  ArgsOf args_of;
  for (const jit::Value* input : graph.inputs()) {
    if (input->type()->kind() != c10::TypeKind::TensorType && !is_number_type(input->type())) {
      throw Untranslatable("graph input", c10::str("%", input->debugName(), " is a ", input->type()->str()));
    }
    args_of[input] = Arg{.slot = program.num_slots_++};
  }
  program.num_inputs_ = graph.inputs().size();
  for (const jit::Node* node : graph.nodes()) {
    if (node->kind() == c10::prim::Constant) {
      args_of[node->output()] = Arg{.constant = jit::toIValue(node->output())};
    } else if (node->kind() == c10::prim::ListConstruct) {
      args_of[node->output()] = list_arg(*node, args_of);
    } else if (is_implicit_conversion(node->kind())) {  // SymInt arguments: a constant 0-dim tensor read as a number
      args_of[node->output()] = Arg{.constant = implicit_constant(*node, args_of.at(node->input(0)))};
    } else if (node->kind().is_aten()) {
      program.steps_.push_back(program.aten_step(*node, args_of, shapes));
    } else if (std::any_of(node->outputs().begin(), node->outputs().end(), [](const jit::Value* v) { return v->hasUses(); })) {
      throw Untranslatable(node->kind().toQualString(), "lazyjit does not translate this node");
    }  // else the NamedTuple that multi-result builtins leave behind, read by nothing
  }
  for (const jit::Value* output : graph.outputs()) {
    auto it = args_of.find(output);
    if (it == args_of.end() || !it->second.slots.empty()) {
      throw Untranslatable("graph output", c10::str("%", output->debugName(), " is not a tensor lazyjit computes"));
    }
    program.outputs_.push_back(it->second);
  }
  return program;
}

Program::Step Program::aten_step(const jit::Node& node, ArgsOf& args_of, const ValueShapes& shapes) {
  const std::string op = node.kind().toQualString();
  const Lowering lowering = find_lowering(node.kind());
  if (!lowering) throw Untranslatable(op, "lazyjit has no translation of this op");
  if (!node.maybeSchema()) throw Untranslatable(op, "the node matches no schema");
  Step step{.node = &node, .lowering = lowering};
  for (const jit::Value* input : node.inputs()) {
    auto it = args_of.find(input);
    if (it == args_of.end()) throw Untranslatable(op, c10::str("reads %", input->debugName(), ", which lazyjit did not translate"));
    step.args.push_back(it->second);
  }
  if (node.kind() == c10::aten::bmm) {
    if (auto unmerged = unmerged_bmm_operands(node, args_of, shapes)) std::tie(step.args[0], step.args[1]) = *unmerged;
  }
  for (const jit::Value* output : node.outputs()) {
    if (output->type()->kind() != c10::TypeKind::TensorType) {
      throw Untranslatable(op, c10::str("gives a ", output->type()->str(), ", not a tensor"));
    }
    step.outputs.push_back(num_slots_);
    args_of[output] = Arg{.slot = num_slots_++};
    auto shape = shapes.find(output);
    std::optional<DType> dtype;
    if (shape != shapes.end() && !(dtype = to_dtype(shape->second.scalar_type()))) {
      throw Untranslatable(op, c10::str("gives ", shape->second.scalar_type(), ", a dtype lazyjit does not have"));
    }
    step.result_dtypes.push_back(dtype);
    step.result_sizes.push_back(shape == shapes.end() ? std::nullopt : std::optional(shape->second.sizes().vec()));
  }
  return step;
}

std::vector<Tensor> Program::run(std::vector<Tensor> inputs) const {
  TORCH_CHECK(inputs.size() == num_inputs_, "lazyjit: the program takes ", num_inputs_, " inputs, given ", inputs.size());
  std::vector<Tensor> slots(num_slots_);
  std::move(inputs.begin(), inputs.end(), slots.begin());
  for (const Step& step : steps_) {
    const Call call(*step.node, step.args, slots, step.result_dtypes, step.result_sizes);
    std::vector<Tensor> results = step.lowering(call);
    if (results.size() != step.outputs.size()) {
      call.unsupported(c10::str("lazyjit gives ", results.size(), " results, the node has ", step.outputs.size()));
    }
    for (size_t k = 0; k < results.size(); ++k) {
      Tensor& r = results[k];
      if (!r.defined()) call.unsupported(c10::str("result ", k, " is not computed"));
      if (step.result_dtypes[k] && r.dtype() != *step.result_dtypes[k]) r = r.to(*step.result_dtypes[k]);
      if (step.result_sizes[k] && r.shape() != *step.result_sizes[k]) {
        call.unsupported(c10::str("result ", k, " has sizes ", c10::IntArrayRef(r.shape()), " where PyTorch expects ",
                                  c10::IntArrayRef(*step.result_sizes[k])));
      }
      slots[step.outputs[k]] = std::move(r);
    }
  }
  std::vector<Tensor> outputs;
  outputs.reserve(outputs_.size());
  for (const Arg& output : outputs_) outputs.push_back(arg_tensor(output, slots, "graph output"));
  return outputs;
}

std::string Program::to_string() const {
  std::ostringstream os;
  os << "lazyjit program: " << num_inputs_ << " inputs (%0..%" << static_cast<int64_t>(num_inputs_) - 1 << ")\n";
  for (const Step& step : steps_) {
    for (size_t k = 0; k < step.outputs.size(); ++k) os << (k ? ", %" : "%") << step.outputs[k];
    os << " = " << step.node->kind().toQualString() << "(";
    for (size_t i = 0; i < step.args.size(); ++i) os << (i ? ", " : "") << arg_text(step.args[i]);
    os << ")\n";
  }
  os << "return (";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << arg_text(outputs_[i]);
  os << ")\n";
  return os.str();
}

}  // namespace lazyjit::ltc
