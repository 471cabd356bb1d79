// Tier 0's prepared program: what Tier0Kernel's preparation (tier0.cpp) makes of a kernel's
// kernel IR and its runner (tier0_runner.cpp) executes. Internal to lib/runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lowering/kir.h"
#include "runtime/tier0.h"
#include "runtime/tier0_blocks.h"

namespace lazyjit::runtime::tier0 {

using kir::Id;
using kir::Stmt;

/// A slot as a bit of the emitter's read and write masks; slots past 63 share the last bit.
inline uint64_t bit(int slot) { return uint64_t{1} << std::min(slot, 63); }

/// What a statement (or a loop's whole body) writes, as the emitter's slot masks.
struct Writes {
  uint64_t buffers = 0, locals = 0;
  Writes& operator|=(const Writes& w) {
    buffers |= w.buffers;
    locals |= w.locals;
    return *this;
  }
};

/// An index expression's operation and operands, decoded from kir::Expr for the runner's
/// scalar evaluation (one per loop iteration: a matmul tile's row offsets, a row's bounds),
/// which then reads neither the expression nor its operand vector.
struct IndexCode {
  Id a = kir::kNone, b = kir::kNone;  ///< none: not an Index expression (Runner::eval's general path)
  kir::IndexOp op{};
  bool index() const { return a != kir::kNone; }
};

/// How a value of an innermost loop is held while a block runs.
enum class Form : uint8_t {
  Uniform,  ///< the same for the whole loop entry: in regs (and a broadcast block if a block reads it)
  Index,    ///< index arithmetic of the variable: per block either affine (base in regs + stride *
            ///< lane, materialised in its block only if a block reads it) or, where it is not
            ///< (a clamp that binds, a division that crosses a multiple), one value per lane
  Block,    ///< one value per lane, in a block
  Row,      ///< in a loop of rows (BlockLoop::row), the same along each row (a load at the row's
            ///< index, an operation of such values: a norm's statistics): one value per row,
            ///< spread along its row where a block operation reads it
};

/// A loop NestInverter made of rows of another loop nest: its slot, the rows' length (an
/// expression invariant in it), whether it folds per row (a batch of a loop of rows), and
/// whether its one store accumulates each row into the same elements (a batch of a loop of
/// rows summed into columns: NestInverter::accumulated).
struct Rows {
  int slot = -1;
  Id length = kir::kNone;
  bool fold_rows = false;
  bool accumulate = false;
};

/// One innermost loop run a block at a time.
struct BlockLoop {
  Id var = kir::kNone;      ///< the loop variable's expression, if used
  int64_t block = 0;        ///< iterations per block
  /// A flattened nest (tier0_nests.cpp, NestInverter): its inner loop's length, invariant here. A
  /// block then holds whole rows of it, and index values affine in each of the nest's two
  /// variables stay affine over the block (a stride per lane and one per row). Or an
  /// invariant the variable is divided by (a pack of A's rows through the heads' view, a
  /// head's 32 columns each), whose rows are taken where at least kMinRow long: shorter
  /// ones would pay a copy call per row where a gather pays a load per lane.
  Id row = kir::kNone;
  bool divisor_rows = false;
  static constexpr int64_t kMinRow = 16;
  /// A batch of a loop of rows (NestInverter::batched, or folds_rows): a fold into an array
  /// element per row, or into one accumulator for all rows, combines each row's lanes in one
  /// call, as the row's own block did.
  bool fold_rows = false;
  /// A batch of a loop of rows whose one store is B[o] = op(B[o], x) with o the same for
  /// every row (NestInverter::accumulated): x is computed for the block, then each row is
  /// combined into B in order, one block function call per row.
  bool accumulate = false;
  std::vector<Form> form;   ///< per expression the loop uses
  std::vector<int> slot;    ///< per expression: its block in the scratch, or -1
  int slots = 0;
  std::vector<Id> entry;    ///< loop invariants the loop uses, evaluated at its entry
  uint64_t writes = 0;         ///< the buffers its body stores to, as slot bits
  uint64_t writes_locals = 0;  ///< the locals its body writes, as slot bits
  /// Offsets at which the loop's one store statement stores buffers its values read there:
  /// a block whose lanes are not distinct at each runs one lane at a time.
  std::vector<Id> distinct;
  struct Statement {
    const Stmt* stmt;
    std::vector<Id> compute;  ///< values of the block first needed here, in order
  };
  std::vector<Statement> body;
};

/// A copy nest (tier0_nests.h, CopyNests): each store of its inner loops run over the whole
/// nest as one strided copy, or fill, whose strides the runner derives from the offsets.
struct CopyNest {
  /// The outer loop's variable slot; -1 for a copy loop (CopyNests::is_copy_loop), whose one
  /// Inner is the loop itself, run once over the loop's range.
  int outer = -1;
  struct Copy {
    int to = -1;                 ///< the buffer stored to, at to_offset
    Id to_offset = kir::kNone;
    int from = -1;               ///< the buffer (or local) loaded from, at from_offset; -1: value is invariant
    bool from_local = false;
    Id from_offset = kir::kNone;
    Id value = kir::kNone;
  };
  struct Inner {
    Id lo = kir::kNone, hi = kir::kNone;
    int var = -1;  ///< its variable slot
    std::vector<Copy> copies = {};
  };
  std::vector<Inner> inners = {};
};

/// A statement prepared for the outer (one-iteration-at-a-time) levels.
struct Step {
  const Stmt* stmt = nullptr;
  std::vector<Id> pre;      ///< expressions evaluated just before it
  Id var = kir::kNone;      ///< For: its variable's expression, if used
  std::vector<Id> hoisted;  ///< For: evaluated at the start of each iteration
  std::vector<Step> body;   ///< For, run an iteration at a time
  int block_loop = -1;      ///< For, run a block at a time: its BlockLoop
  int copy_nest = -1;       ///< For, run as copies: its CopyNest
};

}  // namespace lazyjit::runtime::tier0

