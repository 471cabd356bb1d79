// The custom gradient rules, by result node.
#include "runtime/custom_gradient.h"

#include <algorithm>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace lazyjit::runtime {
namespace {

struct Entry {
  std::weak_ptr<const ir::Node> node;  // the key's node, to tell a reused address from it
  std::shared_ptr<const CustomGradient> gradient;
};

struct Registry {
  std::mutex mutex;
  absl::flat_hash_map<const ir::Node*, Entry> entries;
  size_t prune_at = 64;  // entries whose node died are dropped when the map doubles
};

Registry& registry() {
  static Registry* r = new Registry;  // used by static destructors' tensors too
  return *r;
}

}  // namespace

void set_custom_gradient(const ir::NodePtr& result, CustomGradient gradient) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (r.entries.size() >= r.prune_at) {
    absl::erase_if(r.entries, [](const auto& entry) { return entry.second.node.expired(); });
    r.prune_at = std::max<size_t>(64, 2 * r.entries.size());
  }
  r.entries[result.get()] = {result, std::make_shared<const CustomGradient>(std::move(gradient))};
}

CustomGradients custom_gradients() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  CustomGradients live;
  absl::erase_if(r.entries, [&](const auto& entry) {
    if (entry.second.node.expired()) return true;  // its node died (its address may be reused)
    live.emplace(entry.first, entry.second.gradient);
    return false;
  });
  return live;
}

}  // namespace lazyjit::runtime
