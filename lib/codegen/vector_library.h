// The vector math library: glibc's libmvec, including the AVX-512 variants LLVM 19 lacks.
#pragma once

#include <memory>

#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/TargetParser/Triple.h"

namespace lazyjit::codegen {

/// Target library info that maps scalar math (llvm.exp.*, tanhf, erff, ...) to libmvec's
/// vector functions, so loops calling them vectorise. LLVM 19's LIBMVEC_X86 table has the
/// SSE and AVX2 variants of a few functions; this adds tanh and erf, and the 16-wide float /
/// 8-wide double AVX-512 variants of all of them when `avx512` is set.
std::unique_ptr<llvm::TargetLibraryInfoImpl> make_vector_library_info(const llvm::Triple& triple, bool avx512);

/// The shared object that holds the vector functions, loaded into the JIT's symbol search.
inline constexpr const char* kVectorLibraryPath = "libmvec.so.1";

}  // namespace lazyjit::codegen
