// JitCompiler: one LLJIT for the host CPU, a lean optimisation pipeline with libmvec, and the kernel code
// cache: each distinct kernel is compiled once, and graphs are lists of kernel references.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "codegen/disk_cache.h"
#include "ir/hash.h"
#include "lowering/lower.h"
#include "lowering/lowered_graph.h"

namespace llvm {
class Module;
class TargetMachine;
enum class CodeGenFileType;
namespace orc {
class ExecutionSession;
class JITDylib;
class LLJIT;
class JITTargetMachineBuilder;
}  // namespace orc
}  // namespace llvm

namespace lazyjit::codegen {

struct KernelModule;  // kir_llvm.h

/// The kernels' LLVM IR as emitted from their kernel IR (before optimisation), in plan order.
std::string llvm_ir_text(const lowering::LoweredGraph& lowered);

/// How a compile spreads its new kernels over threads (lowering's ForEachKernel).
using lowering::ForEachKernel;
using lowering::in_order;

/// One kernel's code in the JIT. Destroying it frees the code.
class CompiledKernel {
 public:
  CompiledKernel(lowering::KernelFn function, llvm::orc::ExecutionSession* session, llvm::orc::JITDylib* dylib)
      : function_(function), session_(session), dylib_(dylib) {}
  ~CompiledKernel();
  CompiledKernel(const CompiledKernel&) = delete;
  CompiledKernel& operator=(const CompiledKernel&) = delete;

  lowering::KernelFn function() const { return function_; }

 private:
  lowering::KernelFn function_;
  llvm::orc::ExecutionSession* session_;
  llvm::orc::JITDylib* dylib_;  // this kernel's code alone; removed on destruction
};

/// A graph's kernels: its plan, and per kernel a reference to its code (shared with every
/// other graph that has the same kernel).
class CompiledGraph {
 public:
  CompiledGraph(lowering::KernelPlan plan, std::vector<std::shared_ptr<const CompiledKernel>> code,
                std::atomic<int64_t>* loaded = nullptr);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  const lowering::KernelPlan& plan() const { return plan_; }
  const std::vector<lowering::KernelSpec>& kernels() const { return plan_.kernels; }
  lowering::KernelFn function(size_t kernel) const { return code_[kernel]->function(); }

 private:
  lowering::KernelPlan plan_;
  std::vector<std::shared_ptr<const CompiledKernel>> code_;
  std::atomic<int64_t>* loaded_;  // the compiler's count of graphs in memory
};

/// Compiles lowered graphs for the host CPU (name and features detected at start). Kernels
/// are keyed by their content (LoweredKernel::content) and the compiler's fingerprint: a
/// kernel whose code is in memory (held by any graph) or in the disk cache is not compiled
/// again. New kernels are emitted, optimised and compiled as independent tasks (ForEachKernel),
/// each with a target machine of its own (kept for the next compile). Thread-safe.
class JitCompiler {
 public:
  static absl::StatusOr<std::unique_ptr<JitCompiler>> create();
  ~JitCompiler();

  /// Everything besides a kernel's IR that compiled code depends on: LLVM version, target
  /// CPU and features, optimisation level, kernel ABI version. Folded into every cache key.
  const ir::Hash128& fingerprint() const { return fingerprint_; }
  /// Compiled graphs whose code is in memory now (an evicted graph leaves once unused).
  int64_t loaded_graphs() const { return loaded_.load(); }
  /// Distinct kernels whose code is in memory now.
  int64_t loaded_kernels() const;
  /// "znver4 +avx512f,... lean" for reports.
  const std::string& target_description() const { return description_; }

  /// The kernels' code as text, for dumps, in plan order: their LLVM IR as emitted from their
  /// kernel IR, after the lean pipeline (vectorised for the host CPU), or the host CPU's
  /// assembly. Compiles nothing into the JIT.
  enum class Text { LlvmIr, OptimizedLlvmIr, Assembly };
  absl::StatusOr<std::string> text(const lowering::LoweredGraph& lowered, Text form);

  /// The code of `kernel` if it is in memory now (compiled for any graph still held), else
  /// null. Compiles nothing: how tier 0 runs the kernels a new graph shares with older ones.
  std::shared_ptr<const CompiledKernel> find(const lowering::LoweredKernel& kernel) const;

  /// What one compile() did, for metrics and logs.
  struct Report {
    int64_t kernels_compiled = 0;   ///< kernels LLVM optimised and emitted
    int64_t kernel_cache_hits = 0;  ///< kernels whose code was in memory already
    int64_t disk_cache_hits = 0;    ///< kernels loaded from the disk cache
    int64_t optimize_ns = 0;        ///< LLVM's optimisation pipeline, summed over the compiling threads
    int64_t codegen_ns = 0;         ///< machine code (instruction selection to object), likewise
    std::vector<std::string> warnings = {};  ///< damaged disk-cache files, unwritable cache
  };
  /// Text of the compiled kernels' intermediate forms, for dumps.
  struct Artifacts {
    std::string optimized_ir = {};
    std::string assembly = {};
  };

