// Data-parallel training over MPI (the lazyjit_dist library, built when CMake finds MPI).
//
//   lazyjit::dist::init();                      // MPI_Init_thread under mpirun; else a world of one
//   nn::DataParallel ddp(model.parameters());   // rank 0's initial values on every rank
//   ... loss = ...; auto grads = ddp.average(grad(loss, params)); opt.step(grads); mark_step();
//   lazyjit::dist::finalize();
//
// The collectives themselves (all_reduce, broadcast, all_gather, reduce_scatter) are lazy ops
// of the core library (<lazyjit/collectives.h>); this library carries them out over MPI.
#pragma once

#include "lazyjit/collectives.h"

namespace lazyjit::dist {

/// Joins the job: MPI_Init_thread (at least MPI_THREAD_SERIALIZED: one communication thread
/// of lazyjit's makes its MPI calls, while kernels run on) when the process was started by
/// mpirun (or MPI was initialised already), and registers MPI as the carrier of collectives.
/// A process not started by a launcher is a world of one and does not initialise MPI.
/// Idempotent.
void init();
/// Leaves the job (MPI_Finalize if init initialised MPI); collectives become a world of one.
void finalize();
/// Whether init() joined a job (of any size, including one started by mpirun -np 1).
bool initialized();
/// Blocks until every rank has called barrier().
void barrier();

/// How long a collective waits for the other ranks before it fails with an Error (a rank that
/// died without its launcher noticing): LAZYJIT_DIST_TIMEOUT seconds, default 600.
double timeout_seconds();

}  // namespace lazyjit::dist
