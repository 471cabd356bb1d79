// Kernel IR to PTX: the shared body emitter (kir_llvm.h) for a GPU thread, a `ptx_kernel`
// entry whose threads stride over the parallel loop, the portable math for what NVPTX has no
// instruction for, LLVM's O2 and the NVPTX backend.
#include "codegen/kir_nvptx.h"

#include <algorithm>
#include <mutex>

#include "codegen/kir_llvm.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"

namespace lazyjit::codegen {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> nvptx_target(const GpuArch& arch) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (target == nullptr) return absl::UnavailableError("LLVM has no NVPTX target: " + error);
  // LLVM warns of an unknown CPU or feature and goes on; here they are errors.
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(kTriple, "", ""));
  if (!info->isCPUStringValid(arch.sm)) return absl::InvalidArgumentError("LLVM's NVPTX target does not know " + arch.sm);
  const auto& features = info->getAllProcessorFeatures();
  if (std::none_of(features.begin(), features.end(), [&](const llvm::SubtargetFeatureKV& f) { return arch.ptx == f.Key; })) {
    return absl::InvalidArgumentError("LLVM's NVPTX target does not know the PTX version " + arch.ptx);
  }
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      kTriple, arch.sm, "+" + arch.ptx, llvm::TargetOptions(), std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Default));
  if (machine == nullptr) return absl::InvalidArgumentError("LLVM cannot target " + arch.sm + " with " + arch.ptx);
  return machine;
}

/// The entry (kPtxAbiVersion): a grid-stride loop over the iterations, each a call of the body.
void emit_entry(const kir::Kernel& kernel, const std::string& symbol, llvm::Function* body, llvm::Module& module) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::IRBuilder<> b(ctx);
  auto* global = b.getPtrTy(1);
  auto* i64 = b.getInt64Ty();
  const unsigned pointers = frame_pointers(kernel);
  std::vector<llvm::Type*> params(pointers + 1, global);  // the buffers, the scalar frame, the dims
  params.push_back(i64);                                  // the iteration count
  params.push_back(global);                               // the status word
  auto* entry = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), params, false),
                                       llvm::Function::ExternalLinkage, symbol, module);
  entry->setCallingConv(llvm::CallingConv::PTX_Kernel);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* count = entry->getArg(pointers + 1);
  llvm::Value* status = entry->getArg(pointers + 2);
  count->setName("count");
  status->setName("status");

  auto* start = llvm::BasicBlock::Create(ctx, "entry", entry);
  auto* loop = llvm::BasicBlock::Create(ctx, "iteration", entry);
  auto* run = llvm::BasicBlock::Create(ctx, "run", entry);
  auto* fail = llvm::BasicBlock::Create(ctx, "fail", entry);
  auto* next = llvm::BasicBlock::Create(ctx, "next", entry);
  auto* done = llvm::BasicBlock::Create(ctx, "done", entry);
  b.SetInsertPoint(start);
  auto special = [&](llvm::Intrinsic::ID id) { return b.CreateZExt(b.CreateIntrinsic(id, {}, {}), i64); };
  llvm::Value* thread = special(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  llvm::Value* threads = special(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  llvm::Value* block = special(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
  llvm::Value* blocks = special(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x);
  llvm::Value* first = b.CreateAdd(b.CreateMul(block, threads), thread);
  llvm::Value* stride = b.CreateMul(blocks, threads);
  std::vector<llvm::Value*> args;
  for (unsigned k = 0; k <= pointers; ++k) args.push_back(b.CreateAddrSpaceCast(entry->getArg(k), b.getPtrTy()));
  b.CreateBr(loop);

  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(first, start);
  b.CreateCondBr(b.CreateICmpSLT(i, count), run, done);

  b.SetInsertPoint(run);
  args.push_back(i);
  args.push_back(b.CreateAdd(i, b.getInt64(1)));
  llvm::Value* code = b.CreateCall(body, args);
  b.CreateCondBr(b.CreateICmpNE(code, b.getInt32(0)), fail, next);

  b.SetInsertPoint(fail);  // the first failing check's code stays
  b.CreateAtomicCmpXchg(status, b.getInt32(0), code, llvm::MaybeAlign(4), llvm::AtomicOrdering::Monotonic,
                        llvm::AtomicOrdering::Monotonic);
  b.CreateRetVoid();

  b.SetInsertPoint(next);
  i->addIncoming(b.CreateAdd(i, stride), next);
  b.CreateBr(loop);

  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

void optimize(llvm::Module& module, llvm::TargetMachine& target) {
  llvm::PassBuilder passes(&target);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

/// The kernel's PTX from `machine`, an NVPTX target.
absl::StatusOr<std::string> compile_with(const lowering::LoweredKernel& kernel, llvm::TargetMachine& machine) {
  const std::string symbol = "lj_" + kernel.content.to_hex();
  llvm::LLVMContext ctx;
  llvm::Module module(symbol, ctx);
  module.setTargetTriple(kTriple);
  module.setDataLayout(machine.createDataLayout());
  llvm::Function* body = emit_body(kernel.kir, symbol, module, EmitTarget::Gpu);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  emit_entry(kernel.kir, symbol, body, module);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(module, &os)) return absl::InternalError("the PTX kernel's LLVM IR is invalid: " + problems);
  optimize(module, machine);

  llvm::SmallString<0> text;
  llvm::raw_svector_ostream out(text);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    return absl::InternalError("the NVPTX target cannot emit assembly");
  }
  pm.run(module);
  return std::string(text.str());
}

}  // namespace

absl::StatusOr<std::string> compile_ptx(const lowering::LoweredKernel& kernel, const GpuArch& arch) {
  absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> target = nvptx_target(arch);
  if (!target.ok()) return target.status();
  return compile_with(kernel, **target);
}

absl::StatusOr<std::string> ptx_text(const lowering::LoweredGraph& lowered, const GpuArch& arch) {
  absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> target = nvptx_target(arch);
  if (!target.ok()) return target.status();
  std::string text;
  for (const lowering::LoweredKernel& kernel : lowered.kernels) {
    absl::StatusOr<std::string> ptx = compile_with(kernel, **target);
    if (!ptx.ok()) return ptx.status();
    text += *ptx;
  }
  return text;
}

}  // namespace lazyjit::codegen
