// Row kernels to kernel IR: folds along the innermost dims with their fused consumers, and
// column folds (a lone reduction that keeps the innermost dim).
#include <algorithm>
#include <functional>
#include <limits>

#include "ir/dtype_dispatch.h"
#include "ir/scalar_semantics.h"
#include "lowering/fusion.h"
#include "lowering/kernel_context.h"

namespace lazyjit::lowering {
namespace {

using ir::OpKind;
using kir::Id;
using Index = GraphValues::Index;

class Rows {
 public:
  explicit Rows(KernelContext& c) : c(c) {}

  /// folded dims of `dims` are left to the caller's loops).
  void unravel_kept(Id linear, const std::vector<int>& kept, size_t count, std::vector<Id>& dims) {
    const int d = c.spec.domain;
    for (size_t k = count; k-- > 0;) {
      const int dim = kept[k];
      if (c.node(d).shape()[dim] == 1) continue;
      dims[dim] = k == 0 ? linear : c.k.rem(linear, c.v.dim(d, dim));
      if (k > 0) linear = c.k.div(linear, c.v.dim(d, dim));
    }
  }

  /// Nested loops over the folded dims of the domain (innermost last), filling `dims`.
  void over_row(std::vector<Id>& dims, size_t k, const std::function<void()>& body) {
    if (k == c.spec.reduced.size()) return body();
    const int d = c.spec.reduced[k];
    c.k.loop(c.i64(0), c.v.dim(c.spec.domain, d), [&](Id i) {
      dims[d] = i;
      over_row(dims, k + 1, body);
    });
  }

  void rows() {
    const int d = c.spec.domain;
    const int rank = c.node(d).rank();
    std::vector<int> kept;
    for (int k = 0; k < rank; ++k) {
      if (!std::binary_search(c.spec.reduced.begin(), c.spec.reduced.end(), k)) kept.push_back(k);
    }
    Id count = c.i64(1), row = c.i64(1);
    for (int k = 0; k < rank; ++k) {
      Id& product = std::binary_search(c.spec.reduced.begin(), c.spec.reduced.end(), k) ? row : count;
      product = c.k.mul(product, c.v.dim(d, k));
    }
    // One pass over the row per stage, and one to store.
    c.k.kernel().work = c.k.mul(row, c.i64(static_cast<int64_t>(c.spec.stages.size()) + 1));
    if (folds_columns(kept)) {
      columns(kept);
      c.k.kernel().count = count;
      return;
    }
    c.k.loop(c.k.begin(), c.k.end(), [&](Id row) {
      std::vector<Id> dims(rank, c.i64(0));
      unravel_kept(row, kept, kept.size(), dims);
      const auto [kept_node, kept_result] = kept_in_output();
      for (int s : c.spec.stages) {
        const bool keep = kept_node >= 0 && s == c.spec.stages.back();
        c.v.bind(s, fold(s, dims, keep ? c.output_buffer(kept_result) : -1));
      }
      std::vector<int> per_row, per_element;
      for (int r : c.spec.results) {
        const bool stage = std::ranges::find(c.spec.stages, stored_value(c.graph, c.graph.roots[r])) != c.spec.stages.end();
        (stage ? per_row : per_element).push_back(r);
      }
      if (!per_element.empty()) {
        over_row(dims, 0, [&] {
          const Id offset = c.v.ravel(d, dims);
          if (kept_node >= 0) c.v.bind(kept_node, c.v.load(kept_node, c.output_buffer(kept_result), offset));
          c.store_results(per_element, offset, Index{dims});
          if (kept_node >= 0) c.v.unbind(kept_node);
        });
      }
      std::vector<int> buffers;
      std::vector<Id> values;
      for (int r : per_row) {
        const int value = stored_value(c.graph, c.graph.roots[r]);
        values.push_back(c.v.at(value, {}));
        buffers.push_back(c.v.buffer(c.output_buffer(r), c.v.dtype(value)));
      }
      for (int t : c.spec.temps) {
        const int value = c.plan.temps[t].node;
        values.push_back(c.v.at(value, {}));
        buffers.push_back(c.v.buffer(c.plan.buffer_of[value], c.v.dtype(value)));
      }
      std::vector<Id> offsets(values.size(), row);
      if (!values.empty()) c.k.store(std::move(buffers), std::move(offsets), std::move(values));
    });
    c.k.kernel().count = count;
  }

  /// A lone fold by a combine (sum, amax, amin, ...) that keeps the innermost dim (`sum(x, 0)`): folding one output
  /// element at a time would read its inputs a stride apart, so it folds whole runs of the
  /// innermost dim at once instead, in the output buffer. Not when that buffer was donated
  /// by the input (the fold folds over size-1 dims): the identity would overwrite the input.
  bool folds_columns(const std::vector<int>& kept) const {
    if (c.spec.stages.size() != 1 || kept.empty() || kept.back() != c.node(c.spec.domain).rank() - 1) return false;
    if (!ir::fold_info(c.node(c.spec.stages[0]).op()).has_value()) return false;
    if (!c.spec.results.empty() && c.output_buffer(c.spec.results[0]) != c.num_parameters + c.spec.results[0]) return false;
    return !c.spec.results.empty() || !c.spec.temps.empty();
  }

  static OpKind combine_of(OpKind fold) { return ir::fold_info(fold)->combine; }

