// Materialisation: collect, key, compile or hit, allocate, run, assign.
#include "runtime/graph_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lazyjit/error.h"
#include "llvm/Support/raw_ostream.h"
#include "lowering/lower.h"
#include "runtime/logging.h"

namespace lazyjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;

int64_t nanoseconds_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

}  // namespace

void RuntimeCounters::reset() {
  for (auto* c : {&graphs_traced, &nodes_traced, &graphs_executed, &compiles, &bytes_in, &bytes_out,
                  &kernels_launched, &compile_ns, &execute_ns}) {
    c->store(0);
  }
}

void GraphExecutor::sync(std::vector<std::shared_ptr<detail::TensorImpl>> tensors) {
  std::vector<std::shared_ptr<detail::TensorImpl>> targets;
  std::vector<ir::NodePtr> roots;  // taken now: another thread may move a tensor on
  absl::flat_hash_set<const detail::TensorImpl*> seen;
  auto first_time = [&](const detail::TensorImpl* t) {  // a linear scan while few
    if (tensors.size() > 8) return seen.insert(t).second;
    return std::none_of(targets.begin(), targets.end(), [&](const auto& u) { return u.get() == t; });
  };
  for (auto& t : tensors) {
    if (!t || !first_time(t.get())) continue;
    ir::NodePtr value = t->ir();
    if (value == nullptr) continue;  // already materialised
    roots.push_back(std::move(value));
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return;
  counters_.graphs_traced.fetch_add(1, std::memory_order_relaxed);
  const ir::Graph graph = ir::build_graph(roots);
  std::shared_ptr<const codegen::CompiledGraph> code = compiled(graph);
  execute(graph, *code, targets);
}

void GraphExecutor::mark_step() { sync(live_.snapshot()); }

std::shared_ptr<const codegen::CompiledGraph> GraphExecutor::compiled(const ir::Graph& graph) {
  const ir::Hash128& target = compiler_.fingerprint();
  const uint64_t words[] = {graph.key.low, graph.key.high, target.low, target.high};
  const ir::Hash128 key = ir::hash_words(words);
  auto result = cache_.get_or_compile(key, [&] { return compile(graph); });
  if (!result.ok()) {
    throw Error(fmt::format("compiling graph {}: {}", graph.key.to_hex(), std::string(result.status().message())));
  }
  return *std::move(result);
}

absl::StatusOr<codegen::CompileCache::Entry> GraphExecutor::compile(const ir::Graph& graph) {
  const ir::Hash128& key = graph.key;  // names dumps and log lines as the .ljir's key comment does
  const Clock::time_point start = Clock::now();
  if (absl::Status status = ir::verify(graph); !status.ok()) return status;
  const bool explain = logger().should_log(spdlog::level::info);
  const std::string why = explain ? compile_log_.explain_and_record(graph) : std::string();

  lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  codegen::JitCompiler::Artifacts artifacts;
  if (dump_dir_.enabled()) {
    dump_dir_.write(key, ".ljir", ir::print_graph(graph, {.with_key = true, .with_values = true}));
    dump_dir_.write(key, ".ll", module_text(*lowered.module));
  }
  auto code = compiler_.compile(std::move(lowered), dump_dir_.enabled() ? &artifacts : nullptr);
  if (!code.ok()) return code.status();
  if (dump_dir_.enabled()) {
    dump_dir_.write(key, ".opt.ll", artifacts.optimized_ir);
    dump_dir_.write(key, ".s", artifacts.assembly);
  }
  const int64_t ns = nanoseconds_since(start);
  counters_.compiles.fetch_add(1, std::memory_order_relaxed);
  counters_.compile_ns.fetch_add(ns, std::memory_order_relaxed);
  const size_t kernels = (*code)->kernels().size();
  LAZYJIT_LOG(info, "compiled graph {} ({} nodes, {} kernel{}, {:.1f} ms): {}", key.to_hex(), graph.nodes.size(),
              kernels, kernels == 1 ? "" : "s", ns / 1e6, why);
  return code;
}

void GraphExecutor::execute(const ir::Graph& graph, const codegen::CompiledGraph& code,
                            const std::vector<std::shared_ptr<detail::TensorImpl>>& targets) {
  const size_t num_parameters = graph.parameters.size();
  const size_t num_results = graph.roots.size();
  std::vector<void*> buffers(num_parameters + num_results + 1);
  for (size_t p = 0; p < num_parameters; ++p) buffers[p] = graph.parameters[p]->data()->data();

  std::vector<BackendDataPtr> outputs(num_results);
  for (size_t r = 0; r < num_results; ++r) {
    const ir::Node& root = *graph.nodes[graph.roots[r]];
    outputs[r] = std::make_shared<CpuBuffer>(allocator_, root.dtype(),
                                             std::vector<int64_t>(root.shape().begin(), root.shape().end()));
    buffers[num_parameters + r] = outputs[r]->data();
  }
  std::vector<ir::ScalarValue> scalars;
  scalars.reserve(graph.scalars.size());
  for (int n : graph.scalars) scalars.push_back(graph.nodes[n]->scalar());
  buffers[lowering::scalar_table_index(num_parameters, num_results)] = scalars.data();

  const Clock::time_point start = Clock::now();
  for (size_t k = 0; k < code.kernels().size(); ++k) {
    const ir::Shape& shape = graph.nodes[graph.roots[code.kernels()[k].iteration_result]]->shape();
    executor_.run(code.function(k), buffers.data(), shape.data(), ir::numel(shape));
  }
  counters_.execute_ns.fetch_add(nanoseconds_since(start), std::memory_order_relaxed);
  counters_.kernels_launched.fetch_add(static_cast<int64_t>(code.kernels().size()), std::memory_order_relaxed);
  counters_.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  // A tensor updated in place meanwhile (by another thread) keeps its newer IR.
  for (size_t r = 0; r < num_results; ++r) targets[r]->set_data(std::move(outputs[r]), graph.nodes[graph.roots[r]]);
}

std::string GraphExecutor::dump(const std::vector<std::shared_ptr<detail::TensorImpl>>& tensors,
                                DumpFormat format) {
  std::vector<ir::NodePtr> roots;
  for (const auto& t : tensors) {
    if (!t) throw Error("dump: a tensor is undefined");
    roots.push_back(t->ir_value());
  }
  const ir::Graph graph = ir::build_graph(roots);
  if (format == DumpFormat::LazyIr) return ir::print_graph(graph);
  lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  if (format == DumpFormat::LlvmIr) return module_text(*lowered.module);
  compiler_.optimize(*lowered.module);
  if (format == DumpFormat::OptimizedLlvmIr) return module_text(*lowered.module);
  absl::StatusOr<std::string> assembly = compiler_.assembly(*lowered.module);
  if (!assembly.ok()) throw Error(fmt::format("dump: {}", std::string(assembly.status().message())));
  return *std::move(assembly);
}

}  // namespace lazyjit::runtime
