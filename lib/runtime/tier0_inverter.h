// Tier 0's loop-nest inverter (internal to lib/runtime): the class that reshapes a kernel's
// nests before tier 0 prepares it (invert_nests, tier0_nests.h). Its inversions, runs and
// flattened nests are in tier0_nests.cpp; its batches (loops of rows, accumulations into
// columns, bands of micro-kernels) in tier0_batches.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/tier0_nests.h"

namespace lazyjit::runtime::tier0 {

/// Loop nests inverted so that tier 0's blocks are long (Tier0Kernel's constructor).
///
/// Tier 0 runs an innermost loop a block at a time, and a block costs a fixed amount besides
/// its lanes. A nest whose inner loops are short under a long one (a pack: MR or NR lanes for
/// each of K steps) would pay that cost per handful of elements, so the nest runs inverted:
/// each short inner loop outside, the long one inside it, strip-mined: the long loop in
/// chunks of kChunk steps, each chunk run by every step of the short loop before the next
/// (a pack of B reads kChunk rows of it, each a few cache lines, NR times over: from L1, not
/// across all of K). That reorders the nest's stores,
/// which is the same result when its iterations are independent: its inner loops hold stores
/// only (no fold, assignment or check), at offsets of index arithmetic alone (no data-dependent
/// scatter: the lowering's kernels store such an element once), and nothing in the nest reads
/// a buffer the nest stores to. A pack of a stored operand is a copy nest (CopyNests) and is
/// left to run as copies. A short nest of stores under a loop that is not longer (a
/// product's epilogue, NR columns for each of MR rows) is flattened instead: one loop over
/// both, in the nest's own order, one block where there were MR. So is an elementwise
/// kernel's slice in runs (KernelContext::for_runs) that reads its elements at their linear
/// index alone: one loop over the slice, however short its rows.
class NestInverter {
 public:
  /// Inner loops of at most this many iterations under a longer loop are inverted.
  static constexpr int64_t kShort = 32;
  /// Steps of the long loop per chunk: a pack of B's rows of 32 floats then holds 16 KB of B
  /// and 16 KB of the panel at a time.
  static constexpr int64_t kChunk = 128;

  /// Inverts the nests of `b`'s kernel, adding the expressions a strip-mined nest needs.
  explicit NestInverter(kir::Builder& b) : b_(b), k_(b.kernel()), nests_(k_) {}

  void invert(std::vector<Stmt>& body);

  /// How many nests invert() flattened, how many loops of rows it batched, and how many loops
  /// of micro-kernels it runs a band at a time.
  int flattened() const { return flattened_; }
  int batched() const { return batched_; }
  int banded() const { return banded_; }
  /// How many loops' checks it runs ahead of their nests (checks_ahead).
  int checked_ahead() const { return checked_ahead_; }
  /// Per loop it made of rows: its slot, the rows' length, whether its folds are per row,
  /// whether it accumulates rows into columns.
  const std::vector<tier0::Rows>& rows() const { return rows_; }

 private:
  /// The largest value `e` may take, if its expression bounds it.
  std::optional<int64_t> upper(Id e) const;

  /// `inner` with `outer` (holding inner's old body) as its body, strip-mined: `for c: inner:
  /// for v in [lo + c * kChunk, min(lo + c * kChunk + kChunk, hi))`. Only the long loop's
  /// order within a chunk is kept: the nest's iterations are independent (invertible).
  Stmt chunked(Stmt outer, Stmt inner);

  /// The operands of `e` when it is Index expression `op`.
  std::optional<std::pair<Id, Id>> operands(Id e, kir::IndexOp op) const;
  bool is(Id e, ExprKind kind) const { return k_.exprs[e].kind == kind; }
  bool is_index(Id e, int64_t value) const { return is(e, ExprKind::Const) && k_.exprs[e].bits == value; }

