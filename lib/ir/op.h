// OpKind and the per-op facts of the op table (ops.def).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "lazyjit/dtype.h"

namespace lazyjit::ir {

enum class OpKind : uint8_t {
#define LAZYJIT_OP(Name, text, arity, rule, admits, kind) Name,
#include "ir/ops.def"
};

/// How an op's result dtype follows from its operands (operands are already promoted).
enum class DTypeRule : uint8_t {
  Leaf,     // set by the leaf itself
  Same,     // the operands' dtype
  Compare,  // Bool
  Cast,     // the target dtype of the cast
  Select,   // the dtype of operands 1 and 2 (operand 0 is the Bool condition)
  Sum,      // Int64 for bool and integer operands, else the operand's dtype
  Index,    // Int64
  First,    // the first operand's dtype; the others are indices (int32 or int64)
};

/// Which operand dtypes an op accepts once promoted.
enum class Admits : uint8_t {
  All,       // bool, integers and floats
  Numeric,   // integers and floats
  Floating,  // floats; the builder promotes integer and bool operands to float32
  Bool,      // bool; the builder converts other operands with != 0
  Integral,  // integers and bool; float operands are an error
};

/// How an op reads its operands: what the planner, the kernel builders, launch geometry and
/// donation safety derive from the table (DESIGN.md section 7).
enum class AccessPattern : uint8_t {
  Leaf,         ///< reads nothing: a graph input
  Elementwise,  ///< each operand at the element it computes
  IndexMap,     ///< its operands at elements an index map names (a view: index arithmetic
                ///< in the consumer's loop, no data moved)
  Fold,         ///< every element of the folded dims, combined in a fixed order
  Matmul,       ///< the packed, register-blocked micro-kernel (a special kernel)
  Scan,         ///< a running combine along one dim: element i of its prefix there
  Scatter,      ///< its first operand, with the third written at indices the second holds
  Collective,   ///< its operand combined across the processes of a job (ir/collectives.h)
};

struct OpInfo {
  std::string_view name;
  int arity;  ///< -1: variadic (cat)
  DTypeRule dtype_rule;
  Admits admits;
  AccessPattern access;
};

inline constexpr int kNumOps = 0
#define LAZYJIT_OP(Name, text, arity, rule, admits, kind) +1
#include "ir/ops.def"
    ;

/// The table row of `op`.
const OpInfo& op_info(OpKind op);
/// Whether `op` reads indices from its operands' data: its kernels check each index at run
/// time (GraphValues::checked_index).
inline bool indexes_by_data(OpKind op) {
  return op == OpKind::IndexSelect || op == OpKind::Gather || op == OpKind::OneHot || op == OpKind::Scatter ||
         op == OpKind::IndexScatter;
}
/// Whether `op` divides by its second operand: on integers its kernels check the divisor (a
/// division by zero fails the run).
inline bool divides(OpKind op) { return op == OpKind::FloorDivide || op == OpKind::Remainder; }
inline std::string_view op_name(OpKind op) { return op_info(op).name; }
/// The op whose text name is `name`, if any.
std::optional<OpKind> op_from_name(std::string_view name);

/// Where a fold starts: its combine's identity in the dtype.
enum class FoldStart : uint8_t {
  Zero,     ///< 0 (false)
  One,      ///< 1 (true)
  Lowest,   ///< -inf, the integer minimum, false: below every value
  Highest,  ///< +inf, the integer maximum, true: above every value
};

/// How a fold combines its elements (the LAZYJIT_FOLD line of its row).
struct FoldInfo {
  OpKind combine;   ///< an elementwise op of the result dtype, accumulator first
  FoldStart start;
};
/// The fold rule of `op`, or none for an op that is not a fold or folds by a rule of its own
/// (argmax).
std::optional<FoldInfo> fold_info(OpKind op);
/// The scan rule of `op` (its LAZYJIT_SCAN line), or none for an op that is not a scan.
std::optional<FoldInfo> scan_info(OpKind op);
/// Whether some fold combines with `op` (a kernel IR fold may).
bool is_fold_combine(OpKind op);

/// Whether `admits` accepts operands of `dtype`.
bool admits_dtype(Admits admits, DType dtype);

/// Whether `op` on floats calls a math function (libm's or libmvec's; the GPU's portable math).
constexpr bool calls_math(OpKind op) {
  switch (op) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Sin: case OpKind::Cos: case OpKind::Tanh:
    case OpKind::Erf: case OpKind::Pow: case OpKind::Sigmoid: case OpKind::Gelu: case OpKind::Log1p:
    case OpKind::Expm1: return true;
    default: return false;
  }
}

}  // namespace lazyjit::ir
