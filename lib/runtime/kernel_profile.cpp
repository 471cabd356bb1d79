// LAZYJIT_PROFILE: per-kernel wall time, printed at exit.
#include "runtime/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"

namespace lazyjit::runtime {
namespace {

struct Entry {
  std::string what;
  int64_t runs = 0, ns = 0;
};

struct Table {
  mutable std::mutex mutex;
  absl::flat_hash_map<std::pair<ir::Hash128, size_t>, Entry> entries;
};

Table& table() {
  static Table* t = new Table;  // outlives every static destructor that may still run kernels
  return *t;
}

}  // namespace

KernelProfile* KernelProfile::get() {
  static KernelProfile* profile = [] {
    const char* text = std::getenv("LAZYJIT_PROFILE");
    if (text == nullptr || std::string_view(text).empty() || std::string_view(text) == "0") return static_cast<KernelProfile*>(nullptr);
    static KernelProfile instance;
    if (std::string_view(text) == "all") instance.printed_ = SIZE_MAX;
    return &instance;
  }();
  return profile;
}

void KernelProfile::add(const ir::Hash128& graph, size_t kernel, int64_t ns, const std::function<std::string()>& describe) {
  Table& t = table();
  const std::lock_guard lock(t.mutex);
  Entry& e = t.entries[{graph, kernel}];
  if (e.runs++ == 0) e.what = fmt::format("graph {} k{}: {}", graph.to_hex().substr(0, 8), kernel, describe());
  e.ns += ns;
}

std::string KernelProfile::report(size_t limit) const {
  const Table& t = table();
  const std::lock_guard lock(t.mutex);
  std::vector<const Entry*> sorted;
  int64_t total = 0;
  for (const auto& [key, e] : t.entries) {
    sorted.push_back(&e);
    total += e.ns;
  }
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) { return a->ns > b->ns; });
  std::string out = fmt::format("lazyjit kernel profile: {} kernels, {:.3f} ms in all\n", sorted.size(), total * 1e-6);
  out += fmt::format("{:>10} {:>6} {:>8} {:>10}  kernel\n", "total ms", "%", "runs", "us/run");
  for (size_t i = 0; i < sorted.size() && i < limit; ++i) {
    const Entry& e = *sorted[i];
    out += fmt::format("{:>10.3f} {:>6.1f} {:>8} {:>10.1f}  {}\n", e.ns * 1e-6, total > 0 ? 100.0 * e.ns / total : 0.0, e.runs,
                       e.ns * 1e-3 / e.runs, e.what);
  }
  return out;
}

KernelProfile::~KernelProfile() { std::fputs(report(printed_).c_str(), stderr); }

}  // namespace lazyjit::runtime
