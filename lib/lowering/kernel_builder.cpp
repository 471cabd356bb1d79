// Planned kernels to kernel IR: what every kind shares, the dispatch on the kind, and the
// elementwise kernels (collapsed, or over views).
#include "lowering/kernel_builder.h"

#include <algorithm>

#include "ir/dtype_dispatch.h"
#include "ir/scalar_semantics.h"
#include "ir/structured.h"
#include "lowering/fusion.h"
#include "lowering/kernel_context.h"

namespace lazyjit::lowering {

using ir::OpKind;
using kir::Id;
using Index = GraphValues::Index;

int KernelContext::output_buffer(int r) const {
  for (const Alias& a : aliases) {
    if (a.result == r) return a.parameter;
  }
  return num_parameters + r;
}

void KernelContext::store_results(const std::vector<int>& results, Id offset, const Index& index, bool below_reshapes,
                                  const std::vector<std::pair<int, int>>& extra) {
  std::vector<int> buffers;
  std::vector<Id> values;
  for (int r : results) {
    const int root = graph.roots[r];
    const int n = below_reshapes && stored_value(graph, root) == spec.domain ? spec.domain : root;
    values.push_back(v.at(n, index));
    buffers.push_back(v.buffer(output_buffer(r), v.dtype(n)));
  }
  for (const auto& [n, buffer] : extra) {
    values.push_back(v.at(n, index));
    buffers.push_back(v.buffer(buffer, v.dtype(n)));
  }
  std::vector<Id> offsets(values.size(), offset);
  if (!values.empty()) k.store(std::move(buffers), std::move(offsets), std::move(values));
}

std::vector<int> KernelContext::output_buffers(DType dtype) {
  std::vector<int> outputs;
  for (int r : spec.results) outputs.push_back(v.buffer(output_buffer(r), dtype));
  for (int t : spec.temps) outputs.push_back(v.buffer(plan.buffer_of[plan.temps[t].node], dtype));
  return outputs;
}

Id KernelContext::fold_start(ir::FoldStart start, DType dtype) {
  return ir::dispatch_dtype(dtype, [&]<class T>(T) {
    const T value = ir::semantics::fold_start<T>(start);
    if constexpr (std::is_floating_point_v<T>) {
      return k.float_constant(dtype, static_cast<double>(value));
    } else {
      return k.constant(dtype, static_cast<int64_t>(value));
    }
  });
}

void KernelContext::for_runs(Id inner, const std::function<void(Id, Id, Id, Id)>& body) {
  k.loop(k.div(k.begin(), inner), k.ceil_div(k.end(), inner), [&](Id run) {
    const Id base = k.mul(run, inner);
    body(run, base, k.max(k.sub(k.begin(), base), i64(0)), k.min(k.sub(k.end(), base), inner));
  });
}

void KernelContext::for_elements(int node, const std::function<void(const GraphValues::Index&)>& body) {
  const int rank = graph.nodes[node]->rank();
  for_runs(rank == 0 ? i64(1) : v.dim(node, rank - 1), [&](Id run, Id base, Id j0, Id j1) {
    std::vector<Id> dims(rank, i64(0));
    if (rank > 1) v.unravel_into(node, run, 0, rank - 1, dims);
    k.loop(j0, j1, [&](Id j) {
      if (rank > 0) dims[rank - 1] = j;
      body(Index{dims, k.add(base, j)});
    });
  });
}

namespace {

class Elementwise {
 public:
  explicit Elementwise(KernelContext& c) : c(c) {}

  /// Elements of the domain, as runs along its innermost dim: the outer index is derived
  /// once per run, the inner loop is unit-stride for contiguous reads.
  void elementwise() {
    std::vector<std::pair<int, int>> cut;
    if (c.spec.cut >= 0) cut.emplace_back(c.spec.cut, c.plan.buffer_of[c.spec.cut]);
    if (c.spec.results.size() + cut.size() == 1) {
      // A lone value stored: a cut, or a result that reshapes a value (it holds that value's
      // elements in the same order). It is iterated in its own shape, where the views below
      // it read elements without dividing the linear index per element.
      const int r = cut.empty() ? c.spec.results[0] : -1;
      const int stored = cut.empty() ? stored_value(c.graph, c.graph.roots[r]) : c.spec.cut;
      const int out = cut.empty() ? c.output_buffer(r) : cut[0].second;
      const bool computes = stored == c.spec.cut || c.plan.buffer_of[stored] < 0;  // else read back
      if (computes && by_parts(stored, out)) return;
      c.for_elements(stored, [&](const Index& index) {
        const Id value = c.v.at(stored, index);
        c.k.store(c.v.buffer(out, c.v.dtype(stored)), index.linear, value);
      });
      return;
    }
    c.for_elements(c.spec.domain, [&](const Index& index) { c.store_results(c.spec.results, index.linear, index, false, cut); });
  }