  /// Where `nest` is a slice [lo, hi) in runs of n elements (KernelContext::for_runs: `for
  /// run in [lo / n, (hi + n - 1) / n): for j in [max(lo - run n, 0), min(hi - run n, m))`,
  /// m the run's length, n = m or max(m, 1)), with lo and hi invariant in it ([Begin, End):
  /// an elementwise kernel; a part of a row: a head's run in the heads' cat): its
  /// iterations are the elements lo to hi in order, one long loop for tier 0 however short
  /// the runs (a weight's update over rows of 10 ran in blocks of 10; a softmax's rows of 64
  /// in blocks of 64; the cat, a copy of 32 per head and row).
  struct Runs {
    Id n, base;  ///< the run length, run n
    Id lo, hi;   ///< the slice; hi is lo where the runs are empty (m = 0 < n)
    /// The slice is [Begin, End) of a kernel of n iterations: one run, run 0, so j is the
    /// linear index (a 1-D parameter's update, whose operands read j and whose result
    /// stores run n + j: the same element, which tier 0 must see to run it a block at a time).
    bool one = false;
  };
  std::optional<Runs> runs(const Stmt& nest);

  /// Whether the statements of runs `nest` (base: run n) read run and j only through run n + j
  /// (an elementwise kernel whose operands are all read at the linear index).
  bool read_linearly(const Stmt& nest, Id base) const;

  /// `nest` (runs read linearly) as `for w in [lo, hi)` over its statements, with run n + j
  /// replaced by w: run becomes 0 and j becomes w, which the builder folds to w.
  Stmt linearised(Stmt nest, const Runs& runs);

  /// `nest` (runs of length n read otherwise too: a row's index, a causal mask, a head) as
  /// `for w in [lo, hi)` with run = w / n and j = w % n: a block holds whole runs as its
  /// rows (BlockLoop::row), along which index values stay affine.
  Stmt by_rows(Stmt nest, const Runs& runs);

  /// Whether `nest` is a loop whose body is one short innermost loop of stores (a matmul's
  /// epilogue: NR columns for each of MR rows) whose bounds do not depend on it, which
  /// inverting would not lengthen (its own loop is not the longer), and which reads a buffer
  /// it stores to only where it stores it (an optimiser's update of its state in place: the
  /// block loop then checks, block by block, that those offsets are distinct).
  bool flattenable(const Stmt& nest) const;

  /// Whether `nest`, a loop whose body is one loop, may run as one loop over both (flattened):
  /// flattenable's conditions but the length of the outer loop.
  bool flattens(const Stmt& nest) const;

  /// `nest` as one loop over its iterations in their order, `for w in [0, m n)` with the
  /// outer variable lo + w / n and the inner one lo' + w % n (n iterations of the inner loop,
  /// m of the outer): one block where there were m short ones, the same stores in the same order.
  Stmt flattened(Stmt nest);

  /// The check of a loop's rows (an index's range: an embedding's, a loss's labels), taken
  /// out of `nest` into a loop of its own ahead of it, where `nest` is a loop whose body holds
  /// one check and loops, and the check reads nothing the nest writes:
  ///   for i: [..., check c(i), ..., for j: ...]   ->   for i: check c(i);  for i: [..., for j: ...]
  /// Where the checks pass, the nest runs as before; where one fails, the first row that
  /// fails is the one reported, as in order, and the nest has stored only less (a failed
  /// kernel's results are never assigned). The checks run a block of rows at a time, and the
  /// nest left is one that runs in runs, flattened or in batches, where a check among its
  /// rows' statements kept it to a block per row. None where `nest` is not such a loop.
  std::optional<Stmt> checks_ahead(Stmt& nest);

  /// Micro-kernels per band (banded): a band of rows of the product, its tiles' epilogue
  /// in blocks of whole rows.
  static constexpr int64_t kBandTiles = 16;

