// Planned kernels to kernel IR: elementwise (collapsed or over views), row folds, column
// folds, operand packing, and the register-blocked matmul with its fused epilogue.
#include "lowering/kernel_builder.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#include "llvm/Support/ErrorHandling.h"
#include "lowering/fusion.h"
#include "lowering/graph_values.h"

namespace lazyjit::lowering {
namespace {

using ir::OpKind;
using kir::Id;
using Index = GraphValues::Index;

class KernelBuilder {
 public:
  KernelBuilder(const ir::Graph& graph, const KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases)
      : graph_(graph), plan_(plan), spec_(spec), aliases_(aliases),
        num_parameters_(static_cast<int>(graph.parameters.size())), v_(k_, graph, plan, spec, spec.frame) {}

  kir::Kernel build() {
    kir::Kernel& kernel = k_.kernel();
    switch (spec_.kind) {
      case KernelKind::Elementwise:
        kernel.kind = "element";
        spec_.collapsed ? collapsed() : elementwise();
        kernel.count = v_.numel(spec_.domain, 0, node(spec_.domain).rank());
        break;
      case KernelKind::Rows: kernel.kind = "row"; rows(); break;
      case KernelKind::PackA: kernel.kind = "panel"; pack(/*left=*/true); break;
      case KernelKind::PackB: kernel.kind = "panel"; pack(/*left=*/false); break;
      case KernelKind::Matmul: kernel.kind = "tile"; matmul(); break;
    }
    v_.finish();
    return k_.take();
  }

 private:
  const ir::Node& node(int n) const { return *graph_.nodes[n]; }
  Id i64(int64_t v) { return k_.index(v); }

  /// The graph buffer result `r` is written to: its own, or the parameter it was donated.
  int output_buffer(int r) const {
    for (const Alias& a : aliases_) {
      if (a.result == r) return a.parameter;
    }
    return num_parameters_ + r;
  }

  /// Stores `results` (and `extra` nodes into their buffers) at one element: `offset` into
  /// their buffers, `index` in the domain. The values are the roots, or with `below_reshapes`
  /// the product itself for a result that reshapes it (an epilogue indexes the product,
  /// whose elements such a result holds in the same order; the other results have the
  /// product's shape). One Store: every value is computed before the first write.
  void store_results(const std::vector<int>& results, Id offset, const Index& index, bool below_reshapes = false,
                     const std::vector<std::pair<int, int>>& extra = {}) {
    std::vector<int> buffers;
    std::vector<Id> values;
    for (int r : results) {
      const int root = graph_.roots[r];
      const int n = below_reshapes && stored_value(graph_, root) == spec_.domain ? spec_.domain : root;
      values.push_back(v_.at(n, index));
      buffers.push_back(v_.buffer(output_buffer(r), v_.dtype(n)));
    }
    for (const auto& [n, buffer] : extra) {
      values.push_back(v_.at(n, index));
      buffers.push_back(v_.buffer(buffer, v_.dtype(n)));
    }
    std::vector<Id> offsets(values.size(), offset);
    if (!values.empty()) k_.store(std::move(buffers), std::move(offsets), std::move(values));
  }

  /// The iterations [begin, end) as runs along a dim of size `inner`: body(run, base, j0, j1)
  /// covers iterations base + [j0, j1) of run `run` (the iteration's index divided by inner).
  void for_runs(Id inner, const std::function<void(Id, Id, Id, Id)>& body) {
    k_.loop(k_.div(k_.begin(), inner), k_.ceil_div(k_.end(), inner), [&](Id run) {
      const Id base = k_.mul(run, inner);
      body(run, base, k_.max(k_.sub(k_.begin(), base), i64(0)), k_.min(k_.sub(k_.end(), base), inner));
    });
  }

  /// Elements of the domain, as runs along its innermost dim: the outer index is derived
  /// once per run, the inner loop is unit-stride for contiguous reads.
  void elementwise() {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    std::vector<std::pair<int, int>> cut;
    if (spec_.cut >= 0) cut.emplace_back(spec_.cut, plan_.buffer_of[spec_.cut]);
    for_runs(rank == 0 ? i64(1) : v_.dim(d, rank - 1), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> dims(rank, i64(0));
      if (rank > 1) v_.unravel_into(d, run, 0, rank - 1, dims);
      k_.loop(j0, j1, [&](Id j) {
        if (rank > 0) dims[rank - 1] = j;
        const Index index{dims, k_.add(base, j)};
        store_results(spec_.results, index.linear, index, false, cut);
      });
    });
  }

