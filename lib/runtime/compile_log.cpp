// Compile explanations.
#include "runtime/compile_log.h"

#include "fmt/format.h"

namespace lazyjit::runtime {

std::string CompileLog::explain_and_record(const ir::Graph& graph) {
  ir::GraphSignature signature = ir::signature_of(graph);
  std::lock_guard lock(mutex_);
  std::string why = "new graph (nothing compiled before)";
  const ir::GraphSignature* nearest = nullptr;
  size_t best = 0;
  for (const ir::GraphSignature& cached : recent_) {
    const size_t shared = ir::common_prefix(signature, cached);
    if (nearest == nullptr || shared > best) {
      nearest = &cached;
      best = shared;
    }
  }
  if (nearest != nullptr) {
    const std::string difference = ir::describe_difference(signature, *nearest);
    why = difference.empty() ? fmt::format("same structure as graph {} (recompiled after eviction)",
                                           nearest->key.to_hex())
                             : fmt::format("differs from graph {} at {}", nearest->key.to_hex(), difference);
  }
  recent_.push_front(std::move(signature));
  if (recent_.size() > capacity_) recent_.pop_back();
  ++recorded_;
  return why;
}

size_t CompileLog::distinct_graphs() const {
  std::lock_guard lock(mutex_);
  return recorded_;
}

}  // namespace lazyjit::runtime
