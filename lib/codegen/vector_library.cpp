// libmvec mappings beyond LLVM 19's table.
#include "codegen/vector_library.h"

#include <deque>
#include <string>
#include <vector>

namespace lazyjit::codegen {
namespace {

struct MathFunction {
  const char* name;       // libm double name; the float name appends 'f'
  const char* intrinsic;  // llvm.<intrinsic>.f32/f64, or nullptr
  const char* params;     // "v" unary, "vv" binary
  bool in_llvm_table;     // LLVM 19 already maps its SSE and AVX2 variants
};

constexpr MathFunction kFunctions[] = {
    {"exp", "exp", "v", true},  {"log", "log", "v", true},  {"sin", "sin", "v", true},
    {"cos", "cos", "v", true},  {"pow", "pow", "vv", true}, {"tanh", nullptr, "v", false},
    {"erf", nullptr, "v", false},  {"log1p", nullptr, "v", false}, {"expm1", nullptr, "v", false},
};

struct Isa {
  char letter;  // x86 vector function ABI: b = SSE, d = AVX2, e = AVX-512
  int float_lanes;
};
constexpr Isa kIsas[] = {{'b', 4}, {'d', 8}, {'e', 16}};

struct Mapping {
  llvm::VecDesc desc;
  bool avx512;
  bool in_llvm_table;
};

/// Every mapping, built once. VecDesc holds StringRefs, so the strings live here too.
struct Table {
  std::deque<std::string> strings;
  std::vector<Mapping> mappings;

  llvm::StringRef keep(std::string s) { return strings.emplace_back(std::move(s)); }

  Table() {
    for (const MathFunction& f : kFunctions) {
      for (const Isa& isa : kIsas) {
        for (bool single : {true, false}) {
          const int lanes = single ? isa.float_lanes : isa.float_lanes / 2;
          const std::string suffix = single ? "f" : "";
          const llvm::StringRef vector_name = keep(std::string("_ZGV") + isa.letter + "N" + std::to_string(lanes) +
                                                   f.params + "_" + f.name + suffix);
          const llvm::StringRef prefix = keep("_ZGV_LLVM_N" + std::to_string(lanes) + f.params);
          std::vector<std::string> scalars = {f.name + suffix};
          if (f.intrinsic) scalars.push_back(std::string("llvm.") + f.intrinsic + (single ? ".f32" : ".f64"));
          for (std::string& scalar : scalars) {
            mappings.push_back({llvm::VecDesc(keep(std::move(scalar)), vector_name,
                                              llvm::ElementCount::getFixed(lanes), false, prefix),
                                isa.letter == 'e', f.in_llvm_table});
          }
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<llvm::TargetLibraryInfoImpl> make_vector_library_info(const llvm::Triple& triple, bool avx512) {
  static const Table& table = *new Table;  // never destroyed: a background compile may run during exit
  auto info = std::make_unique<llvm::TargetLibraryInfoImpl>(triple);
  info->addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
  std::vector<llvm::VecDesc> chosen;
  for (const Mapping& m : table.mappings) {
    // AVX-512 variants only where the CPU has it; SSE/AVX2 ones only where LLVM lacks them.
    if (m.avx512 ? avx512 : !m.in_llvm_table) chosen.push_back(m.desc);
  }
  info->addVectorizableFunctions(chosen);
  return info;
}

}  // namespace lazyjit::codegen
