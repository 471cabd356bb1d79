// From PyTorch's lowered graph (a ::torch::jit::Graph of aten ops, as the TorchScript backend
// lowers each Lazy Tensor Core graph) to a Program that traces the same computation with
// lazyjit's public ops. The aten ops it knows are one table (aten_ops.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/lazy/core/shape.h>

#include "lazyjit/dtype.h"
#include "lazyjit/tensor.h"

namespace lazyjit::ltc {

/// A graph the translation cannot express (an aten op lazyjit lacks, an argument it cannot
/// take, a dtype it does not have): the graph runs on the TorchScript executor instead.
class Untranslatable : public std::runtime_error {
 public:
  Untranslatable(std::string op, const std::string& why) : std::runtime_error(op + ": " + why), op_(std::move(op)) {}
  /// The aten op that stopped the translation ("aten::foo"), for the fallback metrics.
  const std::string& op() const { return op_; }

 private:
  std::string op_;
};

/// PyTorch's scalar types that lazyjit has, and back.
std::optional<DType> to_dtype(c10::ScalarType type);
c10::ScalarType to_scalar_type(DType dtype);

/// What Lazy Tensor Core knows of each lowered value: its dtype and sizes.
using ValueShapes = std::unordered_map<const ::torch::jit::Value*, ::torch::lazy::Shape>;

struct Arg;
/// How the translation reads each value of the graph.
using ArgsOf = std::unordered_map<const ::torch::jit::Value*, Arg>;

/// One argument of an aten call: a constant, the value of an earlier step (a slot), or a
/// list of slots (Tensor[]).
struct Arg {
  std::optional<c10::IValue> constant = std::nullopt;
  int slot = -1;
  std::vector<int> slots = {};
  bool transposed = false;  ///< the slot's value with its last two dims swapped
};

class Call;
/// The lazyjit composition of one aten op: its results, one per output of the node.
using Lowering = std::vector<Tensor> (*)(const Call&);

/// The table's entry for `op` ("aten::add"), or null.
Lowering find_lowering(c10::Symbol op);

/// One aten call of a Program, bound to its arguments: what a Lowering reads. Arguments are
/// found by their schema names ("self", "dim"), so one Lowering serves every overload.
class Call {
 public:
  Call(const ::torch::jit::Node& node, const std::vector<Arg>& args, const std::vector<Tensor>& slots,
       const std::vector<std::optional<DType>>& result_dtypes,
       const std::vector<std::optional<std::vector<int64_t>>>& result_sizes)
      : node_(node), args_(args), slots_(slots), result_dtypes_(result_dtypes), result_sizes_(result_sizes) {}

  /// Whether the schema has an argument `name` (overloads differ) that is not None.
  bool has(std::string_view name) const;
  /// A tensor argument; a number (constant or a graph input) becomes a 0-dim tensor of
  /// float64, int64 or bool, as PyTorch wraps Python numbers.
  Tensor tensor(std::string_view name) const;
  /// A tensor argument that may be None (undefined Tensor then).
  Tensor optional_tensor(std::string_view name) const;
  std::vector<Tensor> tensors(std::string_view name) const;
  /// Constant arguments. A number that arrives as a graph input is Untranslatable here.
  int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const;
  Scalar scalar(std::string_view name) const;
  /// A number argument's value when it is a constant; nullopt when it arrives at run time
  /// (LTC passes many scalars, alpha and learning rates among them, as graph inputs).
  std::optional<double> constant_number(std::string_view name) const;
  std::string string(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name) const;
  std::vector<bool> bools(std::string_view name) const;
  /// A `ScalarType? dtype` argument: nullopt for None.
  std::optional<DType> dtype(std::string_view name) const;
  /// What LTC says output `i` is (its dtype), when known.
  std::optional<DType> result_dtype(size_t i = 0) const { return i < result_dtypes_.size() ? result_dtypes_[i] : std::nullopt; }
  /// What LTC says output `i`'s sizes are, when known.
  std::optional<std::vector<int64_t>> result_sizes(size_t i) const {
    return i < result_sizes_.size() ? result_sizes_[i] : std::nullopt;
  }
  /// Whether every reader of output `i` is an op of kind `reader` (none at all included): a
  /// result only a backward op reads, which may compute it another way.
  bool output_read_only_by(size_t i, std::string_view reader) const;
  /// The op's name, for messages ("aten::add").
  std::string op() const { return node_.kind().toQualString(); }
  [[noreturn]] void unsupported(const std::string& why) const;

 private:
  const Arg& arg(std::string_view name) const;
  const c10::IValue& constant(std::string_view name, const char* kind) const;

  const ::torch::jit::Node& node_;
  const std::vector<Arg>& args_;
  const std::vector<Tensor>& slots_;
  const std::vector<std::optional<DType>>& result_dtypes_;
  const std::vector<std::optional<std::vector<int64_t>>>& result_sizes_;
};

/// A lowered graph as a replayable sequence of lazyjit ops over slots. Replaying traces
/// lazyjit IR (nothing runs); lazyjit's structural cache makes a replay of a graph it has
/// compiled a cache hit, whatever the sizes.
class Program {
 public:
  /// Throws Untranslatable for a graph lazyjit cannot express.
  static Program translate(const ::torch::jit::Graph& graph, const ValueShapes& shapes);

  /// The graph's results for `inputs` (one tensor per graph input: numbers as 0-dim
  /// tensors). Throws Untranslatable when a result's sizes differ from what LTC expects.
  std::vector<Tensor> run(std::vector<Tensor> inputs) const;

  /// One line per step: "%5 = aten::addmm(%2, %3, %4, 1, 1)".
  std::string to_string() const;

 private:
  struct Step {
    const ::torch::jit::Node* node = nullptr;
    Lowering lowering = nullptr;
    std::vector<Arg> args = {};
    std::vector<int> outputs = {};                        // slots
    std::vector<std::optional<DType>> result_dtypes = {};  // from LTC's shapes
    std::vector<std::optional<std::vector<int64_t>>> result_sizes = {};
  };

  /// The step of one aten call: its table entry, arguments, and result slots with LTC's shapes.
  Step aten_step(const ::torch::jit::Node& node, ArgsOf& args_of, const ValueShapes& shapes);

  size_t num_inputs_ = 0;
  int num_slots_ = 0;
  std::vector<Step> steps_;
  std::vector<Arg> outputs_;
};

}  // namespace lazyjit::ltc
