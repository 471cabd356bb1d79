// Tier 0: runs a kernel's kernel IR at once, without LLVM (DESIGN.md section 7, "Tiers").
#pragma once

#include <cstdint>
#include <memory>

#include "lowering/kir.h"

namespace lazyjit::runtime {

/// One kernel prepared for tier 0, a vectorised interpreter of the kernel IR. It has the
/// compiled kernel's contract (lowering::KernelFn): the same frame, the same iterations, the
/// same status word, so the runtime launches either the same way.
///
/// How it runs: every innermost loop (loads, stores, folds, checks; no loop or matmul inside)
/// runs a block of up to kBlock iterations at a time, each expression of the loop variable
/// computed for the whole block by one precompiled block function (tier0_blocks.h); loop
/// invariants are computed once per entry, index expressions linear in the variable are kept
/// as (base, stride) and their loads and stores become contiguous copies. A loop that reads
/// what it writes (a local folded and read back, a buffer read at other elements than it
/// stores) runs one iteration per block, exactly in order. A nest of two loops that only
/// copies (a pack, an epilogue that stores a tile) runs as one strided copy per store; one
/// of short rows (an epilogue's tile, a slice in runs) runs as one loop of whole rows per
/// block, and a loop of rows that fold (a rows kernel) a batch of rows at a time
/// (tier0_nests.cpp, NestInverter). Outer loops and matmul steps run one iteration at a time; a
/// matmul step calls the library's micro-kernel.
class Tier0Kernel {
 public:
  static constexpr int64_t kBlock = 1024;

  explicit Tier0Kernel(const kir::Kernel& kernel);
  ~Tier0Kernel();
  Tier0Kernel(Tier0Kernel&&) noexcept;
  Tier0Kernel& operator=(Tier0Kernel&&) noexcept;

  /// Runs iterations [begin, end) over the bound frame; returns the status word. Thread-safe.
  int32_t run(void* const* args, const int64_t* dims, int64_t begin, int64_t end) const;

  /// Readies the calling thread for its first run ahead of time: the block functions chosen
  /// for this CPU, the thread's scratch (and so its malloc arena). The executor calls it on
  /// its threads as it starts them, so that a process's first graph does not pay for it.
  static void prepare_thread();

  /// What tier 0 made of the kernel's loop nests (tier0_nests.cpp), for tests: stores run as
  /// strided copies or fills of copy nests, nests flattened into one loop, loops of rows
  /// run a batch of rows at a time, loops of micro-kernels run a band at a time, and loops
  /// whose row checks run ahead of them.
  struct Shape {
    int copies = 0, flattened = 0, batched = 0, banded = 0, checked_ahead = 0;
    int in_order = 0;  ///< innermost loops that run one iteration at a time (they read what they write)
  };
  Shape shape() const;

  struct Program;

 private:
  std::unique_ptr<const Program> program_;
};

}  // namespace lazyjit::runtime