  /// How a compile hands its kernels over as they come, for a graph that tier 0 runs
  /// meanwhile (it switches kernel by kernel): the new kernels compile in `order` (the graph's
  /// kernel indices, the most wanted first; kernels it leaves out come after, in graph order),
  /// and each one compiled now is loaded at once and handed to `ready` with every index of
  /// the graph it serves, on the thread that compiled it.
  struct Progress {
    std::vector<size_t> order = {};
    std::function<void(size_t kernel, const std::shared_ptr<const CompiledKernel>& code)> ready = {};
  };

  /// The code of `lowered`'s kernels: from memory, else from `disk` (when given and valid),
  /// else optimised, compiled (new objects are stored in `disk`) and loaded. Errors carry
  /// LLVM's own text (missing symbols, verifier failures). `report` and `artifacts` (the
  /// optimised IR and assembly of the kernels compiled now) are filled when given. The new
  /// kernels compile as the tasks of `for_each`, as `progress` asks when given.
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> compile(lowering::LoweredGraph lowered,
                                                              const DiskCache* disk = nullptr,
                                                              Report* report = nullptr, Artifacts* artifacts = nullptr,
                                                              ForEachKernel for_each = in_order,
                                                              const Progress* progress = nullptr);
  /// The code of those of `lowered`'s kernels listed in `which` (plan indices), as compile()
  /// gets it, without making a CompiledGraph: a background compile's hot kernels, ahead of
  /// the rest of their graph. Each one compiled now is handed to `progress`'s `ready` when
  /// given; all stay in memory while someone holds them, for the graph's compile to find.
  absl::Status compile_kernels(const lowering::LoweredGraph& lowered, std::span<const size_t> which,
                               const DiskCache* disk, Report* report, ForEachKernel for_each, const Progress* progress);
  /// The same with `modules` (one per kernel, complete types from kir_llvm.h) instead of the
  /// modules emitted from the kernel IR: how tests compile hand-written LLVM IR.
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> compile(lowering::LoweredGraph lowered,
                                                              std::vector<KernelModule> modules);

 private:
  struct NewKernel;
  JitCompiler() = default;
  ir::Hash128 kernel_key(const lowering::LoweredKernel& kernel) const;
  /// Fills `code` (one per plan index) with the code of the kernels in `which`.
  absl::Status compile_kernels(const lowering::LoweredGraph& lowered, std::span<const size_t> which,
                               std::vector<std::shared_ptr<const CompiledKernel>>& code,
                               std::vector<KernelModule>* modules, const DiskCache* disk, Report* report,
                               Artifacts* artifacts, ForEachKernel for_each, const Progress* progress);
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> compile(lowering::LoweredGraph lowered,
                                                              std::vector<KernelModule>* modules, const DiskCache* disk,
                                                              Report* report, Artifacts* artifacts,
                                                              ForEachKernel for_each, const Progress* progress);
  /// Emits `kernel`'s module (or takes it from `modules`) and checks it: valid LLVM IR that
  /// defines `symbol`.
  absl::Status emit(NewKernel& kernel, const std::string& symbol, std::vector<KernelModule>* modules) const;
  void prepare(llvm::Module& module, llvm::TargetMachine& target) const;
  void optimize_with(llvm::Module& module, llvm::TargetMachine& target) const;
  absl::StatusOr<std::string> emit_with(llvm::Module& module, llvm::TargetMachine& target,
                                        llvm::CodeGenFileType type) const;
  /// Emits, optimises and compiles each kernel of `fresh` that has no object yet into its
  /// object: one task of `for_each` per kernel, in the order `progress` asks for, each loaded
  /// and handed over as it is done when `progress` wants them.
  void compile_objects(std::vector<NewKernel>& fresh, std::vector<KernelModule>* modules, bool with_text,
                       ForEachKernel for_each, const Progress* progress);
  /// One kernel's emission, pipeline and machine code; the status says how it went.
  void compile_object(NewKernel& kernel, std::vector<KernelModule>* modules, bool with_text);
  std::unique_ptr<llvm::TargetMachine> take_target();
  void give_back_target(std::unique_ptr<llvm::TargetMachine> target);
  /// Loads `object` into a JITDylib of its own and resolves `symbol` in it.
  absl::StatusOr<std::shared_ptr<const CompiledKernel>> load(const std::string& symbol, std::string_view object);
  std::string take_session_errors();

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> target_machine_;  // for text()
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> tm_builder_;
  bool avx512_ = false;
  ir::Hash128 fingerprint_;
  std::string description_;
  mutable std::mutex mutex_;  // the JIT, target_machine_ and the kernel map
  absl::flat_hash_map<ir::Hash128, std::weak_ptr<const CompiledKernel>> kernels_;
  int64_t loaded_kernels_hint_ = 64;  // when kernels_ outgrows twice this, expired entries go
  uint64_t loads_ = 0;  // kernels loaded, for unique JITDylib names
  std::mutex targets_mutex_;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_targets_;
  std::atomic<int64_t> loaded_{0};
  std::mutex errors_mutex_;
  std::string session_errors_;  // errors ORC reported while materialising
};

}  // namespace lazyjit::codegen
