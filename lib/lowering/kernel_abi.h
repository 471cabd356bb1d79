// The kernel ABI shared by lowering (which emits kernels), codegen (which compiles them) and
// the runtime (which calls them). See DESIGN.md section 7.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace lazyjit::lowering {

/// Every kernel has this signature and runs the iterations [begin, end) of its outermost
/// parallel loop (elements, rows, panels or tiles: see KernelKind). Its arguments are its own
/// frame (KernelFrame; the kernel IR's frame, kir.h), numbered in the order its kernel IR
/// first uses them, so its code does not depend on the graph around it:
///   args: the buffers it reads and writes (and its status record, one int64, if it checks
///         data), then its scalar frame if it reads scalars (8 bytes per scalar: an int64 or
///         a double; a Rand/Randn leaf's seed)
///   dims: the sizes it reads
/// It returns its status word: 0, or the code of the check that failed (1 for its first,
/// KernelFrame::checks), with the offending value in its status record. Generated code has
/// no threads of its own; the runtime splits [0, count) among threads.
using KernelFn = int32_t (*)(void* const* args, const int64_t* dims, int64_t begin, int64_t end);

/// What a kernel's check tests, for the runtime's error: an index of `node` (an IndexSelect
/// or a Gather) must be in [0, the shape-table entry `bound`).
struct KernelCheck {
  static constexpr int kNonzero = -1;  ///< `bound` of a divisor's check
  int node;
  int bound;  ///< the shape-table offset of the dim an index must be below, or kNonzero
};

/// Where a kernel's arguments come from in the graph's tables, filled when its kernel IR is built.
/// The graph's buffer array holds the parameters (in slot order), one buffer per result, the
/// scalar table, then the plan's temporaries (scalar_table_index, temp_buffer_index); its
/// shape table holds every node's dims in post-order (shape_table.h).
struct KernelFrame {
  static constexpr int kScalars = -1;  ///< in `buffers`: the kernel's scalar frame
  static constexpr int kStatus = -2;   ///< in `buffers`: the run's status record
  std::vector<int> buffers = {};  ///< per argument: its index in the graph's buffer array, kScalars or kStatus
  std::vector<int> dims = {};     ///< per dim slot: its offset in the graph's shape table
  std::vector<int> scalars = {};  ///< per scalar slot: its index in the graph's scalar table
  std::vector<KernelCheck> checks = {};  ///< per check code - 1: what it tests
};

/// A kernel's frame filled from a graph's tables, ready for a call.
struct BoundFrame {
  std::vector<void*> args;
  std::vector<int64_t> dims;
  std::vector<uint64_t> scalars;
};

/// Fills `bound` (kept across calls to reuse its memory) with `frame`'s slots from a graph's
/// buffer array, shape table and scalar table (8 bytes per slot), and the run's status record.
inline void bind_frame(const KernelFrame& frame, void* const* buffers, const int64_t* shapes, const void* scalar_table,
                       int64_t* status, BoundFrame& bound) {
  bound.scalars.resize(frame.scalars.size());
  for (size_t i = 0; i < frame.scalars.size(); ++i) {
    std::memcpy(&bound.scalars[i], static_cast<const char*>(scalar_table) + 8 * frame.scalars[i], 8);
  }
  bound.args.resize(frame.buffers.size());
  for (size_t i = 0; i < frame.buffers.size(); ++i) {
    const int b = frame.buffers[i];
    bound.args[i] = b == KernelFrame::kScalars  ? static_cast<void*>(bound.scalars.data())
                    : b == KernelFrame::kStatus ? static_cast<void*>(status)
                                                : buffers[b];
  }
  bound.dims.resize(frame.dims.size());
  for (size_t i = 0; i < frame.dims.size(); ++i) bound.dims[i] = shapes[frame.dims[i]];
}

/// Integer arithmetic over a graph's shape table: a plan's launch geometry (from each
/// kernel's kernel IR) and its temporaries' sizes. Concrete dims are not in the graph key,
/// so the runtime evaluates it once per run, without the graph. Steps come after their
/// operands; values are counts and sizes (never negative), so Div is plain division.
class SizeProgram {
 public:
  enum class Op : uint8_t { Const, Dim, Add, Sub, Mul, Div, Rem, Min, Max };

  int constant(int64_t value) { return push({Op::Const, value, 0}); }
  /// Entry `offset` of the shape table.
  int dim(int offset) { return push({Op::Dim, offset, 0}); }
  int apply(Op op, int a, int b) { return push({op, a, b}); }
  int size() const { return static_cast<int>(steps_.size()); }

  /// Every step's value over `shapes`, into `values` (kept across calls to reuse its memory).
  void evaluate(const int64_t* shapes, std::vector<int64_t>& values) const {
    values.resize(steps_.size());
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Step& s = steps_[i];
      if (s.op == Op::Const || s.op == Op::Dim) {
        values[i] = s.op == Op::Const ? s.a : shapes[s.a];
        continue;
      }
      const int64_t a = values[s.a], b = values[s.b];
      switch (s.op) {
        case Op::Const:
        case Op::Dim: break;
        case Op::Add: values[i] = a + b; break;
        case Op::Sub: values[i] = a - b; break;
        case Op::Mul: values[i] = a * b; break;
        case Op::Div: values[i] = b == 0 ? 0 : a / b; break;
        case Op::Rem: values[i] = b == 0 ? 0 : a % b; break;
        case Op::Min: values[i] = a < b ? a : b; break;
        case Op::Max: values[i] = a < b ? b : a; break;
      }
    }
  }

 private:
  struct Step {
    Op op;
    int64_t a;  ///< Const: the value; Dim: the shape-table offset; else a step
    int b;      ///< a step (unused by Const and Dim)
  };
  int push(Step step) {
    steps_.push_back(step);
    return static_cast<int>(steps_.size()) - 1;
  }
  std::vector<Step> steps_;
};