  /// A kernel of leaves and elementwise ops alone: adjacent dims that every indexed leaf
  /// broadcasts alike are collapsed into one, and each leaf's offset is derived once per run
  /// of the innermost collapsed dim (unit-stride or invariant there: what the vectoriser needs).
  void collapsed() {
    const int d = spec_.domain;
    const ir::Node& domain = node(d);
    const int rank = domain.rank();
    const std::vector<bool> needed = region_of(graph_, plan_, spec_);
    std::vector<int> leaves;  // indexed leaves: parameters and aranges
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const OpKind op = graph_.nodes[i]->op();
      if (needed[i] && (op == OpKind::Parameter || op == OpKind::Arange)) leaves.push_back(static_cast<int>(i));
    }
    auto broadcast = [&](int leaf, int dim) {
      const int offset = rank - node(leaf).rank();
      return dim < offset || node(leaf).shape()[dim - offset] == 1;
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
      Id size = i64(1);
      for (int dim : group) size = k_.mul(size, v_.dim(d, dim));
      sizes.push_back(size);
    }
    const size_t g_count = groups.size();
    std::vector<std::vector<Id>> strides(leaves.size(), std::vector<Id>(g_count, i64(0)));
    for (size_t l = 0; l < leaves.size(); ++l) {
      Id stride = i64(1);
      for (size_t g = g_count; g-- > 0;) {
        if (broadcast(leaves[l], groups[g][0])) continue;
        strides[l][g] = stride;
        stride = k_.mul(stride, sizes[g]);
      }
    }
    std::vector<std::pair<int, int>> cut;
    if (spec_.cut >= 0) cut.emplace_back(spec_.cut, plan_.buffer_of[spec_.cut]);
    for_runs(sizes.empty() ? i64(1) : sizes.back(), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> index(g_count, i64(0));  // the run's index over the outer groups
      Id rest = run;
      for (size_t g = g_count >= 1 ? g_count - 1 : 0; g-- > 0;) {
        index[g] = k_.rem(rest, sizes[g]);
        rest = k_.div(rest, sizes[g]);
      }
      std::vector<Id> row_offsets(leaves.size(), i64(0));
      for (size_t l = 0; l < leaves.size(); ++l) {
        for (size_t g = 0; g + 1 < g_count; ++g) row_offsets[l] = k_.add(row_offsets[l], k_.mul(index[g], strides[l][g]));
      }
      k_.loop(j0, j1, [&](Id j) {
        for (size_t l = 0; l < leaves.size(); ++l) {
          const int n = leaves[l];
          const bool varies = g_count > 0 && !broadcast(n, groups.back()[0]);
          const Id offset = varies ? k_.add(row_offsets[l], j) : row_offsets[l];
          v_.bind(n, node(n).op() == OpKind::Arange ? k_.convert(offset, node(n).dtype()) : v_.load(n, graph_.parameter_slot[n], offset));
        }
        const Id at = k_.add(base, j);
        store_results(spec_.results, at, Index{{}, at}, false, cut);
        for (int n : leaves) v_.unbind(n);
      });
    });
  }

  /// The domain index of `linear` over its first `count` kept dims (`kept`, ascending; the
  /// folded dims of `dims` are left to the caller's loops).
  void unravel_kept(Id linear, const std::vector<int>& kept, size_t count, std::vector<Id>& dims) {
    const int d = spec_.domain;
    for (size_t k = count; k-- > 0;) {
      const int dim = kept[k];
      if (node(d).shape()[dim] == 1) continue;
      dims[dim] = k == 0 ? linear : k_.rem(linear, v_.dim(d, dim));
      if (k > 0) linear = k_.div(linear, v_.dim(d, dim));
    }
  }

  /// Nested loops over the folded dims of the domain (innermost last), filling `dims`.
  void over_row(std::vector<Id>& dims, size_t k, const std::function<void()>& body) {
    if (k == spec_.reduced.size()) return body();
    const int d = spec_.reduced[k];
    k_.loop(i64(0), v_.dim(spec_.domain, d), [&](Id i) {
      dims[d] = i;
      over_row(dims, k + 1, body);
    });
  }

  void rows() {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    std::vector<int> kept;
    for (int k = 0; k < rank; ++k) {
      if (!std::binary_search(spec_.reduced.begin(), spec_.reduced.end(), k)) kept.push_back(k);
    }
    Id count = i64(1);
    for (int k : kept) count = k_.mul(count, v_.dim(d, k));
    if (folds_columns(kept)) {
      columns(kept);
      k_.kernel().count = count;
      return;
    }
    k_.loop(k_.begin(), k_.end(), [&](Id row) {
      std::vector<Id> dims(rank, i64(0));
      unravel_kept(row, kept, kept.size(), dims);
      const auto [kept_node, kept_result] = kept_in_output();
      for (int s : spec_.stages) {
        const bool keep = kept_node >= 0 && s == spec_.stages.back();
        v_.bind(s, fold(s, dims, keep ? output_buffer(kept_result) : -1));
      }
      std::vector<int> per_row, per_element;
      for (int r : spec_.results) {
        const bool stage = std::ranges::find(spec_.stages, stored_value(graph_, graph_.roots[r])) != spec_.stages.end();
        (stage ? per_row : per_element).push_back(r);
      }
      if (!per_element.empty()) {
        over_row(dims, 0, [&] {
          const Id offset = v_.ravel(d, dims);
          if (kept_node >= 0) v_.bind(kept_node, v_.load(kept_node, output_buffer(kept_result), offset));
          store_results(per_element, offset, Index{dims});
          if (kept_node >= 0) v_.unbind(kept_node);
        });
      }
      std::vector<int> buffers;
      std::vector<Id> values;
      for (int r : per_row) {
        const int value = stored_value(graph_, graph_.roots[r]);
        values.push_back(v_.at(value, {}));
        buffers.push_back(v_.buffer(output_buffer(r), v_.dtype(value)));
      }
      for (int t : spec_.temps) {
        const int value = plan_.temps[t].node;
        values.push_back(v_.at(value, {}));
        buffers.push_back(v_.buffer(plan_.buffer_of[value], v_.dtype(value)));
      }
      std::vector<Id> offsets(values.size(), row);
      if (!values.empty()) k_.store(std::move(buffers), std::move(offsets), std::move(values));
    });
    k_.kernel().count = count;
  }

  /// A lone sum, amax or amin that keeps the innermost dim (`sum(x, 0)`): folding one output
  /// element at a time would read its inputs a stride apart, so it folds whole runs of the
  /// innermost dim at once instead, in the output buffer. Not when that buffer was donated
  /// by the input (the fold folds over size-1 dims): the identity would overwrite the input.
  bool folds_columns(const std::vector<int>& kept) const {
    if (spec_.stages.size() != 1 || kept.empty() || kept.back() != node(spec_.domain).rank() - 1) return false;
    const OpKind op = node(spec_.stages[0]).op();
    if (op != OpKind::Sum && op != OpKind::Amax && op != OpKind::Amin) return false;
    if (!spec_.results.empty() && output_buffer(spec_.results[0]) != num_parameters_ + spec_.results[0]) return false;
    return !spec_.results.empty() || !spec_.temps.empty();
  }

  static OpKind combine_of(OpKind fold) {
    return fold == OpKind::Sum ? OpKind::Add : fold == OpKind::Amin ? OpKind::Minimum : OpKind::Maximum;
  }

  /// Iterations are the kept elements, as in rows(); each run of them along the innermost
  /// dim starts at the fold's identity in the first output buffer and takes in the reduced
  /// elements in index order (the order rows() uses), a unit-stride vector loop per step.
  void columns(const std::vector<int>& kept) {
    const int d = spec_.domain;
    const int rank = node(d).rank();
    const int s = spec_.stages[0];
    const int operand = graph_.operands[s][0];
    const DType acc_dtype = node(s).dtype();
    std::vector<int> outputs;
    for (int r : spec_.results) outputs.push_back(v_.buffer(output_buffer(r), acc_dtype));
    for (int t : spec_.temps) outputs.push_back(v_.buffer(plan_.buffer_of[plan_.temps[t].node], acc_dtype));
    const int acc = outputs[0];
    for_runs(v_.dim(d, rank - 1), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> dims(rank, i64(0));
      unravel_kept(run, kept, kept.size() - 1, dims);
      k_.loop(j0, j1, [&](Id j) { k_.store(acc, k_.add(base, j), identity(node(s).op(), acc_dtype)); });
      over_row(dims, 0, [&] {
        k_.loop(j0, j1, [&](Id j) {
          dims[rank - 1] = j;
          const Id v = k_.convert(v_.at(operand, Index{dims}), acc_dtype);
          const Id at = k_.add(base, j);
          k_.store(acc, at, k_.op(combine_of(node(s).op()), acc_dtype, {k_.load(acc, at), v}));
        });
      });
      for (size_t o = 1; o < outputs.size(); ++o) {
        k_.loop(j0, j1, [&](Id j) { k_.store(outputs[o], k_.add(base, j), k_.load(acc, k_.add(base, j))); });
      }
    });
  }

  /// The last stage's operand, when a result of the row reads it and can hold it: the stage
  /// pass stores it in that result's buffer and the output pass reads it back (the row is in
  /// cache), so softmax computes exp once per element. Not for a donated buffer, whose old
  /// values the output pass may still read.
  std::pair<int, int> kept_in_output() const {
    if (spec_.stages.empty()) return {-1, -1};
    const int operand = graph_.operands[spec_.stages.back()][0];
    if (ir::op_info(node(operand).op()).kind != ir::LoweringKind::Elementwise) return {-1, -1};
    if (node(operand).shape() != node(spec_.domain).shape()) return {-1, -1};
    for (int r : spec_.results) {
      const int root = graph_.roots[r];
      if (output_buffer(r) != num_parameters_ + r || node(root).dtype() != node(operand).dtype() ||
          node(root).rank() != node(spec_.domain).rank() || !reaches(root, operand)) {
        continue;
      }
      return {operand, r};
    }
    return {-1, -1};
  }

  /// Whether `from` computes `target` within this kernel (elementwise paths only, so the
  /// value is read at the element being written).
  bool reaches(int from, int target) const {
    if (from == target) return true;
    if (ir::op_info(node(from).op()).kind != ir::LoweringKind::Elementwise) return false;
    for (int operand : graph_.operands[from]) {
      if (node(operand).rank() == node(from).rank() && node(operand).unit_dims() == node(from).unit_dims() &&
          reaches(operand, target)) {
        return true;
      }
    }
    return false;
  }

  /// One row of reduction `s`, folded in index order; the value is the accumulator read
  /// after the row. With `keep_in`, each element folded is also stored there.
  Id fold(int s, std::vector<Id>& dims, int keep_in) {
    const ir::Node& reduce = node(s);
    const int operand = graph_.operands[s][0];
    const DType in = node(operand).dtype();
    const bool argmax = reduce.op() == OpKind::Argmax;
    const DType acc_dtype = argmax ? in : reduce.dtype();
    const int acc = k_.new_local(acc_dtype);
    const int where = argmax ? k_.new_local(DType::Int64) : -1;
    k_.assign(acc, identity(reduce.op(), acc_dtype));
    if (argmax) k_.assign(where, i64(0));
    over_row(dims, 0, [&] {
      const Id element = v_.at(operand, Index{dims});
      if (keep_in >= 0) k_.store(v_.buffer(keep_in, in), v_.ravel(spec_.domain, dims), element);
      const Id v = k_.convert(element, acc_dtype);
      if (!argmax) return k_.fold(acc, combine_of(reduce.op()), v);
      // The first maximum; NaN counts as the maximum.
      const Id current = k_.local(acc);
      Id better = k_.op(OpKind::Gt, DType::Bool, {v, current});
      if (is_floating(acc_dtype)) {
        const Id nan_here = k_.op(OpKind::Ne, DType::Bool, {v, v});
        const Id none_before = k_.op(OpKind::Eq, DType::Bool, {current, current});
        better = k_.op(OpKind::LogicalOr, DType::Bool, {better, k_.op(OpKind::LogicalAnd, DType::Bool, {nan_here, none_before})});
      }
      k_.assign(where, k_.select(better, dims[reduce.attrs()[0]], k_.local(where)));
      k_.assign(acc, k_.select(better, v, current));
    });
    return argmax ? k_.local(where) : k_.local(acc);
  }

  Id identity(OpKind op, DType dtype) {
    if (op == OpKind::Sum) return k_.constant(dtype, 0);
    const bool low = op == OpKind::Amax || op == OpKind::Argmax;  // start below every value
    if (is_floating(dtype)) return k_.float_constant(dtype, low ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
    if (dtype == DType::Bool) return k_.constant(dtype, low ? 0 : 1);
    const int bits = static_cast<int>(dtype_size(dtype)) * 8;
    const int64_t lowest = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    return k_.constant(dtype, low ? lowest : -(lowest + 1));
  }

  struct Gemm {
    int product, a, b;
    int rank, a_rank, b_rank;
    MatmulTiling tile;
    Id m, n, k;
  };

  Gemm gemm() {
    Gemm g;
    g.product = spec_.domain;
    g.a = graph_.operands[g.product][0];
    g.b = graph_.operands[g.product][1];
    g.rank = node(g.product).rank();
    g.a_rank = node(g.a).rank();
    g.b_rank = node(g.b).rank();
    g.tile = matmul_tiling(dtype_size(node(g.product).dtype()));
    g.m = v_.dim(g.a, g.a_rank - 2);
    g.k = v_.dim(g.a, g.a_rank - 1);
    g.n = v_.dim(g.b, g.b_rank - 1);
    return g;
  }

  /// PackA: panel t holds MR rows of one batch of A as [K][MR] (rows past M are zero).
  /// PackB: panel t holds NR columns of one batch of B as [K][NR] (columns past N are zero).
  /// The operand's expression is evaluated as it is packed (a transpose or an activation
  /// costs no pass of its own).
  void pack(bool left) {
    const Gemm g = gemm();
    const int operand = left ? g.a : g.b;
    const int rank = left ? g.a_rank : g.b_rank;
    const int64_t width = left ? g.tile.mr : g.tile.nr;
    const Id extent = left ? g.m : g.n;
    const Id panels = k_.ceil_div(extent, i64(width));
    const int temp = spec_.temps[0];
    const int buffer = v_.buffer(temp_buffer_index(num_parameters_, static_cast<int>(graph_.roots.size()), temp), v_.dtype(operand));
    k_.loop(k_.begin(), k_.end(), [&](Id t) {
      std::vector<Id> dims(rank, i64(0));
      v_.unravel_into(operand, k_.div(t, panels), 0, rank - 2, dims);
      const Id first = k_.mul(k_.rem(t, panels), i64(width));
      const Id base = k_.mul(k_.mul(t, g.k), i64(width));
      const Id last = k_.sub(extent, i64(1));
      auto element = [&](Id kk, Id lane) {
        const Id at = k_.add(first, lane);
        dims[rank - 2] = left ? k_.min(at, last) : kk;
        dims[rank - 1] = left ? kk : k_.min(at, last);
        const Id v = v_.at(operand, Index{dims});
        const Id inside = k_.op(OpKind::Lt, DType::Bool, {at, extent});
        k_.store(buffer, k_.add(base, k_.add(k_.mul(kk, i64(width)), lane)), k_.select(inside, v, k_.constant(v_.dtype(operand), 0)));
      };
      if (left) {  // read A along its rows
        k_.loop(i64(0), i64(width), [&](Id lane) { k_.loop(i64(0), g.k, [&](Id kk) { element(kk, lane); }); });
      } else {  // read B along its rows too: a panel row is NR contiguous columns
        k_.loop(i64(0), g.k, [&](Id kk) { k_.loop(i64(0), i64(width), [&](Id lane) { element(kk, lane); }); });
      }
    });
    const Id batch = v_.numel(operand, 0, rank - 2);
    k_.kernel().count = k_.mul(batch, panels);
  }

  /// Tiles of MB rows by NR columns: each MR-row block accumulates over all of K in
  /// registers (the micro-kernel), lands in a tile, and the epilogue evaluates the kernel's
  /// results from it element by element (vectorised along the columns).
  void matmul() {
    const Gemm g = gemm();
    const DType dtype = node(g.product).dtype();
    const int num_results = static_cast<int>(graph_.roots.size());
    const int packed_a_temp = packed_temp(TempBuffer::Kind::PackedA);
    const int packed_a = v_.buffer(packed_a_temp < 0 ? plan_.buffer_of[g.a] : temp_buffer_index(num_parameters_, num_results, packed_a_temp), dtype);
    const int packed_b = v_.buffer(temp_buffer_index(num_parameters_, num_results, packed_temp(TempBuffer::Kind::PackedB)), dtype);
    const int tile = k_.new_local(dtype, g.tile.mr * g.tile.nr);
    const Id col_panels = k_.ceil_div(g.n, i64(g.tile.nr));
    const Id row_blocks = k_.ceil_div(g.m, i64(g.tile.mb));
    const Id a_panels = k_.ceil_div(g.m, i64(g.tile.mr));
    k_.loop(k_.begin(), k_.end(), [&](Id t) {
      const Id panel = k_.rem(t, col_panels);
      const Id rest = k_.div(t, col_panels);
      const Id block = k_.rem(rest, row_blocks);
      const Id batch = k_.div(rest, row_blocks);
      std::vector<Id> out(g.rank, i64(0));
      v_.unravel_into(g.product, batch, 0, g.rank - 2, out);
      const Id a_batch = batch_of(g.a, g.a_rank, out, g.rank);
      const Id b_batch = batch_of(g.b, g.b_rank, out, g.rank);
      const Id row0 = k_.mul(block, i64(g.tile.mb));
      const Id col0 = k_.mul(panel, i64(g.tile.nr));
      const Id rows = k_.min(i64(g.tile.mb), k_.sub(g.m, row0));
      const Id cols = k_.min(i64(g.tile.nr), k_.sub(g.n, col0));
      k_.loop(i64(0), k_.ceil_div(rows, i64(g.tile.mr)), [&](Id micro) {
        kir::MicroKernel step{.a = packed_a, .b = packed_b, .tile = tile, .packed_a = packed_a_temp >= 0, .k = g.k};
        step.b_base = k_.mul(k_.mul(k_.add(k_.mul(b_batch, col_panels), panel), g.k), i64(g.tile.nr));
        const Id first_row = k_.add(row0, k_.mul(micro, i64(g.tile.mr)));
        if (step.packed_a) {
          const Id a_panel = k_.add(k_.mul(a_batch, a_panels), k_.add(k_.mul(block, i64(g.tile.mb / g.tile.mr)), micro));
          step.a_rows.push_back(k_.mul(k_.mul(a_panel, g.k), i64(g.tile.mr)));
        } else {  // each of the MR rows of A in place (clamped to the last; its results are not stored)
          for (int64_t r = 0; r < g.tile.mr; ++r) {
            const Id row = k_.min(k_.add(first_row, i64(r)), k_.sub(g.m, i64(1)));
            step.a_rows.push_back(k_.mul(k_.add(k_.mul(a_batch, g.m), row), g.k));
          }
        }
        k_.matmul(std::move(step));
        epilogue(g, tile, out, first_row, k_.min(i64(g.tile.mr), k_.sub(g.m, first_row)), col0, cols);
      });
    });
    k_.kernel().count = k_.mul(k_.mul(v_.numel(g.product, 0, g.rank - 2), row_blocks), col_panels);
  }

  /// The temporary holding this product's packed operand, or -1 (A read in place).
  int packed_temp(TempBuffer::Kind kind) const {
    for (size_t t = 0; t < plan_.temps.size(); ++t) {
      if (plan_.temps[t].kind == kind && plan_.temps[t].node == spec_.domain) return static_cast<int>(t);
    }
    if (kind == TempBuffer::Kind::PackedB) llvm_unreachable("lowering: matmul without its packed operand");
    return -1;
  }

  /// The linear batch index of operand `n` (rank `rank`) for output batch dims `out`:
  /// right-aligned, broadcast dims read 0.
  Id batch_of(int n, int rank, const std::vector<Id>& out, int out_rank) {
    Id linear = i64(0);
    for (int d = 0; d < rank - 2; ++d) {
      if (node(n).shape()[d] == 1) continue;
      linear = k_.add(k_.mul(linear, v_.dim(n, d)), out[d + out_rank - rank]);
    }
    return linear;
  }

  void epilogue(const Gemm& g, int tile, std::vector<Id> out, Id first_row, Id rows, Id col0, Id cols) {
    std::vector<std::pair<int, int>> temps;
    for (int t : spec_.temps) temps.emplace_back(g.product, plan_.buffer_of[plan_.temps[t].node]);
    k_.loop(i64(0), rows, [&](Id r) {
      k_.loop(i64(0), cols, [&](Id j) {
        v_.bind(g.product, k_.local(tile, k_.add(k_.mul(r, i64(g.tile.nr)), j)));
        out[g.rank - 2] = k_.add(first_row, r);
        out[g.rank - 1] = k_.add(col0, j);
        store_results(spec_.results, v_.ravel(g.product, out), Index{out}, /*below_reshapes=*/true, temps);
        v_.unbind(g.product);
      });
    });
  }

  const ir::Graph& graph_;
  const KernelPlan& plan_;
  KernelSpec& spec_;
  std::span<const Alias> aliases_;
  int num_parameters_;
  kir::Builder k_;
  GraphValues v_;
};

}  // namespace

kir::Kernel build_kernel(const ir::Graph& graph, const KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases) {
  return KernelBuilder(graph, plan, spec, aliases).build();
}

}  // namespace lazyjit::lowering
