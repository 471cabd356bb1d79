// The kernel IR (DESIGN.md section 7): one kernel as loops, loads, stores, folds, checks and
// micro-kernel calls over an argument frame of its own. Lowering builds it from a planned
// graph (kernel_builder.h); codegen's LLVM emitter (codegen/kir_llvm.h) compiles it; its
// text is what `lazyjit-dump --emit=kernels` prints and what names the kernel in the caches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/op.h"
#include "lazyjit/dtype.h"

namespace lazyjit::kir {

/// An expression, by its position in Kernel::exprs. Operands come before their users.
using Id = int32_t;
inline constexpr Id kNone = -1;

/// Integer index arithmetic (int64; values are element counts and offsets, never negative
/// except a Sub that a Min or Max then bounds). Div and Rem are unsigned.
enum class IndexOp : uint8_t { Add, Sub, Mul, Div, Rem, Min, Max };

enum class ExprKind : uint8_t {
  Const,   ///< `bits`: an int64, a double's bits for float dtypes, 0 or 1 for bool
  Var,     ///< loop variable `slot` (the For that binds it); Int64
  Begin,   ///< the first iteration of this call's slice of the parallel loop; Int64
  End,     ///< one past its last; Int64
  Dim,     ///< dim `slot` of the frame; Int64
  Scalar,  ///< scalar `slot` of the frame (8 bytes: an int64, or a double for float dtypes), as dtype
  Load,    ///< buffer `slot` at element operands[0]
  Local,   ///< local `slot` (at element operands[0] for an array local)
  Index,   ///< IndexOp `op` of two Int64 operands
  Op,      ///< elementwise ir::OpKind `op` of the operands (their dtype rule gives dtype)
  Random,  ///< ir::OpKind `op` (Rand, Randn) of seed operands[0] at counter operands[1], as dtype
};

struct Expr {
  ExprKind kind;
  DType dtype;
  uint8_t op = 0;
  int32_t slot = -1;
  int64_t bits = 0;
  std::vector<Id> operands = {};
  friend bool operator==(const Expr&, const Expr&) = default;
  template <class H>
  friend H AbslHashValue(H h, const Expr& e) {
    return H::combine(std::move(h), e.kind, e.dtype, e.op, e.slot, e.bits, e.operands);
  }
};

/// A register-blocked matmul step: for kk in [0, k), tile[r][j] += A(r, kk) * B(kk, j) for
/// the MR x NR tile of a matmul (matmul_tiling), starting from zero. B is a packed panel
/// ([k][NR] at b_base of buffer b) or, read in place, row kk at b_base + b_rows[kk] (b_rows:
/// an Int64 buffer) with `cols` of its NR columns read (the rest are zero); A is a packed
/// panel ([k][MR] at a_rows[0] of buffer a) or, unpacked, MR rows of length k at offsets a_rows.
/// The tile is MR x NR elements of the array local `tile` from element `tile_at` (none: 0);
/// tier 0 runs a band of micro-kernels into one array before their epilogue (tier0_nests.cpp).
struct MicroKernel {
  int a = -1, b = -1, tile = -1;  ///< buffer slots and the (array) local written
  Id tile_at = kNone;             ///< the tile's first element in `tile`; none: 0
  bool packed_a = true;
  int b_rows = -1;                ///< B in place: the buffer slot of its row offsets; -1: packed
  Id k = kNone, b_base = kNone;
  Id cols = kNone;                ///< B in place: columns read, at most NR
  std::vector<Id> a_rows = {};
};

/// Statements run in order. Expressions are evaluated where a statement uses them, so a
/// load sees every store before it, and each Store evaluates all its values before it
/// writes any (a result written into a donated buffer cannot clobber an element another
/// result of the same statement still reads). Two iterations of a loop nest store to one
/// element only at offsets that read data (a scatter): a nest of stores at offsets of index
/// arithmetic that reads nothing it stores may run its iterations in another order (tier 0
/// inverts such nests, tier0_nests.cpp).
/// A Fold combines a value into a local accumulator (`l = op(l, value)`, op Add, Maximum or
/// Minimum); its order is the loops' order, except that a float sum may keep partial sums
/// in vector lanes (the same lanes on every run, whatever the thread count).
/// A Check ends the kernel when its condition is false: it writes the offending value to
/// its status buffer (one Int64, which any failing thread may write) and returns its code,
/// the kernel status word (kernel_abi.h); the runtime reports it and assigns no result.
struct Stmt {
  enum class Kind : uint8_t { For, Store, Assign, Fold, Matmul, Check };
  Kind kind;
  int slot = -1;                ///< For: its variable; Assign, Fold: the local; Check: the status buffer
  int code = 0;                 ///< Check: its code, 1 for the kernel's first check, 2 for the next
  ir::OpKind op = ir::OpKind::Add;  ///< Fold: the combine
  Id lo = kNone, hi = kNone;    ///< For: [lo, hi)
  std::vector<int> buffers = {};  ///< Store: per value, its buffer slot
  std::vector<Id> offsets = {};   ///< Store: per value, its element; Assign, Fold: the element (array local) or none
  std::vector<Id> values = {};    ///< Store: the values; Assign, Fold: the one value; Check: the
                                  ///< condition (Bool) and the offending value (Int64)
  std::vector<Stmt> body = {};    ///< For
  MicroKernel micro = {};         ///< Matmul
};

/// A buffer of the frame: its element type, and whether the kernel writes it.
struct Buffer {
  DType dtype;
  bool written = false;
};

/// A kernel-local variable: a fold's accumulator, or an array (a matmul tile).
struct Local {
  DType dtype;
  int64_t size = 1;  ///< elements; more than one: an array indexed by Local's operand
};

/// One kernel. Its frame (buffers, dims, scalars) is numbered in order of first use, so its
/// text does not depend on the graph it came from; where each slot is bound is the plan's
/// KernelFrame, kept outside it.
struct Kernel {
  std::string kind;           ///< what one iteration of the parallel loop is: element, row, panel, tile
  std::vector<Buffer> buffers;
  int num_dims = 0;
  int num_scalars = 0;
  std::vector<Local> locals;
  int num_vars = 0;
  int num_checks = 0;
  std::vector<Expr> exprs;
  Id count = kNone;           ///< iterations of the parallel loop, over dims
  Id work = kNone;            ///< elements of work in one iteration (the runtime's split hint)
  std::vector<Stmt> body;     ///< runs iterations [Begin, End) of it
};

/// Builds a Kernel: expressions are hash-consed (an expression built twice is one Id),
/// constant index arithmetic is folded, and (x / d) * d + x % d is x (also as the last two
/// terms of a sum).
class Builder {
 public:
  Builder() = default;
  /// Continues `kernel` (a pass reshaping its nest): an expression it has is found again, not
  /// added twice.
  explicit Builder(Kernel kernel);