enum class KernelKind : uint8_t {
  Elementwise,  ///< one iteration per element of the domain
  Rows,         ///< one iteration per row: the domain's elements that agree outside `reduced`;
                ///< the stages fold the row, then the row's results are stored
  PackA,        ///< one iteration per 6-row panel of the left matmul operand
  PackB,        ///< one iteration per column panel of the right matmul operand
  RowsOfB,      ///< one iteration per row of a right matmul operand read in place: the row's
                ///< offset in its buffer (window_in_place)
  Matmul,       ///< one iteration per output tile: micro-kernel, then the fused epilogue
  Scan,         ///< one iteration per line along the scanned dim: a running combine in order
  Scatter,      ///< one iteration per position outside the scattered dim: the input's line
                ///< copied, then src's elements written at their indices in order
  Collective,   ///< one iteration per element of the collective's operand, stored where the
                ///< collective reads it (its own buffer, or a staging temporary); then the
                ///< runtime carries out the collective (ir/collectives.h)
};

/// What the runtime needs to launch one kernel of a lowered graph, and what its emitter
/// needs to write it. Node numbers index graph.nodes.
struct KernelSpec {
  std::string symbol = {};          ///< the function's name in the compiled module
  KernelKind kind = KernelKind::Elementwise;
  int domain = -1;                  ///< the node whose shape is iterated (matmul: the product)
  std::vector<int> reduced = {};    ///< Rows: dims of the domain folded within a row, ascending
  std::vector<int> stages = {};     ///< Rows: reduction nodes computed per row, in post-order;
                                    ///< Scan, Scatter, Collective: that node
  std::vector<int> results = {};    ///< the results this kernel writes
  std::vector<int> temps = {};      ///< the temporary buffers this kernel writes
  bool collapsed = false;           ///< leaves and elementwise ops only: the collapsed loop nest
  std::vector<int> reads = {};      ///< parameter slots the kernel reads
  std::vector<int> direct_reads = {};  ///< of those, the ones read only at the element being written
  int cut = -1;                     ///< Elementwise: the node of a long chain this kernel stores for
                                    ///< later kernels (a temporary), instead of results
  KernelFrame frame = {};           ///< its arguments: filled when its kernel IR is built
  int count = -1;                   ///< iterations of its parallel loop: a step of KernelPlan::sizes,
  int work = -1;                    ///< and the elements of work in one (from its kernel IR)
};

/// A buffer the runtime allocates for one run of the graph, for values kernels pass on.
struct TempBuffer {
  enum class Kind : uint8_t { Value, PackedA, PackedB, RowsOfB, Staging };
  Kind kind;
  int node;  ///< Value: the node stored; packed, RowsOfB: the matmul whose operand it holds
             ///< (RowsOfB: K Int64 offsets of B's rows in place); staging:
             ///< the collective whose operand it holds (all_gather, reduce_scatter)
  int bytes = -1;  ///< its size: a step of KernelPlan::sizes
};

/// The kernels of a graph in the order they run, and the temporaries between them.
struct KernelPlan {
  std::vector<KernelSpec> kernels;
  std::vector<TempBuffer> temps;
  std::vector<int> buffer_of;  ///< per node: the buffer later kernels read its value from, or -1
  int collectives = 0;         ///< how many kernels are Collective: a run of a plan without any
                               ///< skips the ordering and agreeing of collectives
  std::vector<bool> cuts;      ///< per node: an elementwise or view node stored by a kernel of its
                               ///< own, so that no kernel computes a chain deeper than kMaxFusedDepth
  SizeProgram sizes;           ///< launch geometry and temporary sizes over the shape table
  std::vector<int> dim_class;  ///< per shape-table position: the one a kernel reads its size
                               ///< at (dim_classes in shape_table.h)
  std::vector<int> writer_of;  ///< per result: the kernel that writes it
  std::vector<std::vector<int>> donatable;  ///< per result: the parameter slots whose buffer it may
                                            ///< take over at a step barrier, if their shapes match
};

/// The deepest chain of elementwise and view ops one kernel computes; a deeper one is cut
/// into kernels that pass values through memory. Emitting and compiling a kernel costs more
/// than linear time in its depth, so bounded kernels make a long chain compile in linear time
/// (and keep the emitter's recursion shallow).
inline constexpr int kMaxFusedDepth = 128;

/// Register tiling of the matmul kernels for `dtype_size`-byte elements: MR rows by NR
/// columns of accumulators (two 64-byte vectors per row), MB rows per parallel tile.
struct MatmulTiling {
  int64_t mr, nr, mb;
};
inline MatmulTiling matmul_tiling(int64_t dtype_size) { return {6, 2 * 64 / dtype_size, 48}; }

/// A result written into a parameter's buffer (donation at the step barrier): the result
/// and the parameter have one shape and dtype, and the kernel reads each element of the
/// parameter before it writes that element of the result.
struct Alias {
  int result;
  int parameter;
  friend bool operator==(const Alias&, const Alias&) = default;
};

/// Index of the scalar table in a graph's buffer array; temporaries follow it.
inline int scalar_table_index(int num_parameters, int num_results) {
  return num_parameters + num_results;
}
inline int temp_buffer_index(int num_parameters, int num_results, int temp) {
  return num_parameters + num_results + 1 + temp;
}

}  // namespace lazyjit::lowering
