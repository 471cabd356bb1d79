// Math functions written as LLVM IR of our own, for a target with no libm (NVPTX): exp, log,
// pow, sin, cos, tanh, erf, expm1, log1p and fmod. Each is range reduction and a polynomial
// (or, for erf's tail, a continued fraction) in double; a float call evaluates the double
// function and rounds. docs/semantics.md states their error bounds; codegen_test measures them
// against glibc on the CPU, where the same IR runs.
#pragma once

#include <string_view>
#include <vector>

#include "llvm/IR/Module.h"

namespace lazyjit::codegen {

/// Replaces, in every function of `module`, each call of a math function a target without
/// libm cannot lower (llvm.exp, llvm.log, llvm.pow, llvm.sin, llvm.cos, and libm's tanh, erf,
/// expm1, log1p, in float or double, scalar) and each frem with a call of the portable
/// function, defined in the module (internal, always inlined).
void use_portable_math(llvm::Module& module);

/// The functions use_portable_math provides, by their libm name.
const std::vector<std::string_view>& portable_math_functions();

}  // namespace lazyjit::codegen