  Kernel& kernel() { return kernel_; }
  /// The kernel, without the expressions nothing uses (renumbered in their order).
  Kernel take();

  Id constant(DType dtype, int64_t bits);
  Id index(int64_t value) { return constant(DType::Int64, value); }
  Id float_constant(DType dtype, double value);
  Id begin() { return add({ExprKind::Begin, DType::Int64}); }
  Id end() { return add({ExprKind::End, DType::Int64}); }
  Id dim(int slot) { return add({ExprKind::Dim, DType::Int64, 0, slot}); }
  Id scalar(int slot, DType dtype) { return add({ExprKind::Scalar, dtype, 0, slot}); }
  Id load(int buffer, Id offset);
  Id local(int slot, Id offset = kNone);
  Id op(ir::OpKind op, DType dtype, std::vector<Id> operands);
  Id random(ir::OpKind op, DType dtype, Id seed, Id counter);
  Id arith(IndexOp op, Id a, Id b);
  Id add(Id a, Id b) { return arith(IndexOp::Add, a, b); }
  Id sub(Id a, Id b) { return arith(IndexOp::Sub, a, b); }
  Id mul(Id a, Id b) { return arith(IndexOp::Mul, a, b); }
  Id div(Id a, Id b) { return arith(IndexOp::Div, a, b); }
  Id rem(Id a, Id b) { return arith(IndexOp::Rem, a, b); }
  Id min(Id a, Id b) { return arith(IndexOp::Min, a, b); }
  Id max(Id a, Id b) { return arith(IndexOp::Max, a, b); }
  Id ceil_div(Id a, Id b) { return div(add(a, sub(b, index(1))), b); }
  Id convert(Id value, DType to);
  /// `cond ? a : b`.
  Id select(Id cond, Id a, Id b);
  /// The value of a constant expression, or none.
  std::optional<int64_t> constant_value(Id e) const;
  DType dtype(Id e) const { return kernel_.exprs[e].dtype; }

