// The op table expanded into an array of OpInfo.
#include "ir/op.h"

#include <algorithm>
#include <array>

namespace lazyjit::ir {
namespace {

constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define LAZYJIT_OP(Name, text, arity, rule, admits, access) \
  {text, arity, DTypeRule::rule, Admits::admits, AccessPattern::access},
#include "ir/ops.def"
}};

constexpr std::array<std::optional<FoldInfo>, kNumOps> kFoldTable = [] {
  std::array<std::optional<FoldInfo>, kNumOps> table{};
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_FOLD(Name, combine, start) table[static_cast<size_t>(OpKind::Name)] = FoldInfo{OpKind::combine, FoldStart::start};
#include "ir/ops.def"
  return table;
}();

constexpr std::array<std::optional<FoldInfo>, kNumOps> kScanTable = [] {
  std::array<std::optional<FoldInfo>, kNumOps> table{};
#define LAZYJIT_OP(Name, text, arity, rule, admits, access)
#define LAZYJIT_SCAN(Name, combine, start) table[static_cast<size_t>(OpKind::Name)] = FoldInfo{OpKind::combine, FoldStart::start};
#include "ir/ops.def"
  return table;
}();

}  // namespace

std::optional<FoldInfo> fold_info(OpKind op) { return kFoldTable[static_cast<size_t>(op)]; }

std::optional<FoldInfo> scan_info(OpKind op) { return kScanTable[static_cast<size_t>(op)]; }

bool is_fold_combine(OpKind op) {
  return std::any_of(kFoldTable.begin(), kFoldTable.end(), [&](const auto& f) { return f && f->combine == op; });
}

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
    case Admits::Integral: return !is_floating(dtype);
  }
  return false;
}

}  // namespace lazyjit::ir
