// Collectives across the processes of a data-parallel job, as lazy ops: each joins the graph
// like any op (part of its cache key), and the plan runs it between the kernels that produce
// its operand and those that read its result. lazyjit::dist (<lazyjit/dist.h>, the
// lazyjit_dist library) carries them out over MPI; without it a process is a world of one,
// where every collective returns its operand.
//
// Every rank must trace the same collectives in the same order. A collective whose operand
// differs in shape or dtype across ranks fails on every rank with an Error naming it and the
// shapes, before any data moves.
#pragma once

#include <cstdint>

#include "lazyjit/tensor.h"

namespace lazyjit::dist {

enum class ReduceOp { Sum, Mean, Max, Min };

/// This process's rank in the job, and the job's size (0 and 1 without lazyjit::dist::init).
int rank();
int world_size();

/// `t` combined elementwise over all ranks (Mean: the sum divided by the world size, floating
/// dtypes only), on every rank.
Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
/// Rank `root`'s `t`, on every rank.
Tensor broadcast(const Tensor& t, int root = 0);
/// The ranks' `t` one after another along `dim` (rank order): world_size times as long there.
Tensor all_gather(const Tensor& t, int64_t dim = 0);
/// `t` (`dim` a multiple of the world size) combined over all ranks; rank r keeps the r-th of
/// world_size equal slices along `dim`.
Tensor reduce_scatter(const Tensor& t, int64_t dim = 0, ReduceOp op = ReduceOp::Sum);

}  // namespace lazyjit::dist
