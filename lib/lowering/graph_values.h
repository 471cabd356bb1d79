// GraphValues: the kernel IR expression of a graph node at a multi-index inside one kernel,
// found by walking views, broadcasts and elementwise ops down to buffers, scalars and
// generators; and the kernel's frame, filled as the kernel first uses each slot.
#pragma once

#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/graph.h"
#include "lowering/kernel_abi.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

class GraphValues {
 public:
  /// A position in a node's shape: its per-dim indices, its row-major linear index, or both
  /// (whichever is missing is derived when needed).
  struct Index {
    std::vector<kir::Id> dims;
    kir::Id linear = kir::kNone;
  };

  GraphValues(kir::Builder& k, const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& spec,
              KernelFrame& frame);

  /// The value of `node` at `index`. Nodes the kernel does not compute are loaded from the
  /// buffer plan.buffer_of gives them, or are bound.
  kir::Id at(int node, const Index& index);
  /// Per node: whether this kernel computes it (computed_by), rather than loads it.
  const std::vector<bool>& computed() const { return computed_; }
  /// Makes `node` evaluate to `value` at every index (a row's fold, a matmul tile element).
  void bind(int node, kir::Id value) {
    bound_[node] = value;
    memo_.clear();  // values above it change
  }
  void unbind(int node) {
    bound_.erase(node);
    memo_.clear();
  }

  /// The offset in `base`'s buffer of element `index` of `node`, a chain of permutes, slices,
  /// reshapes and sliding windows without padding over `base` (window_in_place): no value is
  /// read.
  kir::Id offset_in(int node, int base, const Index& index);

  /// Size of dim `d` of `node`: the constant 1 for the unit dims the key fixes, else a dim
  /// of the frame (the node's size in the graph's shape table).
  kir::Id dim(int node, int d);
  kir::Id numel(int node, int first_dim, int end_dim);
  kir::Id ravel(int node, const std::vector<kir::Id>& dims);
  /// The multi-index of `linear` over dims [first, end) of `node`, into those of `dims`.
  void unravel_into(int node, kir::Id linear, int first, int end, std::vector<kir::Id>& dims);
  /// The frame's slot for graph buffer `buffer` (parameters, results, temporaries) holding
  /// elements of `dtype`.
  int buffer(int graph_buffer, DType dtype);
  /// A Scalar leaf's value or a generator's seed.
  kir::Id scalar(int node);
  kir::Id load(int node, int graph_buffer, kir::Id offset) { return k_.load(buffer(graph_buffer, dtype(node)), offset); }
  DType dtype(int node) const { return graph_.nodes[node]->dtype(); }
  /// `value` (an index that `node` reads from data) as Int64, checked to lie in [0, dim `d` of
  /// `bounded`): a failed check ends the kernel with the status word (frame's checks).
  kir::Id checked_index(int node, kir::Id value, int bounded, int d);
  /// Closes the frame: the scalar frame, if the kernel reads scalars, is its last argument.
  void finish();

 private:
  kir::Id compute(int node, const Index& index);
  kir::Id view(int node, const Index& index);
  /// Where view `node` (a reshape, or a view of ir::operand_index: permute, slice, expand,
  /// ...) reads its operand for element `index`.
  Index view_source(int node, const Index& index);
  /// A sliding-window view (Unfold, UnfoldTranspose): the operand at clamped indices,
  /// selected where the window reaches it.
  kir::Id window(int node, const Index& index);
  /// Where element `dims` of Unfold `node` lies in its operand: the channel, and the row and
  /// column in the padded input (less the padding: in the input).
  struct WindowSource {
    kir::Id channel, padded_h, padded_w;
  };
  WindowSource window_source(int node, const std::vector<kir::Id>& dims);
  /// `divisor`, after a check that it is not 0 (an integer division of `node`).
  kir::Id checked_divisor(int node, kir::Id divisor);
  Index operand_index(int node, int operand, const Index& index);
  std::vector<kir::Id> dims_of(int node, const Index& index);
  kir::Id linear_of(int node, const Index& index);

  kir::Builder& k_;
  const ir::Graph& graph_;
  const KernelPlan& plan_;
  const KernelSpec& spec_;
  KernelFrame& frame_;
  std::vector<int> offsets_;
  std::vector<bool> computed_;  // nodes this kernel computes rather than loads
  std::map<int, kir::Id> bound_;
  std::map<std::vector<kir::Id>, kir::Id> memo_;  // (node, linear, dims...) to its value
  absl::flat_hash_map<int, int> buffers_, dims_, scalars_;  // graph-wide position to frame slot
};

}  // namespace lazyjit::lowering