  /// A cat along its innermost dim that this kernel computes, stored into graph buffer `out`
  /// part by part: each run's positions of one part are a loop of their own that evaluates
  /// that part alone (the cat's select evaluates every part at every element). False for any
  /// other node.
  bool by_parts(int node, int out) {
    const ir::Node& n = c.node(node);
    const int rank = n.rank();
    if (n.op() != OpKind::Cat || n.attrs()[0] != rank - 1) return false;
    c.for_runs(c.v.dim(node, rank - 1), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> dims(rank, c.i64(0));
      if (rank > 1) c.v.unravel_into(node, run, 0, rank - 1, dims);
      Id start = c.i64(0);
      for (int part : c.graph.operands[node]) {
        const Id width = c.v.dim(part, rank - 1);
        const Id end = c.k.add(start, width);
        const Id lo = c.k.max(j0, start), hi = c.k.min(j1, end);
        if (reshapes(part)) {
          reshaped_part(part, c.k.add(c.k.mul(run, width), c.k.sub(lo, start)), lo, hi, base, out);
        } else {
          c.k.loop(lo, hi, [&](Id j) {
            std::vector<Id> at = dims;
            at[rank - 1] = c.k.sub(j, start);
            const Id value = c.v.at(part, Index{std::move(at)});
            c.k.store(c.v.buffer(out, n.dtype()), c.k.add(base, j), value);
          });
        }
        start = end;
      }
    });
    return true;
  }

  /// Whether a cat's `part` reshapes a value of another rank (not only unit dims): read by
  /// its index, each of its elements would divide by that value's dims.
  bool reshapes(int part) const {
    const ir::Node& p = c.node(part);
    if (p.op() != OpKind::Reshape) return false;
    const ir::Node& from = c.node(c.graph.operands[part][0]);
    return !ir::unit_dims_only(from.shape(), p.shape()) && from.rank() > 1;
  }

  /// Positions [lo, hi) of a cat's row `base`, from a part that reshapes value `from`: the
  /// part's elements from `first` on (its linear index) are `from`'s in row-major order. They
  /// are read a row of `from`'s last dim at a time: a loop over those rows, each unravelled
  /// once, around a loop along the last dim whose reads and stores are strided (no division
  /// per element, and no state carried from one element to the next: a transformer's head
  /// merge reads [B, T, H, hd] into [B*T, H*hd] as runs of hd).
  void reshaped_part(int part, Id first, Id lo, Id hi, Id base, int out) {
    const int from = c.graph.operands[part][0];
    const int rank = c.node(from).rank();
    const Id count = c.k.max(c.k.sub(hi, lo), c.i64(0));
    const Id last = c.v.dim(from, rank - 1);
    const Id row_size = c.k.max(last, c.i64(1));  // a dim of 0 has no elements: never divided by
    const Id stop = c.k.add(first, count);  // one past the last linear index
    c.k.loop(c.k.div(first, row_size), c.k.ceil_div(stop, row_size), [&](Id row) {
      std::vector<Id> at(rank, c.i64(0));
      c.v.unravel_into(from, row, 0, rank - 1, at);
      const Id row_first = c.k.mul(row, row_size);
      const Id t0 = c.k.max(c.k.sub(first, row_first), c.i64(0));
      const Id t1 = c.k.min(c.k.sub(stop, row_first), last);
      const Id shift = c.k.sub(c.k.add(base, lo), first);  // out's offset of linear index 0
      c.k.loop(t0, t1, [&](Id t) {
        at[rank - 1] = t;
        const Id value = c.v.at(from, Index{at});
        c.k.store(c.v.buffer(out, c.node(part).dtype()), c.k.add(c.k.add(shift, row_first), t), value);
      });
    });
  }

