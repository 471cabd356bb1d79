// The compile path: guardrail, disk cache, lowering, LLVM, dumps, explanations.
#include "runtime/graph_compiler.h"

#include <chrono>
#include <optional>

#include "fmt/format.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lowering/fusion.h"
#include "lowering/lower.h"
#include "lowering/plan.h"
#include "runtime/logging.h"

namespace lazyjit::runtime {
namespace {

int64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void GraphCompiler::warn_once(const std::string& what) {
  {
    std::lock_guard lock(warned_mutex_);
    if (!warned_.insert(what).second) return;
  }
  logger().warn("{}", what);
}

absl::StatusOr<codegen::CompileCache::Entry> GraphCompiler::compile(const ir::Graph& graph,
                                                                    const lowering::KernelPlan& plan,
                                                                    std::span<const lowering::Alias> aliases,
                                                                    const ir::Hash128& key,
                                                                    codegen::ForEachKernel for_each) {
  absl::StatusOr<Lowered> lowered = lower(graph, plan, aliases, key, for_each);
  if (!lowered.ok()) return lowered.status();
  absl::StatusOr<codegen::CompileCache::Entry> code = compile(*std::move(lowered), for_each);
  if (!code.ok()) log_.forget(graph);  // a failed compile does not use up the guardrail
  return code;
}

absl::StatusOr<GraphCompiler::Lowered> GraphCompiler::lower(const ir::Graph& graph, const lowering::KernelPlan& plan,
                                                            std::span<const lowering::Alias> aliases,
                                                            const ir::Hash128& key,
                                                            lowering::ForEachKernel for_each) {
  const Clock::time_point start = Clock::now();
  if (absl::Status status = ir::verify(graph); !status.ok()) return status;
  const bool guarded = options_.max_graphs > 0;
  const bool explain = guarded || should_log(spdlog::level::info);
  std::string why = explain ? log_.explain(graph) : std::string();
  if (!log_.admit(graph, static_cast<size_t>(options_.max_graphs))) {
    return absl::ResourceExhaustedError(
        fmt::format("LAZYJIT_MAX_GRAPHS={} distinct graphs are compiled already; this one {}", options_.max_graphs, why));
  }
  // Dumps are named by the graph key, plus the cache key when buffers are donated (the same
  // graph compiles differently then).
  std::string stem =
      aliases.empty() ? graph.key.to_hex() : fmt::format("{}-donating-{}", graph.key.to_hex(), key.to_hex());
  // The graph and its plan are dumped before lowering, its kernels before any LLVM work: a
  // graph that fails to lower or to compile is dumped as far as it got.
  const DumpDir& dump = options_.dump_dir;
  if (dump.enabled()) {
    dump.write(stem, ".ljir", ir::print_graph(graph, {.with_key = true, .with_values = true}));
    dump.write(stem, ".plan", lowering::print_plan(graph, plan));
  }
  lowering::LoweredGraph lowered = lowering::lower_graph(graph, plan, aliases, for_each);
  if (dump.enabled()) {
    dump.write(stem, ".kir", lowering::kernels_text(lowered));
    dump.write(stem, ".ll", compiler_.text(lowered, codegen::JitCompiler::Text::LlvmIr).value_or(""));
  }
  return Lowered{std::move(lowered), std::move(stem), std::move(why), graph.nodes.size(), start};
}

absl::StatusOr<codegen::CompileCache::Entry> GraphCompiler::compile(Lowered lowered, codegen::ForEachKernel for_each,
                                                                    bool background,
                                                                    const codegen::JitCompiler::Progress* progress) {
  const DumpDir& dump = options_.dump_dir;
  const size_t kernels = lowered.graph.kernels.size();
  codegen::JitCompiler::Report report;
  codegen::JitCompiler::Artifacts artifacts;
  const codegen::DiskCache* disk = options_.disk_cache.enabled() ? &options_.disk_cache : nullptr;
  auto code =
      compiler_.compile(std::move(lowered.graph), disk, &report, dump.enabled() ? &artifacts : nullptr, for_each, progress);
  for (const std::string& warning : report.warnings) warn_once(warning);
  if (!code.ok()) return code.status();
  const std::string& stem = lowered.stem;
  if (dump.enabled()) {
    dump.write(stem, ".opt.ll", artifacts.optimized_ir);
    dump.write(stem, ".s", artifacts.assembly);
  }
  const int64_t ns = nanoseconds_since(lowered.start);
  count(report, background);
  if (report.kernels_compiled > 0) counters_.compiles.fetch_add(1, std::memory_order_relaxed);
  counters_.compile_ns.fetch_add(ns, std::memory_order_relaxed);
  LAZYJIT_LOG(info,
              "compiled graph {} ({} nodes, {} kernel{}: {} compiled, {} cached, {} from disk; {:.1f} ms{}; LLVM thread "
              "time: optimising {:.1f} ms, machine code {:.1f} ms): {}",
              stem, lowered.nodes, kernels, kernels == 1 ? "" : "s", report.kernels_compiled,
              report.kernel_cache_hits, report.disk_cache_hits, ns / 1e6,
              background ? " in the background; tier 0 ran it meanwhile and compiled code runs it from its next "
                           "execution on"
                         : "",
              report.optimize_ns / 1e6, report.codegen_ns / 1e6, lowered.why);
  if (!background && ns / 1e9 > options_.slow_compile_seconds && !reported_slow_.exchange(true)) {
    LAZYJIT_LOG(warn,
                "compiling graph {} ({} nodes, {} kernels) took {:.1f} s. To cut it: call lazyjit::mark_step() at the "
                "end of each step (or sync() intermediate results) so that one graph holds one step's work, and set "
                "LAZYJIT_CACHE_DIR so that later runs load the code instead of compiling it (reported once)",
                stem, lowered.nodes, kernels, ns / 1e9);
  }
  return code;
}

absl::Status GraphCompiler::compile_kernels(const Lowered& lowered, std::span<const size_t> which,
                                            codegen::ForEachKernel for_each,
                                            const codegen::JitCompiler::Progress& progress) {
  const Clock::time_point start = Clock::now();
  codegen::JitCompiler::Report report;
  const codegen::DiskCache* disk = options_.disk_cache.enabled() ? &options_.disk_cache : nullptr;
  absl::Status done = compiler_.compile_kernels(lowered.graph, which, disk, &report, for_each, &progress);
  for (const std::string& warning : report.warnings) warn_once(warning);
  if (!done.ok()) return done;
  count(report, /*background=*/true);
  const int64_t ns = nanoseconds_since(start);
  counters_.compile_ns.fetch_add(ns, std::memory_order_relaxed);
  LAZYJIT_LOG(info,
              "compiled {} hot kernel{} of graph {} ({} compiled, {} cached, {} from disk; {:.1f} ms in the "
              "background; LLVM thread time: optimising {:.1f} ms, machine code {:.1f} ms); tier 0 runs the rest",
              which.size(), which.size() == 1 ? "" : "s", lowered.stem, report.kernels_compiled,
              report.kernel_cache_hits, report.disk_cache_hits, ns / 1e6, report.optimize_ns / 1e6,
              report.codegen_ns / 1e6);
  return absl::OkStatus();
}

void GraphCompiler::count(const codegen::JitCompiler::Report& report, bool background) {
  counters_.kernels_compiled.fetch_add(report.kernels_compiled, std::memory_order_relaxed);
  if (background) counters_.kernels_compiled_background.fetch_add(report.kernels_compiled, std::memory_order_relaxed);
  counters_.kernel_cache_hits.fetch_add(report.kernel_cache_hits, std::memory_order_relaxed);
  counters_.disk_cache_hits.fetch_add(report.disk_cache_hits, std::memory_order_relaxed);
  llvm_ns_.fetch_add(report.optimize_ns + report.codegen_ns, std::memory_order_relaxed);
  llvm_kernels_.fetch_add(report.kernels_compiled, std::memory_order_relaxed);
}

int64_t GraphCompiler::kernel_compile_ns(int64_t prior_ns) const {
  const int64_t kernels = llvm_kernels_.load(std::memory_order_relaxed);
  return kernels > 0 ? llvm_ns_.load(std::memory_order_relaxed) / kernels : prior_ns;
}

}  // namespace lazyjit::runtime
