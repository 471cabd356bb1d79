// Scan and scatter kernels to kernel IR: the kernels that walk one dim in order. Both run one
// parallel iteration per line along that dim, so the order in which a line's elements are
// combined is fixed, whatever the thread count.
#include <vector>

#include "lowering/fusion.h"
#include "lowering/kernel_context.h"

namespace lazyjit::lowering {
namespace {

using ir::OpKind;
using kir::Id;
using Index = GraphValues::Index;

/// The domain's index of line `line` (its position outside `dim`, row-major), with `dim`
/// left for the caller.
std::vector<Id> line_dims(KernelContext& c, int node, Id line, int dim) {
  const int rank = c.node(node).rank();
  std::vector<Id> dims(rank, c.i64(0));
  const Id inner = c.v.numel(node, dim + 1, rank);
  c.v.unravel_into(node, c.k.rem(line, inner), dim + 1, rank, dims);
  c.v.unravel_into(node, c.k.div(line, inner), 0, dim, dims);
  return dims;
}

/// The lines of `node` along `dim`: its elements outside it.
Id lines(KernelContext& c, int node, int dim) {
  return c.k.mul(c.v.numel(node, 0, dim), c.v.numel(node, dim + 1, c.node(node).rank()));
}

}  // namespace

/// One line per iteration: a local accumulator (float64 for float32, as the interpreter and
/// PyTorch's CPU scans), assigned in index order, stored after each element.
void build_scan(KernelContext& c) {
  const int s = c.spec.stages[0];
  const ir::Node& scan = c.node(s);
  const int operand = c.graph.operands[s][0];
  const int dim = static_cast<int>(scan.attrs()[0]);
  const ir::FoldInfo rule = *ir::scan_info(scan.op());
  const DType acc_dtype = is_floating(scan.dtype()) ? DType::Float64 : scan.dtype();
  const std::vector<int> outputs = c.output_buffers(c.node(s).dtype());
  const Id size = c.v.dim(s, dim);
  c.k.loop(c.k.begin(), c.k.end(), [&](Id line) {
    std::vector<Id> dims = line_dims(c, s, line, dim);
    const int acc = c.k.new_local(acc_dtype);
    c.k.assign(acc, c.fold_start(rule.start, acc_dtype));
    c.k.loop(c.i64(0), size, [&](Id i) {
      dims[dim] = i;
      const Id x = c.k.convert(c.k.convert(c.v.at(operand, Index{dims}), scan.dtype()), acc_dtype);
      c.k.assign(acc, c.k.op(rule.combine, acc_dtype, {c.k.local(acc), x}));
      const Id value = c.k.convert(c.k.local(acc), scan.dtype());
      c.k.store(outputs, std::vector<Id>(outputs.size(), c.v.ravel(s, dims)), std::vector<Id>(outputs.size(), value));
    });
  });
  c.k.kernel().count = lines(c, s, dim);
  c.k.kernel().work = size;
}

namespace {

/// A scatter's kernel: one line per iteration, as runs along the innermost dim (unless that is
/// the scattered one). The input's line is copied to the first output, then src's elements are
/// added (or stored) at their checked indices in src's index order, then the line is copied
/// to the other outputs. An index_scatter reads one index per step along dim and updates the
/// whole run with a unit-stride loop; a scatter reads an index per element, so it walks each
/// line on its own.
class Scatter {
 public:
  explicit Scatter(KernelContext& c)
      : c(c), s(c.spec.stages[0]), rank(c.node(s).rank()), input(c.graph.operands[s][0]),
        indices(c.graph.operands[s][1]), src(c.graph.operands[s][2]), dim(static_cast<int>(c.node(s).attrs()[0])),
        accumulate(c.node(s).attrs()[1] == 1), per_element(c.node(s).op() == OpKind::Scatter), outputs(c.output_buffers(c.node(s).dtype())),
        size(c.v.dim(s, dim)), steps(per_element ? c.v.dim(indices, dim) : c.v.dim(src, dim)) {}

  void build() {
    const bool runs = dim < rank - 1;
    c.for_runs(runs ? c.v.dim(s, rank - 1) : c.i64(1), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> dims = line_dims(c, s, runs ? base : run, dim);
      copy_line(dims, j0, j1, outputs[0], -1);
      per_element ? scatter_elements(dims, j0, j1) : scatter_slices(dims, j0, j1);
      for (size_t o = 1; o < outputs.size(); ++o) copy_line(dims, j0, j1, outputs[o], outputs[0]);
    });
    c.k.kernel().count = lines(c, s, dim);
    c.k.kernel().work = c.k.add(size, steps);
  }

 private:
  /// dims with the innermost one set to j, when the runs are along it.
  void at_column(std::vector<Id>& dims, Id j) const {
    if (dim < rank - 1) dims[rank - 1] = j;
  }

  /// The line's elements [j0, j1) of the innermost dim, from the input (or `from_buffer`).
  void copy_line(std::vector<Id> dims, Id j0, Id j1, int to, int from_buffer) {
    c.k.loop(c.i64(0), size, [&](Id r) {
      dims[dim] = r;
      c.k.loop(j0, j1, [&](Id j) {
        at_column(dims, j);
        const Id at = c.v.ravel(s, dims);
        c.k.store(to, at, from_buffer < 0 ? c.v.at(input, Index{dims}) : c.k.load(from_buffer, at));
      });
    });
  }

  /// src's element at `from` added into (or stored at) the line `line` at the index `index` reads.
  void update(const std::vector<Id>& from, const std::vector<Id>& line, const Index& index) {
    std::vector<Id> to = line;
    to[dim] = c.v.checked_index(s, c.v.at(indices, index), s, dim);
    const Id at = c.v.ravel(s, to);
    const Id value = c.v.at(src, Index{from});
    const int out = outputs[0];
    c.k.store(out, at, accumulate ? c.k.op(OpKind::Add, c.node(s).dtype(), {c.k.load(out, at), value}) : value);
  }

  /// scatter: an index per element, on the lines the index reaches.
  void scatter_elements(std::vector<Id> dims, Id j0, Id j1) {
    c.k.loop(j0, j1, [&](Id j) {
      at_column(dims, j);
      // The index may be smaller than the input outside dim; sizes are not in the key, so
      // every dim is compared but the unit dims of both.
      Id covered = c.k.constant(DType::Bool, 1);
      for (int d = 0; d < rank; ++d) {
        if (d == dim || (c.node(indices).shape()[d] == 1 && c.node(s).shape()[d] == 1)) continue;
        covered = c.k.op(OpKind::LogicalAnd, DType::Bool,
                         {covered, c.k.op(OpKind::Lt, DType::Bool, {dims[d], c.v.dim(indices, d)})});
      }
      c.k.loop(c.i64(0), c.k.select(covered, steps, c.i64(0)), [&](Id i) {
        std::vector<Id> at = dims;
        at[dim] = i;
        update(at, dims, Index{at});
      });
    });
  }

  /// index_scatter: one index per step along dim, for the whole run.
  void scatter_slices(std::vector<Id> dims, Id j0, Id j1) {
    c.k.loop(c.i64(0), steps, [&](Id i) {
      c.k.loop(j0, j1, [&](Id j) {
        at_column(dims, j);
        std::vector<Id> at = dims;
        at[dim] = i;
        update(at, dims, Index{{i}});
      });
    });
  }

  KernelContext& c;
  const int s, rank, input, indices, src, dim;
  const bool accumulate, per_element;
  const std::vector<int> outputs;
  const Id size, steps;
};

}  // namespace

void build_scatter(KernelContext& c) { Scatter(c).build(); }

}  // namespace lazyjit::lowering