  /// A loop of micro-kernels, each followed by its tile's epilogue (Matmul::matmul,
  /// lowering/kernel_matmul.cpp), that banded() may run a band at a time.
  struct Band {
    int64_t mr = 0, nr = 0;  ///< the tile's rows and columns
    Id rows_left = kir::kNone;  ///< D: the product's rows left from micro-kernel 0's first
    bool copies = false;        ///< the epilogue is a copy nest (else it runs flattened)
  };

  /// The coefficients of loop variables (slots) a and b in index expression e, where e is
  /// built from them and invariants by Add, Sub and Mul by a constant.
  std::optional<std::pair<int64_t, int64_t>> coefficients(Id e, int a, int b) const;

  /// Whether `loop` is a loop of micro-kernels with their epilogue:
  ///   for m in [0, U): matmul tile = ...; for r in [0, min(MR, D - MR m)): for j: stores S
  /// where D and the columns' bounds are invariant in m and r, S reads the tile only at
  /// r NR + j (the tile's r, j: NR its size over MR) and depends on m and r otherwise only
  /// through MR m + r (the product's row), the epilogue stores nothing the micro-kernels
  /// read, nothing else reads the tile, and the epilogue runs as copies or flattened.
  std::optional<Band> band(const Stmt& loop) const;

  /// Whether a statement of `stmts` other than the stores of `except` reads local `local`.
  bool reads_local(const std::vector<Stmt>& stmts, int local, const Stmt* except) const;

  /// `loop` (band) a band of kBandTiles micro-kernels at a time, each into its place in a
  /// tile array of the band, then the band's epilogue over its rows q (m = c B, r = q: the
  /// same rows MR m + r, each reading the band at q NR + j):
  ///   for c in [0, ceil(U / B)):
  ///     for m' in [c B, min(c B + B, U)): matmul tile[(m' - c B) MR NR] = ...
  ///     for q in [0, max(0, min(D(c B), MR min(B, U - c B)))): for j: S(c B, q)
  /// The micro-kernels write nothing the epilogues read but their own tiles, and the
  /// epilogues store nothing the micro-kernels read, so the band's order is the same result;
  /// the rows q are the nest's (m, r) in its order. Where a tile's epilogue was one block of
  /// at most MR rows, the band's runs in blocks of whole rows (flattened) or as one copy.
  Stmt banded(Stmt loop, const Band& band);

  /// The inner loop of `nest` where it is a loop of rows of one innermost loop whose bounds
  /// are invariant in the row and read no memory, `for i in [lo, hi): for j in [a, b): ...`
  /// (what accumulates and folds_rows require of a nest's shape), else null.
  const Stmt* rows_of_one_loop(const Stmt& nest) const;

  /// Whether `nest` is a loop of rows that accumulates each row into the same elements (a
  /// sum over a dim that is not the innermost: a bias's gradient, a norm's over the batch),
  /// or into the elements that data picks per row (a scatter-add: an embedding's gradient):
  ///   for i in [lo, hi): for j in [a, b): B[o] = op(B[o], x)
  /// with a and b invariant in i and reading no memory, o either invariant in i and reading
  /// no memory or reading memory the nest does not store, op an elementwise operation of two
  /// operands, and x reading nothing the nest stores. Row by row, each element of B is
  /// combined with the rows' values in their order (rows that pick one element, in turn); a
  /// tier-0 block per row paid its fixed cost per row of j.
  bool accumulates(const Stmt& nest) const;

  /// Whether `nest` is a loop of rows that folds every row into the same accumulators (a
  /// loss summed over a batch's rows and classes, on one thread):
  ///   for i in [lo, hi): for j in [a, b): l = fold(l, x)   (one or more such folds)
  /// with a and b invariant in i and reading no memory, each l a scalar local, and no x
  /// reading a local the nest folds. A tier-0 block per row paid its fixed cost per row.
  bool folds_rows(const Stmt& nest) const;