  /// Iterations are the kept elements, as in rows(); each run of them along the innermost
  /// dim starts at the fold's identity in the first output buffer and takes in the reduced
  /// elements in index order (the order rows() uses), a unit-stride vector loop per step.
  void columns(const std::vector<int>& kept) {
    const int d = c.spec.domain;
    const int rank = c.node(d).rank();
    const int s = c.spec.stages[0];
    const int operand = c.graph.operands[s][0];
    const DType acc_dtype = c.node(s).dtype();
    const std::vector<int> outputs = c.output_buffers(acc_dtype);
    const int acc = outputs[0];
    c.for_runs(c.v.dim(d, rank - 1), [&](Id run, Id base, Id j0, Id j1) {
      std::vector<Id> dims(rank, c.i64(0));
      unravel_kept(run, kept, kept.size() - 1, dims);
      c.k.loop(j0, j1, [&](Id j) { c.k.store(acc, c.k.add(base, j), identity(c.node(s).op(), acc_dtype)); });
      over_row(dims, 0, [&] {
        c.k.loop(j0, j1, [&](Id j) {
          dims[rank - 1] = j;
          const Id v = c.k.convert(c.v.at(operand, Index{dims}), acc_dtype);
          const Id at = c.k.add(base, j);
          c.k.store(acc, at, c.k.op(combine_of(c.node(s).op()), acc_dtype, {c.k.load(acc, at), v}));
        });
      });
      for (size_t o = 1; o < outputs.size(); ++o) {
        c.k.loop(j0, j1, [&](Id j) { c.k.store(outputs[o], c.k.add(base, j), c.k.load(acc, c.k.add(base, j))); });
      }
    });
  }

  /// The last stage's operand, when a result of the row reads it and can hold it: the stage
  /// pass stores it in that result's buffer and the output pass reads it back (the row is in
  /// cache), so softmax computes exp once per element. Not for a donated buffer, whose old
  /// values the output pass may still read, nor where a view or gather of the kernel reads
  /// the operand at other elements (the read-back value is the element's own).
  std::pair<int, int> kept_in_output() const {
    if (c.spec.stages.empty()) return {-1, -1};
    const int operand = c.graph.operands[c.spec.stages.back()][0];
    if (ir::op_info(c.node(operand).op()).access != ir::AccessPattern::Elementwise) return {-1, -1};
    if (c.node(operand).shape() != c.node(c.spec.domain).shape()) return {-1, -1};
    if (read_elsewhere(c.graph, c.v.computed())[operand]) return {-1, -1};
    for (int r : c.spec.results) {
      const int root = c.graph.roots[r];
      if (c.output_buffer(r) != c.num_parameters + r || c.node(root).dtype() != c.node(operand).dtype() ||
          c.node(root).rank() != c.node(c.spec.domain).rank() || !reaches(root, operand)) {
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
    if (ir::op_info(c.node(from).op()).access != ir::AccessPattern::Elementwise) return false;
    for (int operand : c.graph.operands[from]) {
      if (c.node(operand).rank() == c.node(from).rank() && c.node(operand).unit_dims() == c.node(from).unit_dims() &&
          reaches(operand, target)) {
        return true;
      }
    }
    return false;
  }

  /// One row of reduction `s`, folded in index order; the value is the accumulator read
  /// after the row. With `keep_in`, each element folded is also stored there.
  Id fold(int s, std::vector<Id>& dims, int keep_in) {
    const ir::Node& reduce = c.node(s);
    const int operand = c.graph.operands[s][0];
    const DType in = c.node(operand).dtype();
    const bool argmax = reduce.op() == OpKind::Argmax;
    const DType acc_dtype = argmax ? in : reduce.dtype();
    const int acc = c.k.new_local(acc_dtype);
    const int where = argmax ? c.k.new_local(DType::Int64) : -1;
    c.k.assign(acc, identity(reduce.op(), acc_dtype));
    if (argmax) c.k.assign(where, c.i64(0));
    over_row(dims, 0, [&] {
      const Id element = c.v.at(operand, Index{dims});
      if (keep_in >= 0) c.k.store(c.v.buffer(keep_in, in), c.v.ravel(c.spec.domain, dims), element);
      const Id v = c.k.convert(element, acc_dtype);
      if (!argmax) return c.k.fold(acc, combine_of(reduce.op()), v);
      // The first maximum; NaN counts as the maximum.
      const Id current = c.k.local(acc);
      Id better = c.k.op(OpKind::Gt, DType::Bool, {v, current});
      if (is_floating(acc_dtype)) {
        const Id nan_here = c.k.op(OpKind::Ne, DType::Bool, {v, v});
        const Id none_before = c.k.op(OpKind::Eq, DType::Bool, {current, current});
        better = c.k.op(OpKind::LogicalOr, DType::Bool, {better, c.k.op(OpKind::LogicalAnd, DType::Bool, {nan_here, none_before})});
      }
      c.k.assign(where, c.k.select(better, dims[reduce.attrs()[0]], c.k.local(where)));
      c.k.assign(acc, c.k.select(better, v, current));
    });
    return argmax ? c.k.local(where) : c.k.local(acc);
  }

  /// Where fold `op` starts (argmax: below every value).
  Id identity(OpKind op, DType dtype) {
    const std::optional<ir::FoldInfo> fold = ir::fold_info(op);
    return c.fold_start(fold.has_value() ? fold->start : ir::FoldStart::Lowest, dtype);
  }

 private:
  KernelContext& c;
};

}  // namespace

void build_rows(KernelContext& c) { Rows(c).rows(); }

}  // namespace lazyjit::lowering
