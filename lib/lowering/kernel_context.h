// What the builders of each kernel kind share (kernel_builder.cpp, kernel_rows.cpp,
// kernel_matmul.cpp): the kernel being built, the graph's values in it, where results go.
#pragma once

#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "lowering/graph_values.h"
#include "lowering/kernel_abi.h"
#include "lowering/kir.h"

namespace lazyjit::lowering {

struct KernelContext {
  KernelContext(const ir::Graph& graph, const KernelPlan& plan, KernelSpec& spec, std::span<const Alias> aliases)
      : graph(graph), plan(plan), spec(spec), aliases(aliases), num_parameters(static_cast<int>(graph.parameters.size())),
        v(k, graph, plan, spec, spec.frame) {}

  const ir::Node& node(int n) const { return *graph.nodes[n]; }
  kir::Id i64(int64_t value) { return k.index(value); }

  /// The graph buffer result `r` is written to: its own, or the parameter it was donated.
  int output_buffer(int r) const;

  /// Stores `results` (and `extra` nodes into their graph buffers) at one element: `offset`
  /// into their buffers, `index` in the domain. The values are the roots, or with
  /// `below_reshapes` the product itself for a result that reshapes it (an epilogue indexes
  /// the product, whose elements such a result holds in the same order; the other results
  /// have the product's shape). One Store: every value is computed before the first write.
  void store_results(const std::vector<int>& results, kir::Id offset, const GraphValues::Index& index,
                     bool below_reshapes = false, const std::vector<std::pair<int, int>>& extra = {});

  /// The frame's buffers that the node this kernel stores is written to, as `dtype`: its
  /// results' (each its own or a donated parameter's), then its temporary's.
  std::vector<int> output_buffers(DType dtype);

  /// The constant where a fold or scan of `dtype` starts.
  kir::Id fold_start(ir::FoldStart start, DType dtype);

  /// The iterations [begin, end) as runs along a dim of size `inner`: body(run, base, j0, j1)
  /// covers iterations base + [j0, j1) of run `run` (the iteration's index divided by inner).
  void for_runs(kir::Id inner, const std::function<void(kir::Id, kir::Id, kir::Id, kir::Id)>& body);
  /// The iterations [begin, end) as elements of `node` in row-major order, as runs along its
  /// innermost dim (the outer index derived once per run): body(index) at each, with both its
  /// dims and its linear index.
  void for_elements(int node, const std::function<void(const GraphValues::Index&)>& body);

  const ir::Graph& graph;
  const KernelPlan& plan;
  KernelSpec& spec;
  std::span<const Alias> aliases;
  int num_parameters;
  kir::Builder k;
  GraphValues v;
};

/// The body and iteration count of each kind of kernel.
void build_elementwise(KernelContext& c);
void build_rows(KernelContext& c);
void build_pack(KernelContext& c, bool left);
void build_matmul(KernelContext& c);
/// RowsOfB: the offsets of the rows of a right operand the matmul reads in place.
void build_rows_of_b(KernelContext& c);
void build_scan(KernelContext& c);
void build_scatter(KernelContext& c);
/// A collective's operand, stored where the runtime's collective reads it.
void build_collective(KernelContext& c);

}  // namespace lazyjit::lowering
