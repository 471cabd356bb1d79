// The lean optimisation pipeline and machine code: JitCompiler's passes over one kernel's
// module (jit_compiler.cpp sets the JIT up, caches and loads what these produce).
#include "codegen/jit_compiler.h"
#include "codegen/vector_library.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/IndVarSimplify.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopDeletion.h"
#include "llvm/Transforms/Scalar/LoopInstSimplify.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Scalar/LoopRotation.h"
#include "llvm/Transforms/Scalar/SROA.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Transforms/Utils/InjectTLIMappings.h"
#include "llvm/Transforms/Vectorize/LoopVectorize.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace lazyjit::codegen {

void JitCompiler::prepare(llvm::Module& module, llvm::TargetMachine& target) const {
  module.setTargetTriple(target.getTargetTriple().str());
  module.setDataLayout(target.createDataLayout());
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", target.getTargetCPU());
    fn.addFnAttr("target-features", target.getTargetFeatureString());
    // Zen 4/5 and recent Intel cores run 512-bit vectors at full width for this kind of
    // loop; LLVM's tuning for some of them prefers 256.
    if (avx512_) fn.addFnAttr("prefer-vector-width", "512");
  }
}

void JitCompiler::optimize_with(llvm::Module& module, llvm::TargetMachine& target) const {
  prepare(module, target);
  llvm::PassBuilder passes(&target);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  auto library = make_vector_library_info(target.getTargetTriple(), avx512_);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(*library); });
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  // The lean pipeline (docs/benchmarks.md): what a kernel of counted loops needs to vectorise
  // (accumulators to registers, invariants out of loops, rotated loops, libmvec calls) and
  // nothing a kernel never has (calls to inline, globals, exceptions). A third of O2's time,
  // the same steady-state speed.
  llvm::FunctionPassManager fpm;
  fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
  fpm.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
  fpm.addPass(llvm::InstCombinePass());
  fpm.addPass(llvm::SimplifyCFGPass());
  {
    llvm::LoopPassManager loops;
    loops.addPass(llvm::LoopInstSimplifyPass());
    loops.addPass(llvm::LoopRotatePass());
    loops.addPass(llvm::LICMPass(llvm::LICMOptions()));
    fpm.addPass(llvm::createFunctionToLoopPassAdaptor(std::move(loops), /*UseMemorySSA=*/true));
  }
  {
    llvm::LoopPassManager loops;
    loops.addPass(llvm::IndVarSimplifyPass());
    loops.addPass(llvm::LoopDeletionPass());
    fpm.addPass(llvm::createFunctionToLoopPassAdaptor(std::move(loops)));
  }
  fpm.addPass(llvm::InjectTLIMappings());  // libmvec variants of math calls, for the vectoriser
  fpm.addPass(llvm::LoopVectorizePass());
  fpm.addPass(llvm::EarlyCSEPass());
  fpm.addPass(llvm::InstCombinePass());
  fpm.addPass(llvm::SimplifyCFGPass(llvm::SimplifyCFGOptions().hoistCommonInsts(true)));
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  mpm.run(module, mam);
}

absl::StatusOr<std::string> JitCompiler::emit_with(llvm::Module& module, llvm::TargetMachine& target,
                                                   llvm::CodeGenFileType type) const {
  prepare(module, target);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (target.addPassesToEmitFile(pm, os, nullptr, type)) {
    return absl::InternalError("the target cannot emit this file type");
  }
  pm.run(module);
  return std::string(text.str());
}

}  // namespace lazyjit::codegen