namespace lazyjit::runtime {

/// A kernel prepared for tier 0 (tier0.cpp makes it, tier0_runner.cpp runs it).
struct Tier0Kernel::Program {
  using Id = kir::Id;
  using Stmt = kir::Stmt;
  using BlockLoop = tier0::BlockLoop;
  using Step = tier0::Step;
  using Writes = tier0::Writes;

  kir::Kernel k;
  const tier0::BlockTable* table = nullptr;
  std::vector<int> level;  // per expr: depth of the innermost loop whose variable it uses
  std::vector<uint64_t> buffers_read, locals_read;
  std::vector<bool> is_static;     // constants, dims, scalars, begin, end: set once per call
  std::vector<Id> statics;
  std::vector<int64_t> local_offset;  // per local: byte offset in the locals area
  int64_t locals_bytes = 0;
  int max_blocks = 0;              // block slots of the largest block loop
  std::vector<BlockLoop> loops;
  std::vector<tier0::CopyNest> copy_nests;
  std::vector<uint64_t> vars;      // per expr: the loop variables it reads, as slot bits
  std::vector<const Stmt*> copy_nest_stmts;  // the nests that run as copies (preparation only)
  int flattened = 0;                         // nests the inverter flattened (Tier0Kernel::shape)
  int batched = 0;                           // loops of rows it batched (Tier0Kernel::shape)
  int banded = 0;                            // loops of micro-kernels it runs a band at a time
  int checked_ahead = 0;                     // loops whose checks it runs ahead of their nests
  std::vector<tier0::Rows> rows;             // the loops the inverter made of rows
  std::vector<Id> root_hoisted;
  std::vector<Step> root;
  std::vector<tier0::BlockFn> fn;  // per Op expression: its block function
  std::vector<tier0::IndexCode> index_code;  // per expression

  // Preparation (tier0.cpp).
  void analyse();
  std::vector<Id> closure(const std::vector<Id>& uses, const std::vector<bool>& have) const;
  std::vector<Step> schedule(const std::vector<Stmt>& stmts, int depth, std::vector<bool>& computed);
  int build_block_loop(const Stmt& loop, int depth, const std::vector<bool>& computed);
  int build_copy_nest(const Stmt& nest, Step& step, std::vector<bool>& computed);
  void forget(std::vector<bool>& computed, const Writes& w) const {
    for (size_t e = 0; e < computed.size(); ++e) {
      if (computed[e] && ((buffers_read[e] & w.buffers) != 0 || (locals_read[e] & w.locals) != 0)) computed[e] = false;
    }
  }
  bool memory(Id e) const { return buffers_read[e] != 0 || locals_read[e] != 0; }
};

/// Runs iterations [begin, end) of `program` over a bound frame (Tier0Kernel::run).
int32_t run_program(const Tier0Kernel::Program& program, void* const* args, const int64_t* dims, int64_t begin,
                    int64_t end);

}  // namespace lazyjit::runtime
