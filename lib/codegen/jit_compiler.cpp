// LLJIT setup, the optimisation pipeline and loading compiled kernels.
#include "codegen/jit_compiler.h"

#include "codegen/vector_library.h"
#include "fmt/format.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace lazyjit::codegen {
namespace {

/// Bump when generated code changes for the same graph (lowering, ABI, runtime contract):
/// it is part of every cache key, so on-disk objects from older builds are not loaded.
inline constexpr uint64_t kKernelAbiVersion = 3;
inline constexpr const char* kOptLevelName = "O2";

absl::Status to_status(llvm::Error error, std::string_view context) {
  return absl::InternalError(fmt::format("{}: {}", context, llvm::toString(std::move(error))));
}

}  // namespace

CompiledGraph::CompiledGraph(lowering::KernelPlan plan, std::vector<lowering::KernelFn> functions,
                             llvm::orc::ExecutionSession* session, llvm::orc::JITDylib* dylib,
                             std::atomic<int64_t>* loaded)
    : plan_(std::move(plan)), functions_(std::move(functions)), session_(session), dylib_(dylib),
      loaded_(loaded) {
  if (loaded_ != nullptr) loaded_->fetch_add(1);
}

CompiledGraph::~CompiledGraph() {
  if (session_ != nullptr && dylib_ != nullptr) llvm::consumeError(session_->removeJITDylib(*dylib_));
  if (loaded_ != nullptr) loaded_->fetch_sub(1);
}

JitCompiler::~JitCompiler() = default;

absl::StatusOr<std::unique_ptr<JitCompiler>> JitCompiler::create() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  std::unique_ptr<JitCompiler> compiler(new JitCompiler);

  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) return to_status(builder.takeError(), "detecting the host CPU");
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  auto tm = builder->createTargetMachine();
  if (!tm) return to_status(tm.takeError(), "creating the target machine");
  compiler->target_machine_ = std::move(*tm);
  compiler->avx512_ = compiler->target_machine_->getTargetFeatureString().contains("+avx512f");

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*builder).create();
  if (!jit) return to_status(jit.takeError(), "creating the JIT");
  compiler->jit_ = std::move(*jit);
  JitCompiler* self = compiler.get();
  compiler->jit_->getExecutionSession().setErrorReporter([self](llvm::Error error) {
    std::lock_guard lock(self->errors_mutex_);
    self->session_errors_ += llvm::toString(std::move(error)) + "\n";
  });
  const char prefix = compiler->jit_->getDataLayout().getGlobalPrefix();
  auto& dylib = compiler->jit_->getMainJITDylib();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process) return to_status(process.takeError(), "searching the process for symbols");
  dylib.addGenerator(std::move(*process));
  auto mvec = llvm::orc::DynamicLibrarySearchGenerator::Load(kVectorLibraryPath, prefix);
  if (!mvec) return to_status(mvec.takeError(), fmt::format("loading {}", kVectorLibraryPath));
  dylib.addGenerator(std::move(*mvec));

  const llvm::TargetMachine& target = *compiler->target_machine_;
  compiler->description_ = fmt::format("{} {} {} (LLVM {})", target.getTargetTriple().str(),
                                       target.getTargetCPU().str(), kOptLevelName, LLVM_VERSION_STRING);
  const std::string identity = fmt::format("{};{};{};{};abi{}", LLVM_VERSION_STRING, target.getTargetCPU().str(),
                                           target.getTargetFeatureString().str(), kOptLevelName, kKernelAbiVersion);
  const llvm::XXH128_hash_t h = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(identity.data()), identity.size()));
  compiler->fingerprint_ = {h.low64, h.high64};
  return compiler;
}

void JitCompiler::prepare(llvm::Module& module) {
  module.setTargetTriple(target_machine_->getTargetTriple().str());
  module.setDataLayout(target_machine_->createDataLayout());
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", target_machine_->getTargetCPU());
    fn.addFnAttr("target-features", target_machine_->getTargetFeatureString());
    // Zen 4/5 and recent Intel cores run 512-bit vectors at full width for this kind of
    // loop; LLVM's tuning for some of them prefers 256.
    if (avx512_) fn.addFnAttr("prefer-vector-width", "512");
  }
}

