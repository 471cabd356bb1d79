// The default runtime, the public metrics and materialisation entry points.
#include "runtime/runtime.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "fmt/format.h"
#include "lazyjit/error.h"
#include "runtime/logging.h"
#include "tbb/info.h"

namespace lazyjit::runtime {
namespace {

/// A non-negative integer from the environment, at most `max`; `fallback` when unset.
int64_t env_int(const char* name, int64_t fallback, int64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || value < 0 || value > max) {
    throw Error(fmt::format("{}={} is not an integer from 0 to {}", name, text, max));
  }
  return value;
}

std::string env_string(const char* name) {
  const char* text = std::getenv(name);
  return text ? text : "";
}

/// The on-disk cache LAZYJIT_CACHE_DIR names; off, with a warning, when its directory cannot
/// be trusted or created.
codegen::DiskCache disk_cache() {
  absl::StatusOr<codegen::DiskCache> cache = codegen::DiskCache::open(env_string("LAZYJIT_CACHE_DIR"));
  if (cache.ok()) return *std::move(cache);
  LAZYJIT_LOG(warn, "LAZYJIT_CACHE_DIR: {}; the disk cache is off", std::string(cache.status().message()));
  return codegen::DiskCache();
}

CompileOptions compile_options() {
  return {.dump_dir = DumpDir(env_string("LAZYJIT_DUMP_DIR")),
          .disk_cache = disk_cache(),
          .max_graphs = env_int("LAZYJIT_MAX_GRAPHS", 0, int64_t{1} << 30)};
}

std::unique_ptr<codegen::JitCompiler> create_compiler() {
  auto compiler = codegen::JitCompiler::create();
  if (!compiler.ok()) {
    throw Error(fmt::format("starting the JIT: {}", std::string(compiler.status().message())));
  }
  return *std::move(compiler);
}

/// LAZYJIT_TIER: auto (the default), 0 or 1.
Tier env_tier() {
  const std::string text = env_string("LAZYJIT_TIER");
  if (text.empty() || text == "auto") return Tier::Auto;
  if (text == "0") return Tier::Interpret;
  if (text == "1") return Tier::Compile;
  throw Error(fmt::format("LAZYJIT_TIER={} is not auto, 0 (tier 0 only) or 1 (compiled code only)", text));
}

int runtime_threads() {
  return static_cast<int>(env_int("LAZYJIT_NUM_THREADS", tbb::info::default_concurrency(), 4096));
}

}  // namespace

Runtime::Runtime()
    : compiler_(create_compiler()),
      cache_(static_cast<size_t>(env_int("LAZYJIT_CACHE_SIZE", 1024, int64_t{1} << 30))),
      executor_(runtime_threads()),
      graph_executor_(*compiler_, cache_, executor_, allocator_, live_, counters_, compile_options()) {
  graph_executor_.set_tier(env_tier());
  if (!env_string("LAZYJIT_COMPILE_COST_MS").empty()) {
    graph_executor_.set_compile_cost(env_int("LAZYJIT_COMPILE_COST_MS", 0, int64_t{1} << 30) * 1'000'000);
  }
}

Runtime& Runtime::get() {
  static Runtime* instance = new Runtime;  // leaked on purpose: see the class comment
  return *instance;
}

Metrics Runtime::metrics() const {
  const codegen::CompileCache::Stats cache = cache_.stats();
  const CachingAllocator::Stats memory = allocator_.stats();
  Metrics m;
  m.graphs_traced = counters_.graphs_traced.load();
  m.nodes_traced = counters_.nodes_traced.load();
  m.graphs_executed = counters_.graphs_executed.load();
  m.graphs_planned = counters_.graphs_planned.load();
  m.compiles = counters_.compiles.load();
  m.kernels_compiled = counters_.kernels_compiled.load();
  m.kernel_cache_hits = counters_.kernel_cache_hits.load();
  m.disk_cache_hits = counters_.disk_cache_hits.load();
  m.donations = counters_.donations.load();
  m.cache_hits = cache.hits;
  m.cache_misses = cache.misses;
  m.evictions = cache.evictions;
  m.bytes_allocated = memory.bytes_allocated;
  m.bytes_reused = memory.bytes_reused;
  m.bytes_in = counters_.bytes_in.load();
  m.bytes_out = counters_.bytes_out.load();
  m.kernels_launched = counters_.kernels_launched.load();
  m.tier0_kernel_runs = counters_.tier0_kernel_runs.load();
  m.kernels_compiled_background = counters_.kernels_compiled_background.load();
  m.tier_switches = counters_.tier_switches.load();
  m.plan_seconds = counters_.plan_ns.load() / 1e9;
  m.compile_seconds = counters_.compile_ns.load() / 1e9;
  m.tier0_prepare_seconds = counters_.tier0_prepare_ns.load() / 1e9;
  m.execute_seconds = counters_.execute_ns.load() / 1e9;
  m.collectives = counters_.collectives.load();
  m.collectives_overlapped = counters_.collectives_overlapped.load();
  m.collective_seconds = counters_.collective_ns.load() / 1e9;
  m.collective_wait_seconds = counters_.collective_wait_ns.load() / 1e9;
  return m;
}

