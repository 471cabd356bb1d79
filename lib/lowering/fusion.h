// Fusion planning: which kernels a graph runs, what each computes, and the buffers between
// (the planner in fusion.cpp; the queries over its plans in regions.cpp).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// The kernels of `graph`. Reductions and matmul products are the only values that pass
/// through memory between kernels; every other intermediate is recomputed inside each kernel
/// that reads it (cheaper than a round trip).
///  - Results of one shape share one kernel (Elementwise).
///  - A reduction over the innermost dims of that shape whose every reader is in that kernel
///    becomes one of its row stages (Rows): softmax and layer_norm read their input from
///    memory once. Other reductions get a Rows kernel of their own.
///  - A matmul product whose every reader is in a result kernel of its shape becomes that
///    kernel's micro-kernel (Matmul), and the elementwise consumers its epilogue. Each matmul
///    packs its operands first (PackA, PackB), evaluating their expressions as it packs, or
///    reads them in place (A in a buffer; a window by window_in_place, B's rows' offsets from RowsOfB).
/// Depends only on what the graph key contains, so one key has one plan.
KernelPlan plan_kernels(const ir::Graph& graph);

/// Whether node `n` of `graph` passes through memory: a reduction, a matmul product, a scan
/// or a scatter (every other value is recomputed by each kernel that reads it).
bool is_boundary(const ir::Graph& graph, int n);

/// The node whose buffer matmul `product` reads operand `side` (0: A, 1: B) from in place,
/// or -1. An operand qualifies when it is a sliding window without padding (a convolution's
/// implicit im2col), under permutes, of a node whose last dim holds the operand's last dim
/// (A's K, B's columns) at unit stride. The micro-kernel then reads each row of the operand
/// where it lies, and nothing is packed: A's MR rows at their offsets, B's rows at offsets
/// a RowsOfB kernel writes (copied once per tile into a panel). The node below is stored by
/// a kernel of its own when no buffer holds it yet (a padded input: a cut).
int window_in_place(const ir::Graph& graph, int product, int side);

/// The node whose buffer matmul `product` reads its left operand A from in place, row by
/// row: A itself when it is already in memory (a parameter, a boundary, a cut), or the node
/// below a window (window_in_place); -1 when A is computed and packed (PackA).
int left_in_place(const ir::Graph& graph, const std::vector<bool>& cuts, int product);

/// Whether collective `op` runs in its result's buffer (all_reduce, broadcast: the operand is
/// staged there), rather than from a staging temporary of the operand's size.
inline bool collective_in_place(ir::OpKind op) { return op == ir::OpKind::AllReduce || op == ir::OpKind::Broadcast; }

/// The graph buffers a collective kernel's collective reads (its staged operand) and writes
/// (the collective's value): one buffer when it runs in place.
struct CollectiveBuffers {
  int in, out;
};
CollectiveBuffers collective_buffers(const KernelPlan& plan, const KernelSpec& kernel, int num_parameters, int num_results);

/// The node whose value `node` stores: itself, or for a reshape (a chain of them) the node
/// below, whose elements it holds in the same order. A result that reshapes a reduction or
/// a product is written by that node's kernel directly.
int stored_value(const ir::Graph& graph, int node);


/// Per node of `graph`: whether `kernel` of `plan` evaluates it (the nodes it computes, and
/// the leaves and buffers it reads them from).
std::vector<bool> region_of(const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& kernel);
std::vector<bool> region_of(const ir::Graph& graph, const std::vector<bool>& cuts, const KernelSpec& kernel);

/// Per node of `graph`: whether `kernel` computes it itself, rather than read it from a
/// buffer another kernel (or the caller) filled: its region less what plan.buffer_of holds,
/// but for its own stages and cut.
std::vector<bool> computed_by(const ir::Graph& graph, const KernelPlan& plan, const KernelSpec& kernel);

/// Per node of `graph`: whether a view or gather among the `computed` nodes reads it, or an
/// elementwise node that one reads, at other elements than the one being computed.
std::vector<bool> read_elsewhere(const ir::Graph& graph, const std::vector<bool>& computed);

/// The nodes of `graph` that are cut out of long chains (KernelPlan::cuts).
std::vector<bool> chain_cuts(const ir::Graph& graph);

}  // namespace lazyjit::lowering
