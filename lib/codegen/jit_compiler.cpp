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
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace lazyjit::codegen {
namespace {

/// Bump when generated code changes for the same graph (lowering, ABI, runtime contract):
/// it is part of every cache key, so on-disk objects from older builds are not loaded.
inline constexpr uint64_t kKernelAbiVersion = 5;
inline constexpr const char* kOptLevelName = "O2";

absl::Status to_status(llvm::Error error, std::string_view context) {
  return absl::InternalError(fmt::format("{}: {}", context, llvm::toString(std::move(error))));
}

// A graph's code is a bundle of objects, one per partition of its kernels (they compile in
// parallel): "ljobjs1" and a NUL, a 32-bit count, then per object a 64-bit size and its bytes.
inline constexpr char kBundleMagic[8] = {'l', 'j', 'o', 'b', 'j', 's', '1', '\0'};

std::string pack_objects(const std::vector<std::string>& objects) {
  std::string blob(kBundleMagic, sizeof(kBundleMagic));
  const auto count = static_cast<uint32_t>(objects.size());
  blob.append(reinterpret_cast<const char*>(&count), sizeof(count));
  for (const std::string& object : objects) {
    const uint64_t size = object.size();
    blob.append(reinterpret_cast<const char*>(&size), sizeof(size));
    blob += object;
  }
  return blob;
}

absl::StatusOr<std::vector<std::string_view>> unpack_objects(std::string_view blob) {
  auto bad = [] { return absl::InvalidArgumentError("not a lazyjit object bundle"); };
  if (blob.size() < sizeof(kBundleMagic) + 4 || std::memcmp(blob.data(), kBundleMagic, sizeof(kBundleMagic)) != 0) {
    return bad();
  }
  blob.remove_prefix(sizeof(kBundleMagic));
  uint32_t count = 0;
  std::memcpy(&count, blob.data(), sizeof(count));
  blob.remove_prefix(sizeof(count));
  std::vector<std::string_view> objects;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t size = 0;
    if (blob.size() < sizeof(size)) return bad();
    std::memcpy(&size, blob.data(), sizeof(size));
    blob.remove_prefix(sizeof(size));
    if (blob.size() < size) return bad();
    objects.push_back(blob.substr(0, size));
    blob.remove_prefix(size);
  }
  if (!blob.empty()) return bad();
  return objects;
}

/// The module's kernels in `parts` groups, each a module of its own (as bitcode, so each can
/// be read into its own LLVMContext and compiled on its own thread). A group holds its
/// kernels' entry and body functions and every internal helper; other kernels' functions
/// become declarations.
std::vector<llvm::SmallVector<char, 0>> split_by_kernel(const llvm::Module& module,
                                                       const std::vector<lowering::KernelSpec>& kernels, size_t parts) {
  std::vector<llvm::SmallVector<char, 0>> bitcode(parts);
  for (size_t part = 0; part < parts; ++part) {
    std::vector<std::string> mine;
    for (size_t k = part; k < kernels.size(); k += parts) mine.push_back(kernels[k].symbol);
    auto is_kernel_function = [&](llvm::StringRef name) {
      return std::any_of(kernels.begin(), kernels.end(), [&](const lowering::KernelSpec& kernel) {
        return name == kernel.symbol || name == kernel.symbol + ".body";
      });
    };
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> piece = llvm::CloneModule(module, map, [&](const llvm::GlobalValue* value) {
      const llvm::StringRef name = value->getName();
      if (!is_kernel_function(name)) return true;
      return std::any_of(mine.begin(), mine.end(), [&](const std::string& symbol) {
        return name == symbol || name == symbol + ".body";
      });
    });
    llvm::raw_svector_ostream os(bitcode[part]);
    llvm::WriteBitcodeToFile(*piece, os);
  }
  return bitcode;
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
  compiler->tm_builder_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(*builder);
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

void JitCompiler::optimize(llvm::Module& module) {
  std::lock_guard lock(mutex_);
  optimize_with(module, *target_machine_);
}

void JitCompiler::optimize_with(llvm::Module& module, llvm::TargetMachine& target) const {
  prepare(module, target);
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder passes(&target, tuning);
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
  passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, mam);
}

absl::StatusOr<std::string> JitCompiler::assembly(llvm::Module& module) {
  return emit(module, llvm::CodeGenFileType::AssemblyFile);
}

absl::StatusOr<std::string> JitCompiler::emit(llvm::Module& module, llvm::CodeGenFileType type) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);  // codegen changes the module
  std::lock_guard lock(mutex_);
  return emit_with(*copy, *target_machine_, type);
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
  for (const lowering::KernelSpec& kernel : lowered.plan.kernels) {
    const llvm::Function* fn = lowered.module->getFunction(kernel.symbol);
    if (fn == nullptr || fn->isDeclaration()) {
      return absl::InternalError(fmt::format("compiling {}: the module does not define it", kernel.symbol));
    }
  }
  const bool with_text = artifacts != nullptr && artifacts->with_text;
  std::vector<std::string> objects;
  if (lowered.plan.kernels.size() <= 1) {  // one kernel: no split, no threads
    optimize(*lowered.module);
    if (with_text) {
      llvm::raw_string_ostream os(artifacts->optimized_ir);
      lowered.module->print(os, nullptr);
      absl::StatusOr<std::string> assembly = this->assembly(*lowered.module);
      artifacts->assembly = assembly.ok() ? *std::move(assembly) : std::string(assembly.status().message());
    }
    absl::StatusOr<std::string> object = emit(*lowered.module, llvm::CodeGenFileType::ObjectFile);
    if (!object.ok()) return object.status();
    objects.push_back(*std::move(object));
  } else {
    absl::Status status = compile_parts(*lowered.module, lowered.plan.kernels, objects, with_text ? artifacts : nullptr);
    if (!status.ok()) return status;
  }
  std::string bundle = pack_objects(objects);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = load(std::move(lowered.plan), bundle);
  if (artifacts != nullptr) artifacts->object = std::move(bundle);
  return code;
}