  /// A kernel of leaves and elementwise ops alone: adjacent dims that every indexed leaf
  /// broadcasts alike are collapsed into one, and each leaf's offset is derived once per run
  /// of the innermost collapsed dim (unit-stride or invariant there: what the vectoriser needs).
  void collapsed() {
    const int d = c.spec.domain;
    const ir::Node& domain = c.node(d);
    const int rank = domain.rank();
    const std::vector<bool> needed = region_of(c.graph, c.plan, c.spec);
    std::vector<int> leaves;  // indexed leaves: parameters and aranges
    for (size_t i = 0; i < c.graph.nodes.size(); ++i) {
      const OpKind op = c.graph.nodes[i]->op();
      if (needed[i] && (op == OpKind::Parameter || op == OpKind::Arange)) leaves.push_back(static_cast<int>(i));
    }
    auto broadcast = [&](int leaf, int dim) {
      const int offset = rank - c.node(leaf).rank();
      return dim < offset || c.node(leaf).shape()[dim - offset] == 1;
    };
    std::vector<std::vector<int>> groups;  // collapsed dims, outermost first
    std::vector<bool> previous;
    for (int dim = 0; dim < rank; ++dim) {
      if (domain.shape()[dim] == 1) continue;
      std::vector<bool> pattern;
      for (int leaf : leaves) pattern.push_back(broadcast(leaf, dim));
      if (!groups.empty() && pattern == previous) groups.back().push_back(dim);
      else groups.push_back({dim});
      previous = std::move(pattern);
    }
    std::vector<Id> sizes;
    for (const auto& group : groups) {
      Id size = c.i64(1);
      for (int dim : group) size = c.k.mul(size, c.v.dim(d, dim));
      sizes.push_back(size);
    }
    const size_t g_count = groups.size();
    std::vector<std::vector<Id>> strides(leaves.size(), std::vector<Id>(g_count, c.i64(0)));
    for (size_t l = 0; l < leaves.size(); ++l) {
      Id stride = c.i64(1);
      for (size_t g = g_count; g-- > 0;) {
        if (broadcast(leaves[l], groups[g][0])) continue;
        strides[l][g] = stride;
        stride = c.k.mul(stride, sizes[g]);
      }
    }
    std::vector<std::pair<int, int>> cut;
    if (c.spec.cut >= 0) cut.emplace_back(c.spec.cut, c.plan.buffer_of[c.spec.cut]);
    c.for_runs(sizes.empty() ? c.i64(1) : sizes.back(), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> index(g_count, c.i64(0));  // the run's index over the outer groups
      Id rest = run;
      for (size_t g = g_count >= 1 ? g_count - 1 : 0; g-- > 0;) {
        index[g] = c.k.rem(rest, sizes[g]);
        rest = c.k.div(rest, sizes[g]);
      }
      std::vector<Id> row_offsets(leaves.size(), c.i64(0));
      for (size_t l = 0; l < leaves.size(); ++l) {
        for (size_t g = 0; g + 1 < g_count; ++g) row_offsets[l] = c.k.add(row_offsets[l], c.k.mul(index[g], strides[l][g]));
      }
      c.k.loop(j0, j1, [&](Id j) {
        for (size_t l = 0; l < leaves.size(); ++l) {
          const int n = leaves[l];
          const bool varies = g_count > 0 && !broadcast(n, groups.back()[0]);
          const Id offset = varies ? c.k.add(row_offsets[l], j) : row_offsets[l];
          c.v.bind(n, c.node(n).op() == OpKind::Arange ? c.k.convert(offset, c.node(n).dtype()) : c.v.load(n, c.graph.parameter_slot[n], offset));
        }
        const Id at = c.k.add(base, j);
        c.store_results(c.spec.results, at, Index{{}, at}, false, cut);
        for (int n : leaves) c.v.unbind(n);
      });
    });
  }

  /// The domain index of `linear` over its first `count` kept dims (`kept`, ascending; the

 private:
  KernelContext& c;
};

}  // namespace

void build_elementwise(KernelContext& c) {
  Elementwise builder(c);
  c.spec.collapsed ? builder.collapsed() : builder.elementwise();
  c.k.kernel().count = c.v.numel(c.spec.domain, 0, c.node(c.spec.domain).rank());
  c.k.kernel().work = c.i64(1);
}

void build_collective(KernelContext& c) {
  const int node = c.spec.stages[0];
  const int operand = c.graph.operands[node][0];
  const DType dtype = c.node(node).dtype();
  // The result's buffer is in the frame even when the operand is staged elsewhere: the
  // runtime finds both there, and allocates the result before this kernel runs.
  const CollectiveBuffers buffers = collective_buffers(c.plan, c.spec, c.num_parameters, static_cast<int>(c.graph.roots.size()));
  c.v.buffer(buffers.out, dtype);
  const int staged = c.v.buffer(buffers.in, dtype);
  c.for_elements(operand, [&](const Index& index) { c.k.store(staged, index.linear, c.v.at(operand, index)); });
  c.k.kernel().count = c.v.numel(operand, 0, c.node(operand).rank());
  c.k.kernel().work = c.i64(1);
}

kir::Kernel build_kernel(const ir::Graph& graph, const KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases) {
  KernelContext c(graph, plan, spec, aliases);
  std::string& per = c.k.kernel().kind;  // what one iteration of the parallel loop is
  switch (spec.kind) {
    case KernelKind::Elementwise: per = "element"; build_elementwise(c); break;
    case KernelKind::Rows: per = "row"; build_rows(c); break;
    case KernelKind::PackA: per = "panel"; build_pack(c, /*left=*/true); break;
    case KernelKind::PackB: per = "panel"; build_pack(c, /*left=*/false); break;
    case KernelKind::RowsOfB: per = "row"; build_rows_of_b(c); break;
    case KernelKind::Matmul: per = "tile"; build_matmul(c); break;
    case KernelKind::Scan: per = "line"; build_scan(c); break;
    case KernelKind::Scatter: per = "line"; build_scatter(c); break;
    case KernelKind::Collective: per = "element"; build_collective(c); break;
  }
  c.v.finish();
  return c.k.take();
}

}  // namespace lazyjit::lowering
