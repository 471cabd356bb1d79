// Planning (DESIGN.md section 7): the passes from a graph to the plan that lowering, the
// compiled graph and the runtime share.
#pragma once

#include <string>

#include "ir/graph.h"
#include "lowering/kernel_abi.h"

namespace lazyjit::lowering {

/// The plan of `graph`: its passes in order, each a free function over the plan that
/// print_plan can show (`lazyjit-dump --emit=plan`):
///  1. plan_kernels (fusion.h): fuse the graph into kernels; only reductions, products,
///     packed operands and cut chains pass through memory.
///  2. plan_temp_sizes: each temporary's size, as steps over the shape table.
///  3. plan_donation_candidates: per result, the parameters whose buffer it may take over.
/// Lowering (lower.h) then builds each kernel's IR, which adds its launch geometry.
/// Depends only on what the graph key contains: the runtime makes it once per key.
KernelPlan plan_graph(const ir::Graph& graph);

void plan_temp_sizes(const ir::Graph& graph, KernelPlan& plan);

/// The static half of donation (seeds/000, DESIGN.md section 6): result r may take over the
/// buffer of parameter p when they have one dtype and rank, and r's kernel reads p, if at
/// all, only at the element it writes (a view or a row would read elements it overwrote).
/// Not a result that a later kernel reads back from memory (a product or a reduction that
/// is also a result: writers of donated buffers run last, after that reader), nor one whose
/// kernel checks data (an index): a failed run must leave every input as it was. The runtime
/// adds the dynamic half (runtime/donation.h): shapes, and who else holds the buffer.
void plan_donation_candidates(const ir::Graph& graph, KernelPlan& plan);

/// The plan as text: its kernels (kind, domain, stages, results, temporaries), temporaries,
/// cuts and donation candidates.
std::string print_plan(const ir::Graph& graph, const KernelPlan& plan);
/// One kernel of the plan as print_plan shows it, without its number: "matmul over %7 (matmul)".
std::string print_kernel(const ir::Graph& graph, const KernelSpec& kernel);

}  // namespace lazyjit::lowering
