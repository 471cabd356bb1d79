// JitCompiler: one LLJIT for the host CPU, the O2 pipeline with libmvec, and loaded kernels.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/hash.h"
#include "llvm/IR/Module.h"
#include "lowering/lowered_graph.h"

namespace llvm {
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

/// A lowered graph whose kernels are in the JIT. Destroying it frees their code.
class CompiledGraph {
 public:
  CompiledGraph(lowering::KernelPlan plan, std::vector<lowering::KernelFn> functions,
                llvm::orc::ExecutionSession* session, llvm::orc::JITDylib* dylib,
                std::atomic<int64_t>* loaded = nullptr);
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  const lowering::KernelPlan& plan() const { return plan_; }
  const std::vector<lowering::KernelSpec>& kernels() const { return plan_.kernels; }
  lowering::KernelFn function(size_t kernel) const { return functions_[kernel]; }

 private:
  lowering::KernelPlan plan_;
  std::vector<lowering::KernelFn> functions_;
  llvm::orc::ExecutionSession* session_;
  llvm::orc::JITDylib* dylib_;  // this graph's code; removed on destruction
  std::atomic<int64_t>* loaded_;  // the compiler's count of graphs in memory
};

/// Compiles lowered graphs for the host CPU (name and features detected at start). Thread-safe:
/// compiles are serialised (LLVM's TargetMachine is not safe to share), lookups are not needed
/// after load since CompiledGraph holds the function pointers.
class JitCompiler {
 public:
  static absl::StatusOr<std::unique_ptr<JitCompiler>> create();
  ~JitCompiler();

  /// Everything besides the graph that compiled code depends on: LLVM version, target CPU
  /// and features, optimisation level, kernel ABI version. Folded into every cache key.
  const ir::Hash128& fingerprint() const { return fingerprint_; }
  /// Compiled graphs whose code is in memory now (an evicted graph leaves once unused).
  int64_t loaded_graphs() const { return loaded_.load(); }
  /// "znver4 +avx512f,... O2" for reports.
  const std::string& target_description() const { return description_; }

  /// Sets the module's target and runs the O2 pipeline (loop and SLP vectorisers, libmvec).
  void optimize(llvm::Module& module);
  /// The module's assembly for the host CPU (the module is left as it was).
  absl::StatusOr<std::string> assembly(llvm::Module& module);
  /// Text of a compile's intermediate forms, for dumps.
  struct Artifacts {
    bool with_text = false;  ///< also fill optimized_ir and assembly (an extra codegen pass)
    std::string optimized_ir = {};
    std::string assembly = {};
    std::string object = {};  ///< the objects the JIT loaded, as one bundle (for the disk cache)
  };

  /// Optimises `lowered`, compiles it into the JIT and resolves its kernels. Errors carry
  /// LLVM's own text (missing symbols, verifier failures). When `artifacts` is given it
  /// receives the object, and with `with_text` the optimised IR and assembly (dumps).
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> compile(lowering::LoweredGraph lowered,
                                                              Artifacts* artifacts = nullptr);
  /// Loads the object bundle compile() made (in this process or, through the disk cache, another)
  /// and resolves the kernels of `plan` in it. No LLVM optimisation or codegen runs.
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> load(lowering::KernelPlan plan, std::string_view object);

 private:
  JitCompiler() = default;
  void prepare(llvm::Module& module, llvm::TargetMachine& target) const;
  void optimize_with(llvm::Module& module, llvm::TargetMachine& target) const;
  absl::StatusOr<std::string> emit(llvm::Module& module, llvm::CodeGenFileType type);
  absl::StatusOr<std::string> emit_with(llvm::Module& module, llvm::TargetMachine& target,
                                        llvm::CodeGenFileType type) const;
  /// Optimises and emits `module`'s kernels split into one part per core, each on its own
  /// thread with its own context and target machine: a graph of many kernels compiles in
  /// about 1/cores of the time. Appends one object per part.
  absl::Status compile_parts(const llvm::Module& module, const std::vector<lowering::KernelSpec>& kernels,
                             std::vector<std::string>& objects, Artifacts* text);
  std::string take_session_errors();

  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> target_machine_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> tm_builder_;  // a target machine per compile thread
  bool avx512_ = false;
  ir::Hash128 fingerprint_;
  std::string description_;
  std::mutex mutex_;              // serialises optimize/compile
  uint64_t loads_ = 0;            // graphs loaded, for unique JITDylib names
  std::atomic<int64_t> loaded_{0};
  std::mutex errors_mutex_;
  std::string session_errors_;    // errors ORC reported while materialising
};

}  // namespace lazyjit::codegen