  int new_buffer(DType dtype) {
    kernel_.buffers.push_back({dtype});
    return static_cast<int>(kernel_.buffers.size()) - 1;
  }
  int new_dim() { return kernel_.num_dims++; }
  /// A loop variable: its slot (a For statement's) and its value.
  std::pair<int, Id> new_var() {
    const int var = kernel_.num_vars++;
    return {var, add({ExprKind::Var, DType::Int64, 0, var})};
  }
  int new_scalar() { return kernel_.num_scalars++; }
  int new_local(DType dtype, int64_t size = 1) {
    kernel_.locals.push_back({dtype, size});
    return static_cast<int>(kernel_.locals.size()) - 1;
  }

  /// Rewrites `body` (statements of this kernel) with loop variables replaced: in every
  /// expression it uses, the variable of slot s becomes values.at(s) (expressions rebuilt,
  /// folded and hash-consed as new ones are).
  void substitute(std::vector<Stmt>& body, const absl::flat_hash_map<int, Id>& values);
  /// The same, and scalar locals replaced by elements of array locals: where `elements` maps
  /// local s to (a, i), a read of s becomes a read of a[i], and an assignment or fold of s one
  /// of a[i] (i is not rewritten).
  void substitute(std::vector<Stmt>& body, const absl::flat_hash_map<int, Id>& values,
                  const absl::flat_hash_map<int, std::pair<int, Id>>& elements);

  /// Statements go to the innermost open loop (or the kernel's body).
  void store(std::vector<int> buffers, std::vector<Id> offsets, std::vector<Id> values);
  void store(int buffer, Id offset, Id value) {
    store(std::vector<int>{buffer}, std::vector<Id>{offset}, std::vector<Id>{value});
  }
  void assign(int local, Id value, Id offset = kNone);
  void fold(int local, ir::OpKind combine, Id value);
  void matmul(MicroKernel micro);
  /// Fails the kernel with `value` unless `cond` holds; returns the check's code. It is placed
  /// in the innermost open loop whose variable it uses (before that loop's later
  /// statements), so a check of a row's index runs once per row, not per element; one that
  /// reads a local or a buffer the kernel writes stays where it is built.
  int check(Id cond, Id value, int status_buffer);
  /// for (v = lo; v < hi; ++v) body(v).
  template <class F>
  void loop(Id lo, Id hi, F&& body) {
    const auto [var, value] = new_var();
    Stmt& s = open_.emplace_back(Stmt{Stmt::Kind::For, var});
    s.lo = lo;
    s.hi = hi;
    body(value);
    Stmt done = std::move(open_.back());
    open_.pop_back();
    emit(std::move(done));
  }

 private:
  Id add(Expr e);
  void emit(Stmt s);
  /// x where `multiple` is (x / d) * d (either order) and `rest` is x % d: an index taken
  /// apart by a shape and put back together (a reshape's view of a reshape), else none.
  std::optional<Id> recombined(Id multiple, Id rest) const;

  /// How many of the open loops `e` depends on: 1 + the position in open_ of the innermost
  /// loop whose variable it uses, or 0; all of them if it reads what the kernel writes.
  size_t depth(Id e) const;

  Kernel kernel_;
  /// Whether `e` is index arithmetic of loop variables, dims and constants alone.
  bool index_arithmetic(Id e) const;

  std::vector<Stmt> open_;  // loops being built, innermost last
  absl::flat_hash_map<Expr, Id> ids_;
};

/// The kernel's text: its frame, its expressions (one per line, %N), its loop nest.
std::string print(const Kernel& kernel);

/// The kernel as bytes, everything its text says: what its content hash, the name the
/// caches know it by, is taken of, at a fraction of the cost of printing it.
std::string encode(const Kernel& kernel);

/// Checks a kernel's well-formedness: operands before users, dtypes agree (loads and stores
/// with their buffers, index arithmetic on Int64, conditions Bool), slots in range, loop
/// variables used only inside their loops, stored buffers marked written. Returns the first
/// problem, or an empty string.
std::string verify(const Kernel& kernel);

}  // namespace lazyjit::kir
