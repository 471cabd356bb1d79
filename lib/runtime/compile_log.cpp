// Compile explanations.
#include "runtime/compile_log.h"

#include "fmt/format.h"

namespace lazyjit::runtime {

std::string CompileLog::explain(const ir::Graph& graph) const {
  const ir::GraphSignature signature = ir::signature_of(graph);
  std::lock_guard lock(mutex_);
  const ir::GraphSignature* nearest = nullptr;
  size_t best = 0;
  for (const ir::GraphSignature& cached : recent_) {
    const size_t shared = ir::common_prefix(signature, cached);
    if (nearest == nullptr || shared > best) {
      nearest = &cached;
      best = shared;
    }
  }
  if (nearest == nullptr) return "new graph (nothing compiled before)";
  const std::string difference = ir::describe_difference(signature, *nearest);
  if (difference.empty()) {
    return fmt::format("same structure as graph {} (compiled again: evicted, or other buffers donated)",
                       nearest->key.to_hex());
  }
  return fmt::format("differs from graph {} at {}", nearest->key.to_hex(), difference);
}

bool CompileLog::admit(const ir::Graph& graph, size_t max_graphs) {
  ir::GraphSignature signature = ir::signature_of(graph);
  std::lock_guard lock(mutex_);
  if (max_graphs > 0 && keys_.size() >= max_graphs && !keys_.contains(graph.key)) return false;
  keys_.insert(graph.key);
  recent_.push_front(std::move(signature));
  if (recent_.size() > capacity_) recent_.pop_back();
  return true;
}

void CompileLog::forget(const ir::Graph& graph) {
  std::lock_guard lock(mutex_);
  keys_.erase(graph.key);
  std::erase_if(recent_, [&](const ir::GraphSignature& s) { return s.key == graph.key; });
}

size_t CompileLog::distinct_graphs() const {
  std::lock_guard lock(mutex_);
  return keys_.size();
}

}  // namespace lazyjit::runtime