  /// `nest` (accumulates or folds_rows) in batches of R rows, R = max(1, kBlock / n) for
  /// rows of n:
  ///   for c in [0, ceil((hi - lo) / R)): for w in [0, min(R, hi - lo - c R) n):
  ///     the inner body at i = lo + c R + w / n, j = a + w % n
  /// whose block loop computes the values for the batch, then combines them row by row:
  /// into B (BlockLoop::accumulate), or into each accumulator with one call of its fold per
  /// row (BlockLoop::fold_rows), as the row's own block did: the same sums.
  Stmt accumulated(Stmt nest, bool folds);

  /// Whether `nest` is a loop of rows that may run a batch of rows at a time, each of its
  /// statements for every row of the batch before the next (a rows kernel: a row's
  /// accumulators assigned, folded over short loops, and stored). It qualifies when:
  ///  - it is the kernel's loop [Begin, End), and its statements are assignments of scalar
  ///    locals, stores, and innermost loops of folds into scalar locals and stores (at least
  ///    one fold: a loop of rows that only stores runs as copies or one block per row), whose
  ///    bounds read neither the row nor memory;
  ///  - each local the nest writes is assigned in every row before the row reads or folds
  ///    it, and no inner loop reads a local it folds (a scan runs in order);
  ///  - every store's offset reads the row, and nothing the nest reads is stored in it, but
  ///    at the row's own elements: a buffer it stores is stored and read at one offset of the
  ///    row and column (a softmax's exponentials stored, then read back to be scaled), which
  ///    reads no memory.
  /// Rows then share nothing but what they read (a parameter donated to a result is read at
  /// each element before that element is written, which batching keeps), and the kernel IR
  /// stores each element once, so the batches' order of stores is the same result: a row's
  /// statements keep their order, and what one reads back no other row's stores.
  bool batchable(const Stmt& nest) const;

  /// Whether `nest` (a loop of rows) stores and reads each buffer of `back` (slot bits) at
  /// one offset function of the row and column only, over inner loops of one range: what a
  /// row reads back of them, no other row stores (batchable's read-back case).
  bool reads_back_own_rows(const Stmt& nest, uint64_t back) const;

  /// Whether index expressions a (of loop variable va) and b (of vb) are the same function:
  /// equal with vb read as va (-1: no variable).
  bool same_offset(Id a, int va, Id b, int vb) const;

  /// `nest` (batchable) in batches of R rows, R the rows of its longest inner loop that a
  /// block holds (at least 1), each batch the rows [c R, c R + R) of the slice:
  ///   for c in [Begin / R, ceil(End / R)):
  ///     row statements:  for u in [first, last): ... (row c R + u, each local l as L[u])
  ///     an inner loop of n:  for w in [first n, last n): ... (row c R + w / n, its variable
  ///                          lo + w % n, each local as L[w / n]; rows of n: BlockLoop::row)
  /// with first and last the batch's rows in the slice, and L an array of a block's rows per
  /// local the nest writes. Each row folds its n values in one call of the fold (a segment
  /// of the block, Runner::block_statement), as it did in a block of its own: the same sums.
  Stmt batched(Stmt nest);

  /// Whether every store of `inner` (a loop of stores) and every load its values read is at
  /// an offset of unit stride in inner's variable: each of its rows lies whole in memory, so
  /// a flattened nest moves its rows at once (a pack of A from a transposed operand: rows of
  /// MR elements, K of them), where inverted it would read and write a lane at a time.
  bool moves_rows(const Stmt& inner) const;

  bool short_under(const Stmt& inner, const Stmt& outer) const;

  bool invertible(const Stmt& nest) const;

  kir::Builder& b_;  // new expressions go after their operands, as the program's analysis wants
  const kir::Kernel& k_;
  const CopyNests nests_;  // of the kernel as given
  int flattened_ = 0, batched_ = 0, banded_ = 0, checked_ahead_ = 0;
  std::vector<tier0::Rows> rows_;
};

}  // namespace lazyjit::runtime::tier0