absl::Status JitCompiler::compile_parts(const llvm::Module& module, const std::vector<lowering::KernelSpec>& kernels,
                                        std::vector<std::string>& objects, Artifacts* text) {
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::min(kernels.size(), threads);
  const std::vector<llvm::SmallVector<char, 0>> bitcode = split_by_kernel(module, kernels, parts);
  struct Part {
    absl::Status status;
    std::string object, optimized_ir, assembly;
  };
  std::vector<Part> results(parts);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    auto target = tm_builder_->createTargetMachine();  // one per thread: they are not shareable
    for (size_t p = next++; p < parts; p = next++) {
      Part& out = results[p];
      if (!target) {
        out.status = absl::InternalError("creating a target machine");
        continue;
      }
      llvm::LLVMContext context;
      auto parsed = llvm::parseBitcodeFile(llvm::MemoryBufferRef(llvm::StringRef(bitcode[p].data(), bitcode[p].size()), "part"), context);
      if (!parsed) {
        out.status = to_status(parsed.takeError(), "splitting the module");
        continue;
      }
      llvm::Module& piece = **parsed;
      optimize_with(piece, **target);
      if (text != nullptr) {
        llvm::raw_string_ostream os(out.optimized_ir);
        piece.print(os, nullptr);
        std::unique_ptr<llvm::Module> copy = llvm::CloneModule(piece);
        absl::StatusOr<std::string> assembly = emit_with(*copy, **target, llvm::CodeGenFileType::AssemblyFile);
        out.assembly = assembly.ok() ? *std::move(assembly) : std::string(assembly.status().message());
      }
      absl::StatusOr<std::string> object = emit_with(piece, **target, llvm::CodeGenFileType::ObjectFile);
      if (object.ok()) out.object = *std::move(object);
      out.status = object.status();
    }
    if (!target) llvm::consumeError(target.takeError());
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < parts; ++t) helpers.emplace_back(worker);
  worker();
  for (std::thread& t : helpers) t.join();
  for (Part& part : results) {
    if (!part.status.ok()) return part.status;
    objects.push_back(std::move(part.object));
    if (text != nullptr) {
      text->optimized_ir += part.optimized_ir;
      text->assembly += part.assembly;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::load(lowering::KernelPlan plan,
                                                                       std::string_view bundle) {
  absl::StatusOr<std::vector<std::string_view>> objects = unpack_objects(bundle);
  if (!objects.ok()) return objects.status();
  std::lock_guard lock(mutex_);
  // Each graph gets a JITDylib of its own: its symbols cannot clash with another graph's
  // (or with an evicted copy of itself still running), and removing it frees its code.
  auto dylib = jit_->createJITDylib(fmt::format("lazyjit.graph.{}", ++loads_));
  if (!dylib) return to_status(dylib.takeError(), "creating a JITDylib");
  dylib->addToLinkOrder(jit_->getMainJITDylib());  // libm, libmvec and the process
  auto release = [&](llvm::orc::JITDylib& jd) { llvm::consumeError(jit_->getExecutionSession().removeJITDylib(jd)); };
  for (std::string_view object : *objects) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), "lazyjit-kernels");
    if (llvm::Error error = jit_->addObjectFile(*dylib, std::move(buffer))) {
      release(*dylib);
      return to_status(std::move(error), "loading the compiled object");
    }
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