void JitCompiler::optimize(llvm::Module& module) {
  std::lock_guard lock(mutex_);
  prepare(module);
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder passes(target_machine_.get(), tuning);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  auto library = make_vector_library_info(target_machine_->getTargetTriple(), avx512_);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(*library); });
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

absl::StatusOr<std::string> JitCompiler::assembly(llvm::Module& module) {
  return emit(module, llvm::CodeGenFileType::AssemblyFile);
}

absl::StatusOr<std::string> JitCompiler::emit(llvm::Module& module, llvm::CodeGenFileType type) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);  // codegen changes the module
  std::lock_guard lock(mutex_);
  prepare(*copy);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (target_machine_->addPassesToEmitFile(pm, os, nullptr, type)) {
    return absl::InternalError("the target cannot emit this file type");
  }
  pm.run(*copy);
  return std::string(text.str());
}

std::string JitCompiler::take_session_errors() {
  std::lock_guard lock(errors_mutex_);
  return std::exchange(session_errors_, std::string());
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::compile(lowering::LoweredGraph lowered,
                                                                          Artifacts* artifacts) {
  std::string verifier_errors;
  llvm::raw_string_ostream verifier_os(verifier_errors);
  if (llvm::verifyModule(*lowered.module, &verifier_os)) {
    return absl::InternalError(fmt::format("generated LLVM IR is invalid: {}", verifier_errors));
  }
  optimize(*lowered.module);
  if (artifacts != nullptr && artifacts->with_text) {
    llvm::raw_string_ostream os(artifacts->optimized_ir);
    lowered.module->print(os, nullptr);
    absl::StatusOr<std::string> assembly = this->assembly(*lowered.module);
    artifacts->assembly = assembly.ok() ? *std::move(assembly) : std::string(assembly.status().message());
  }

  for (const lowering::KernelSpec& kernel : lowered.plan.kernels) {
    const llvm::Function* fn = lowered.module->getFunction(kernel.symbol);
    if (fn == nullptr || fn->isDeclaration()) {
      return absl::InternalError(fmt::format("compiling {}: the module does not define it", kernel.symbol));
    }
  }
  absl::StatusOr<std::string> object = emit(*lowered.module, llvm::CodeGenFileType::ObjectFile);
  if (!object.ok()) return object.status();
  if (artifacts != nullptr) artifacts->object = *object;
  return load(std::move(lowered.plan), *object);
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::load(lowering::KernelPlan plan,
                                                                       std::string_view object) {
  std::lock_guard lock(mutex_);
  // Each graph gets a JITDylib of its own: its symbols cannot clash with another graph's
  // (or with an evicted copy of itself still running), and removing it frees its code.
  auto dylib = jit_->createJITDylib(fmt::format("lazyjit.graph.{}", ++loads_));
  if (!dylib) return to_status(dylib.takeError(), "creating a JITDylib");
  dylib->addToLinkOrder(jit_->getMainJITDylib());  // libm, libmvec and the process
  auto release = [&](llvm::orc::JITDylib& jd) { llvm::consumeError(jit_->getExecutionSession().removeJITDylib(jd)); };
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), "lazyjit-kernels");
  if (llvm::Error error = jit_->addObjectFile(*dylib, std::move(buffer))) {
    release(*dylib);
    return to_status(std::move(error), "loading the compiled object");
  }
  std::vector<lowering::KernelFn> functions;
  for (const lowering::KernelSpec& kernel : plan.kernels) {
    auto address = jit_->lookup(*dylib, kernel.symbol);
    if (!address) {
      absl::Status status = to_status(address.takeError(), fmt::format("compiling {}", kernel.symbol));
      const std::string details = take_session_errors();
      release(*dylib);
      return absl::InternalError(fmt::format("{}{}{}", std::string(status.message()), details.empty() ? "" : "\n", details));
    }
    functions.push_back(address->toPtr<lowering::KernelFn>());
  }
  return std::make_shared<const CompiledGraph>(std::move(plan), std::move(functions), &jit_->getExecutionSession(),
                                               &*dylib, &loaded_);
}

}  // namespace lazyjit::codegen
