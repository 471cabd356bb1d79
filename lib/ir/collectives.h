// Collective ops (all_reduce, broadcast, all_gather, reduce_scatter) are graph nodes like any
// other; who carries them out across the processes of a job is registered here (lazyjit::dist
// registers MPI). With none registered a process is a world of one, where each collective
// is a copy. The interpreter and the runtime both call it, so the layers above depend on this
// interface alone, never on MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ir/node.h"

namespace lazyjit::ir {

/// attrs[0] of all_reduce and reduce_scatter: how elements of the ranks combine.
enum class ReduceOp : int64_t { Sum = 0, Max = 1, Min = 2 };

/// One collective on buffers: `in` holds `in_count` elements of `dtype` (the node's operand,
/// row-major), `out` receives the node's `out_count` elements. `in` and `out` may be the
/// same buffer for all_reduce and broadcast (in place).
struct CollectiveCall {
  const Node* node = nullptr;
  const void* in = nullptr;
  int64_t in_count = 0;
  void* out = nullptr;
  int64_t out_count = 0;
};

/// A collective under way (Collectives::start): its buffers must stay as they are until
/// wait() returns.
class CollectiveRequest {
 public:
  virtual ~CollectiveRequest() = default;
  /// Blocks until the result is in the call's `out`; returns how long the collective was
  /// under way, in seconds. Throws what Collectives::run would.
  virtual double wait() = 0;
  /// After wait() threw: whether the collective may still read or write the call's buffers
  /// (it never finished: another rank is gone). Their owner must then never free them.
  virtual bool still_using_buffers() const { return false; }
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Carries out `call`, blocking until its result is in `out`. Every rank calls it with the
  /// same collectives in the same order; a rank whose operand differs in shape or dtype from
  /// another's gets (on every rank) a lazyjit::Error naming the collective and both shapes,
  /// before any data moves.
  virtual void run(const CollectiveCall& call) = 0;
  /// Before a run that will carry out `collectives` (in this order): checks that every rank
  /// is about to run the same ones, with operands of the same dtype and shape. A mismatch is
  /// the same Error on every rank, naming the first collective that differs and each rank's
  /// operand there, before any kernel of the run. By default nothing: a world of one.
  virtual void agree(std::span<const Node* const> collectives) {}
  /// Starts `call` and returns while it is under way, so that kernels can run meanwhile.
  /// Every rank starts the same collectives in the same order. By default: run() to the end.
  virtual std::unique_ptr<CollectiveRequest> start(const CollectiveCall& call);
};

/// Registers `backend` for the process (nullptr: back to a world of one). Set it before the
/// first collective is traced: a graph's collectives hold the world size they were traced in.
void set_collectives(std::shared_ptr<Collectives> backend);
/// The registered backend, or nullptr.
std::shared_ptr<Collectives> collectives();
int collective_rank();
int collective_world_size();
/// Copies the call's operand to its result (`out_count` elements), unless they are one buffer:
/// a world of one's collective, and broadcast's first step on every rank.
void copy_operand(const CollectiveCall& call);
/// Carries out `call` with the registered backend, or as a world of one.
void run_collective(const CollectiveCall& call);
/// agree() with the registered backend; nothing in a world of one.
void agree_collectives(std::span<const Node* const> nodes);
/// Starts `call` with the registered backend (or runs it as a world of one).
std::unique_ptr<CollectiveRequest> start_collective(const CollectiveCall& call);

/// The text of a reduce op ("sum", "max", "min").
std::string reduce_op_name(int64_t op);

}  // namespace lazyjit::ir
