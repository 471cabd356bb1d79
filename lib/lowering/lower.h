// Lowering a graph to the kernel IR of its planned kernels.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"

#include "ir/graph.h"
#include "lowering/lowered_graph.h"

namespace lazyjit::lowering {

/// How work over a graph's kernels spreads over threads: calls `task(i)` once for each i in
/// [0, count), in any order and on any of the caller's threads, and returns when every call
/// has returned (rethrowing what a call threw). Lowering and compiling start no threads of
/// their own: the runtime lends its oneTBB workers to work the user waits for, and a
/// background compile's own low-priority threads to work the user does not.
using ForEachKernel = absl::FunctionRef<void(size_t count, absl::FunctionRef<void(size_t)> task)>;

/// One by one on the calling thread.
void in_order(size_t count, absl::FunctionRef<void(size_t)> task);

/// Lowers a verified graph: plans it (plan.h) and builds each kernel's kernel IR
/// (kernel_builder.h), named after its content (LoweredKernel), so a kernel that two graphs
/// share is one symbol. `aliases` are the donations the runtime planned (they are part of
/// the cache key).
LoweredGraph lower_graph(const ir::Graph& graph, std::span<const Alias> aliases = {});
/// The same from `plan`, the graph's plan (plan_graph in plan.h) made earlier, each kernel's
/// IR built as a task of `for_each` (a kernel's IR reads the graph and the plan, and writes
/// only its own KernelSpec's frame).
LoweredGraph lower_graph(const ir::Graph& graph, KernelPlan plan, std::span<const Alias> aliases,
                         ForEachKernel for_each = in_order);

/// Every kernel's kernel IR as text, in plan order, each under its symbol.
std::string kernels_text(const LoweredGraph& lowered);

}  // namespace lazyjit::lowering
