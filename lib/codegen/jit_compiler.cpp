// LLJIT setup, the kernel code cache and loading compiled kernels (the optimisation
// pipeline and machine code: llvm_pipeline.cpp).
#include "codegen/jit_compiler.h"

#include <numeric>

#include "codegen/kir_llvm.h"
#include "codegen/vector_library.h"
#include "fmt/format.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <optional>

namespace lazyjit::codegen {
namespace {

/// Bump when generated code changes for the same graph (lowering, ABI, runtime contract):
/// it is part of every cache key, so on-disk objects from older builds are not loaded.
inline constexpr uint64_t kKernelAbiVersion = 7;
inline constexpr const char* kOptLevelName = "lean";

/// The calling thread's CPU time: what LLVM's work costs the cores, whatever else runs on
/// them (a compile that waits for idle cores takes longer, not more).
int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

absl::Status to_status(llvm::Error error, std::string_view context) {
  return absl::InternalError(fmt::format("{}: {}", context, llvm::toString(std::move(error))));
}

}  // namespace

CompiledKernel::~CompiledKernel() {
  if (session_ != nullptr && dylib_ != nullptr) llvm::consumeError(session_->removeJITDylib(*dylib_));
}

CompiledGraph::CompiledGraph(lowering::KernelPlan plan, std::vector<std::shared_ptr<const CompiledKernel>> code,
                             std::atomic<int64_t>* loaded)
    : plan_(std::move(plan)), code_(std::move(code)), loaded_(loaded) {
  if (loaded_ != nullptr) loaded_->fetch_add(1);
}

CompiledGraph::~CompiledGraph() {
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

absl::StatusOr<std::string> JitCompiler::text(const lowering::LoweredGraph& lowered, Text form) {
  if (form == Text::LlvmIr) return llvm_ir_text(lowered);
  std::string text;
  for (const lowering::LoweredKernel& kernel : lowered.kernels) {
    KernelModule emitted = emit_module(kernel);
    llvm::Module& module = *emitted.module;
    std::lock_guard lock(mutex_);
    optimize_with(module, *target_machine_);
    if (form == Text::OptimizedLlvmIr) {
      text += module_text(module);
      continue;
    }
    absl::StatusOr<std::string> assembly = emit_with(module, *target_machine_, llvm::CodeGenFileType::AssemblyFile);
    if (!assembly.ok()) return assembly.status();
    text += *assembly;
  }
  return text;
}

std::string JitCompiler::take_session_errors() {
  std::lock_guard lock(errors_mutex_);
  return std::exchange(session_errors_, std::string());
}

int64_t JitCompiler::loaded_kernels() const {
  std::lock_guard lock(mutex_);
  int64_t n = 0;
  for (const auto& [key, kernel] : kernels_) n += kernel.expired() ? 0 : 1;
  return n;
}

std::shared_ptr<const CompiledKernel> JitCompiler::find(const lowering::LoweredKernel& kernel) const {
  const ir::Hash128 key = kernel_key(kernel);
  std::lock_guard lock(mutex_);
  auto found = kernels_.find(key);
  return found == kernels_.end() ? nullptr : found->second.lock();
}

ir::Hash128 JitCompiler::kernel_key(const lowering::LoweredKernel& kernel) const {
  const uint64_t words[] = {kernel.content.low, kernel.content.high, fingerprint_.low, fingerprint_.high};
  return ir::hash_words(words);
}

std::unique_ptr<llvm::TargetMachine> JitCompiler::take_target() {
  {
    std::lock_guard lock(targets_mutex_);
    if (!idle_targets_.empty()) {
      std::unique_ptr<llvm::TargetMachine> target = std::move(idle_targets_.back());
      idle_targets_.pop_back();
      return target;
    }
  }
  auto target = tm_builder_->createTargetMachine();
  if (!target) {
    llvm::consumeError(target.takeError());
    return nullptr;
  }
  return std::move(*target);
}

void JitCompiler::give_back_target(std::unique_ptr<llvm::TargetMachine> target) {
  if (target == nullptr) return;
  std::lock_guard lock(targets_mutex_);
  idle_targets_.push_back(std::move(target));
}

/// A kernel of the graph being compiled whose code is not in memory.
struct JitCompiler::NewKernel {
  size_t index;                // in the plan
  ir::Hash128 key;
  const lowering::LoweredKernel* lowered;
  const std::string* symbol;   // its name in the plan
  KernelModule module = {};    // emitted unless its object came from the disk cache
  std::string object = {};     // from the disk cache or compiled now
  bool from_disk = false;
  absl::Status status = {};
  std::string optimized_ir = {}, assembly = {};
  int64_t optimize_ns = 0, codegen_ns = 0;
  std::vector<size_t> also = {};  // later indices in the plan of the same kernel
  std::shared_ptr<const CompiledKernel> loaded = {};  // once loaded (as compiled, under Progress)
};

absl::Status JitCompiler::emit(NewKernel& kernel, const std::string& symbol, std::vector<KernelModule>* modules) const {
  kernel.module = modules != nullptr ? std::move((*modules)[kernel.index]) : emit_module(*kernel.lowered);
  std::string verifier_errors;
  llvm::raw_string_ostream verifier_os(verifier_errors);
  if (llvm::verifyModule(*kernel.module.module, &verifier_os)) {
    return absl::InternalError(fmt::format("generated LLVM IR is invalid: {}", verifier_errors));
  }
  const llvm::Function* fn = kernel.module.module->getFunction(symbol);
  if (fn == nullptr || fn->isDeclaration()) {
    return absl::InternalError(fmt::format("compiling {}: the module does not define it", symbol));
  }
  return absl::OkStatus();
}

void JitCompiler::compile_object(NewKernel& kernel, std::vector<KernelModule>* modules, bool with_text) {
  kernel.status = emit(kernel, *kernel.symbol, modules);
  if (!kernel.status.ok()) return;
  std::unique_ptr<llvm::TargetMachine> target = take_target();
  if (target == nullptr) {
    kernel.status = absl::InternalError("creating a target machine");
    return;
  }
  llvm::Module& module = *kernel.module.module;
  const int64_t start = thread_cpu_ns();
  optimize_with(module, *target);
  kernel.optimize_ns = thread_cpu_ns() - start;
  if (with_text) {
    llvm::raw_string_ostream os(kernel.optimized_ir);
    module.print(os, nullptr);
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
    absl::StatusOr<std::string> assembly = emit_with(*copy, *target, llvm::CodeGenFileType::AssemblyFile);
    kernel.assembly = assembly.ok() ? *std::move(assembly) : std::string(assembly.status().message());
  }
  const int64_t emitting = thread_cpu_ns();
  absl::StatusOr<std::string> object = emit_with(module, *target, llvm::CodeGenFileType::ObjectFile);
  kernel.codegen_ns = thread_cpu_ns() - emitting;
  if (object.ok()) kernel.object = *std::move(object);
  kernel.status = object.status();
  kernel.module.module.reset();  // their memory, now: the object is all that is loaded
  kernel.module.context.reset();
  give_back_target(std::move(target));
}

void JitCompiler::compile_objects(std::vector<NewKernel>& fresh, std::vector<KernelModule>* modules, bool with_text,
                                  ForEachKernel for_each, const Progress* progress) {
  std::vector<NewKernel*> queue;
  for (NewKernel& kernel : fresh) {
    if (kernel.object.empty()) queue.push_back(&kernel);
  }
  if (progress == nullptr) {
    for_each(queue.size(), [&](size_t i) { compile_object(*queue[i], modules, with_text); });
    return;
  }
  // A kernel's place: the first of its indices in the order, or after all of them; computed
  // once per kernel, then the queue sorted by it.
  absl::flat_hash_map<size_t, size_t> place_of_index;
  for (size_t r = 0; r < progress->order.size(); ++r) place_of_index.try_emplace(progress->order[r], r);
  auto place_at = [&](size_t k) {
    const auto it = place_of_index.find(k);
    return it == place_of_index.end() ? progress->order.size() : it->second;
  };
  std::vector<std::pair<size_t, NewKernel*>> placed;
  for (NewKernel* kernel : queue) {
    size_t best = place_at(kernel->index);
    for (size_t k : kernel->also) best = std::min(best, place_at(k));
    placed.emplace_back(best, kernel);
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < placed.size(); ++i) queue[i] = placed[i].second;
  for_each(queue.size(), [&](size_t i) {
    NewKernel& kernel = *queue[i];
    compile_object(kernel, modules, with_text);
    if (!kernel.status.ok()) return;
    {
      std::lock_guard lock(mutex_);
      absl::StatusOr<std::shared_ptr<const CompiledKernel>> loaded = load(*kernel.symbol, kernel.object);
      if (!loaded.ok()) return;  // loaded again, and its error reported, with the rest
      kernel.loaded = *std::move(loaded);
      kernels_[kernel.key] = kernel.loaded;
    }
    if (progress->ready) {
      progress->ready(kernel.index, kernel.loaded);
      for (size_t k : kernel.also) progress->ready(k, kernel.loaded);
    }
  });
}

absl::StatusOr<std::shared_ptr<const CompiledKernel>> JitCompiler::load(const std::string& symbol,
                                                                       std::string_view object) {
  // Each kernel gets a JITDylib of its own: removing it frees exactly its code, and a copy
  // compiled again (by a racing thread, or after an eviction) cannot clash with it.
  auto dylib = jit_->createJITDylib(fmt::format("lazyjit.kernel.{}", ++loads_));
  if (!dylib) return to_status(dylib.takeError(), "creating a JITDylib");
  dylib->addToLinkOrder(jit_->getMainJITDylib());  // libm, libmvec and the process
  auto release = [&](llvm::orc::JITDylib& jd) { llvm::consumeError(jit_->getExecutionSession().removeJITDylib(jd)); };
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
  if (llvm::Error error = jit_->addObjectFile(*dylib, std::move(buffer))) {
    release(*dylib);
    return to_status(std::move(error), "loading the compiled object");
  }
  auto address = jit_->lookup(*dylib, symbol);
  if (!address) {
    absl::Status status = to_status(address.takeError(), fmt::format("compiling {}", symbol));
    const std::string details = take_session_errors();
    release(*dylib);
    return absl::InternalError(fmt::format("{}{}{}", std::string(status.message()), details.empty() ? "" : "\n", details));
  }
  return std::make_shared<const CompiledKernel>(address->toPtr<lowering::KernelFn>(), &jit_->getExecutionSession(),
                                                &*dylib);
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::compile(lowering::LoweredGraph lowered,
                                                                          const DiskCache* disk, Report* report,
                                                                          Artifacts* artifacts, ForEachKernel for_each,
                                                                          const Progress* progress) {
  return compile(std::move(lowered), nullptr, disk, report, artifacts, for_each, progress);
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::compile(lowering::LoweredGraph lowered,
                                                                          std::vector<KernelModule> modules) {
  if (modules.size() != lowered.kernels.size()) return absl::InternalError("one module per kernel, please");
  return compile(std::move(lowered), &modules, nullptr, nullptr, nullptr, in_order, nullptr);
}

absl::StatusOr<std::shared_ptr<const CompiledGraph>> JitCompiler::compile(lowering::LoweredGraph lowered,
                                                                          std::vector<KernelModule>* modules,
                                                                          const DiskCache* disk, Report* report,
                                                                          Artifacts* artifacts, ForEachKernel for_each,
                                                                          const Progress* progress) {
  std::vector<size_t> all(lowered.plan.kernels.size());
  std::iota(all.begin(), all.end(), size_t{0});
  std::vector<std::shared_ptr<const CompiledKernel>> code;
  absl::Status done = compile_kernels(lowered, all, code, modules, disk, report, artifacts, for_each, progress);
  if (!done.ok()) return done;
  return std::make_shared<const CompiledGraph>(std::move(lowered.plan), std::move(code), &loaded_);
}

absl::Status JitCompiler::compile_kernels(const lowering::LoweredGraph& lowered, std::span<const size_t> which,
                                          const DiskCache* disk, Report* report, ForEachKernel for_each,
                                          const Progress* progress) {
  std::vector<std::shared_ptr<const CompiledKernel>> code;
  return compile_kernels(lowered, which, code, nullptr, disk, report, nullptr, for_each, progress);
}

absl::Status JitCompiler::compile_kernels(const lowering::LoweredGraph& lowered, std::span<const size_t> which,
                                          std::vector<std::shared_ptr<const CompiledKernel>>& code,
                                          std::vector<KernelModule>* modules, const DiskCache* disk, Report* report,
                                          Artifacts* artifacts, ForEachKernel for_each, const Progress* progress) {
  Report local_report;
  Report& done = report != nullptr ? *report : local_report;
  const size_t n = lowered.plan.kernels.size();
  if (lowered.kernels.size() != n) return absl::InternalError("a lowered graph needs one module per kernel");
  code.assign(n, nullptr);
  std::vector<NewKernel> fresh;
  {
    std::lock_guard lock(mutex_);
    for (size_t k : which) {
      const ir::Hash128 key = kernel_key(lowered.kernels[k]);
      auto found = kernels_.find(key);
      if (found != kernels_.end()) code[k] = found->second.lock();
      if (code[k] != nullptr) {
        ++done.kernel_cache_hits;
        continue;
      }
      auto first = std::find_if(fresh.begin(), fresh.end(), [&](const NewKernel& f) { return f.key == key; });
      if (first != fresh.end()) {
        first->also.push_back(k);
      } else {
        fresh.push_back(
            {.index = k, .key = key, .lowered = &lowered.kernels[k], .symbol = &lowered.plan.kernels[k].symbol});
      }
    }
  }
  for (NewKernel& kernel : fresh) {
    if (disk == nullptr || !disk->enabled()) continue;
    absl::StatusOr<std::optional<std::string>> object = disk->load(kernel.key);
    if (!object.ok()) {
      done.warnings.push_back(fmt::format("{}; ignoring it, compiling and replacing it", std::string(object.status().message())));
    } else if (object->has_value()) {
      kernel.object = **std::move(object);
      kernel.from_disk = true;
    }
  }
  compile_objects(fresh, modules, artifacts != nullptr, for_each, progress);
  std::lock_guard lock(mutex_);
  for (NewKernel& kernel : fresh) {
    if (!kernel.status.ok()) return kernel.status;
    const std::string& symbol = lowered.plan.kernels[kernel.index].symbol;
    absl::StatusOr<std::shared_ptr<const CompiledKernel>> loaded =
        kernel.loaded != nullptr ? kernel.loaded : load(symbol, kernel.object);
    if (!loaded.ok() && kernel.from_disk) {  // a valid file from another build: compile it after all
      done.warnings.push_back(fmt::format("cache file {} does not load ({}); compiling and replacing it",
                                          disk->path_of(kernel.key), std::string(loaded.status().message())));
      kernel.object.clear();
      kernel.from_disk = false;
      compile_object(kernel, modules, artifacts != nullptr);
      if (!kernel.status.ok()) return kernel.status;
      loaded = load(symbol, kernel.object);
    }
    if (!loaded.ok()) return loaded.status();
    code[kernel.index] = *loaded;
    kernels_[kernel.key] = *loaded;
    if (artifacts != nullptr) {
      artifacts->optimized_ir += kernel.optimized_ir;
      artifacts->assembly += kernel.assembly;
    }
    if (kernel.from_disk) {
      ++done.disk_cache_hits;
      continue;
    }
    ++done.kernels_compiled;
    done.optimize_ns += kernel.optimize_ns;
    done.codegen_ns += kernel.codegen_ns;
    if (disk != nullptr && disk->enabled()) {
      if (absl::Status stored = disk->store(kernel.key, kernel.object); !stored.ok()) {
        done.warnings.push_back(fmt::format("disk cache: {}", std::string(stored.message())));
      }
    }
  }
  for (size_t k : which) {  // a kernel that appears twice in the graph
    if (code[k] == nullptr) code[k] = kernels_[kernel_key(lowered.kernels[k])].lock();
  }
  if (kernels_.size() > 2 * static_cast<size_t>(loaded_kernels_hint_)) {
    absl::erase_if(kernels_, [](const auto& entry) { return entry.second.expired(); });
    loaded_kernels_hint_ = static_cast<int64_t>(kernels_.size()) + 64;
  }
  return absl::OkStatus();
}

}  // namespace lazyjit::codegen
