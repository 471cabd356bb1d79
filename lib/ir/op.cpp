// The op table expanded into an array of OpInfo.
#include "ir/op.h"

#include <array>

namespace lazyjit::ir {
namespace {

constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define LAZYJIT_OP(Name, text, arity, rule, admits, access) \
  {text, arity, DTypeRule::rule, Admits::admits, AccessPattern::access},
#include "ir/ops.def"
}};

}  // namespace

const OpInfo& op_info(OpKind op) { return kOpTable[static_cast<size_t>(op)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (size_t i = 0; i < kOpTable.size(); ++i) {
    if (kOpTable[i].name == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

bool admits_dtype(Admits admits, DType dtype) {
  switch (admits) {
    case Admits::All: return true;
    case Admits::Numeric: return dtype != DType::Bool;
    case Admits::Floating: return is_floating(dtype);
    case Admits::Bool: return dtype == DType::Bool;
  }
  return false;
}

}  // namespace lazyjit::ir