void Runtime::reset_metrics() {
  counters_.reset();
  cache_.reset_stats();
  allocator_.reset_stats();
}

}  // namespace lazyjit::runtime

namespace lazyjit {

using runtime::Runtime;

namespace {

std::vector<std::shared_ptr<detail::TensorImpl>> impls(const std::vector<Tensor>& tensors, const char* op) {
  std::vector<std::shared_ptr<detail::TensorImpl>> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) throw Error(fmt::format("{}: tensor {} is undefined", op, i));
    out.push_back(tensors[i].impl());
  }
  return out;
}

}  // namespace

void sync(const std::vector<Tensor>& tensors) { Runtime::get().graph_executor().sync(impls(tensors, "sync")); }

void mark_step() { Runtime::get().graph_executor().mark_step(); }

void set_tier(Tier tier) { Runtime::get().graph_executor().set_tier(tier); }

Tier tier() { return Runtime::get().graph_executor().tier(); }

void wait_for_compiles() { Runtime::get().graph_executor().wait_for_compiles(); }

void set_compile_cost(double milliseconds) {
  if (std::isnan(milliseconds)) throw Error("set_compile_cost: the cost is NaN");
  Runtime::get().graph_executor().set_compile_cost(
      milliseconds < 0 ? -1 : static_cast<int64_t>(std::min(milliseconds, 1e12) * 1e6));
}

void set_compile_cache_capacity(int64_t entries) {
  if (entries < 0) throw Error(fmt::format("set_compile_cache_capacity: {} entries is negative", entries));
  Runtime::get().graph_executor().set_cache_capacity(static_cast<size_t>(entries));
}

Metrics metrics() { return Runtime::get().metrics(); }

void reset_metrics() { Runtime::get().reset_metrics(); }

std::string metrics_report() {
  const Metrics m = metrics();
  std::string out = "lazyjit metrics\n";
  auto line = [&](std::string_view name, auto value) { out += fmt::format("  {:<18} {}\n", name, value); };
  line("graphs_traced", m.graphs_traced);
  line("nodes_traced", m.nodes_traced);
  line("graphs_executed", m.graphs_executed);
  line("graphs_planned", m.graphs_planned);
  line("compiles", m.compiles);
  line("kernels_compiled", m.kernels_compiled);
  line("kernel_cache_hits", m.kernel_cache_hits);
  line("cache_hits", m.cache_hits);
  line("cache_misses", m.cache_misses);
  line("disk_cache_hits", m.disk_cache_hits);
  line("evictions", m.evictions);
  line("donations", m.donations);
  line("kernels_launched", m.kernels_launched);
  line("tier0_kernel_runs", m.tier0_kernel_runs);
  line("kernels_compiled_bg", m.kernels_compiled_background);
  line("tier_switches", m.tier_switches);
  line("bytes_allocated", m.bytes_allocated);
  line("bytes_reused", m.bytes_reused);
  line("bytes_in", m.bytes_in);
  line("bytes_out", m.bytes_out);
  line("plan_ms", fmt::format("{:.3f}", m.plan_seconds * 1e3));
  line("compile_ms", fmt::format("{:.3f}", m.compile_seconds * 1e3));
  line("tier0_prepare_ms", fmt::format("{:.3f}", m.tier0_prepare_seconds * 1e3));
  line("execute_ms", fmt::format("{:.3f}", m.execute_seconds * 1e3));
  line("collectives", m.collectives);
  line("collectives_overlapped", m.collectives_overlapped);
  line("collective_ms", fmt::format("{:.3f}", m.collective_seconds * 1e3));
  line("collective_wait_ms", fmt::format("{:.3f}", m.collective_wait_seconds * 1e3));
  line("target", Runtime::get().compiler().target_description());
  return out;
}

std::string dump(const std::vector<Tensor>& tensors, DumpFormat format) {
  return Runtime::get().graph_executor().dump(impls(tensors, "dump"), format);
}

}  // namespace lazyjit
