#include "ir/collectives.h"

#include <chrono>
#include <cstring>
#include <mutex>

#include "fmt/format.h"
#include "lazyjit/error.h"

namespace lazyjit::ir {
namespace {

std::mutex& backend_mutex() {
  static std::mutex m;
  return m;
}
std::shared_ptr<Collectives>& backend_slot() {
  static std::shared_ptr<Collectives> slot;
  return slot;
}

/// A request that was over when it was made.
class Done final : public CollectiveRequest {
 public:
  explicit Done(double seconds) : seconds_(seconds) {}
  double wait() override { return seconds_; }

 private:
  double seconds_;
};

/// Runs `run` to the end and returns it as a finished request.
template <class Run>
std::unique_ptr<CollectiveRequest> run_to_end(Run run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::make_unique<Done>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace

std::unique_ptr<CollectiveRequest> Collectives::start(const CollectiveCall& call) {
  return run_to_end([&] { run(call); });
}

void agree_collectives(std::span<const Node* const> nodes) {
  if (const std::shared_ptr<Collectives> backend = collectives()) backend->agree(nodes);
}

std::unique_ptr<CollectiveRequest> start_collective(const CollectiveCall& call) {
  if (const std::shared_ptr<Collectives> backend = collectives()) return backend->start(call);
  return run_to_end([&] { run_collective(call); });
}

void set_collectives(std::shared_ptr<Collectives> backend) {
  std::lock_guard lock(backend_mutex());
  backend_slot() = std::move(backend);
}

std::shared_ptr<Collectives> collectives() {
  std::lock_guard lock(backend_mutex());
  return backend_slot();
}

int collective_rank() {
  const std::shared_ptr<Collectives> backend = collectives();
  return backend ? backend->rank() : 0;
}

int collective_world_size() {
  const std::shared_ptr<Collectives> backend = collectives();
  return backend ? backend->world_size() : 1;
}

void run_collective(const CollectiveCall& call) {
  if (const std::shared_ptr<Collectives> backend = collectives()) return backend->run(call);
  // A world of one: every collective gives its operand back.
  if (call.in_count != call.out_count) {
    throw Error(fmt::format("{}: traced in a world of more than one process, run in a world of one (no "
                            "lazyjit::dist::init)",
                            op_name(call.node->op())));
  }
  copy_operand(call);
}

void copy_operand(const CollectiveCall& call) {
  if (call.in != call.out) std::memcpy(call.out, call.in, static_cast<size_t>(call.out_count * dtype_size(call.node->dtype())));
}

std::string reduce_op_name(int64_t op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return fmt::format("op {}", op);
}

}  // namespace lazyjit::ir
