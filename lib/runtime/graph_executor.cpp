// Materialisation: collect, key, compile or hit, allocate, run, assign.
#include "runtime/graph_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include "codegen/kir_nvptx.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/structured.h"
#include "ir/verifier.h"
#include "lazyjit/error.h"
#include "lowering/lower.h"
#include "lowering/shape_table.h"
#include "lowering/plan.h"
#include "runtime/collective_runs.h"
#include "runtime/donation.h"
#include "runtime/kernel_profile.h"
#include "runtime/logging.h"
#include "runtime/stack_thread.h"
#include "runtime/temp_layout.h"

namespace lazyjit::runtime {
namespace {

using Clock = std::chrono::steady_clock;

/// Lowering recurses kMaxFusedDepth levels at most. A thread that compiles a graph runs its
/// share of the kernels' compiles in place (kCompileThreadStackBytes).
constexpr size_t kLowerStackBytes = size_t{4} << 20;

/// `task` with a kernel compile's stack: in place on a thread started for compiles, on a
/// thread of its own on one with less room (a user's oneTBB worker started before ours).
void with_compile_stack(absl::FunctionRef<void(size_t)> task, size_t i) {
  run_with_stack(kKernelCompileStackBytes, [&] { task(i); });
}

int64_t nanoseconds_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

void GraphExecutor::sync(std::vector<std::shared_ptr<detail::TensorImpl>> tensors) {
  std::shared_lock lock(barrier_mutex_);
  materialize(std::move(tensors), false);
}

void GraphExecutor::mark_step() {
  std::unique_lock lock(barrier_mutex_);
  watch_growth(0);
  drop_kept_histories();  // before donations are planned: a kept graph would hold old buffers
  std::vector<std::shared_ptr<detail::TensorImpl>> tensors = live_.snapshot(std::this_thread::get_id());
  // Claimed before donations are planned: from here no other thread can make new IR that
  // reads these tensors' old values, so the plan's ownership counts stay true.
  for (const auto& t : tensors) t->claim();
  struct Release {
    std::vector<std::shared_ptr<detail::TensorImpl>> tensors;
    LiveTensors& live;
    ~Release() {
      for (const auto& t : tensors) t->release_claim();
      live.finish_barrier();
    }
  } release{tensors, live_};
  materialize(std::move(tensors), true);
}

void GraphExecutor::materialize(std::vector<std::shared_ptr<detail::TensorImpl>> tensors, bool barrier) {
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
  tensors.clear();  // the snapshot's references must not count as owners below
  if (targets.empty()) return;
  counters_.graphs_traced.fetch_add(1, std::memory_order_relaxed);
  const ir::Graph graph = ir::build_graph(roots);
  roots.clear();  // the graph holds them now
  if (!barrier) watch_growth(graph.nodes.size());
  // A sync donates nothing, and needs the plan only to compile.
  std::shared_ptr<const lowering::KernelPlan> plan = barrier ? plan_of(graph) : nullptr;
  std::vector<lowering::Alias> aliases;
  if (barrier) aliases = plan_donations(graph, *plan);
  const bool keep_history = !barrier && keep_history_.load(std::memory_order_relaxed);
  // The cache key: the graph's structure, its donations, and the compiler's target.
  const ir::Hash128& target = compiler_.fingerprint();
  std::vector<uint64_t> words = {graph.key.low, graph.key.high, target.low, target.high};
  for (const lowering::Alias& a : aliases) words.push_back(static_cast<uint64_t>(a.result) << 32 | a.parameter);
  const ir::Hash128 key = ir::hash_words(words);
  const Tier tier = tier_.load(std::memory_order_relaxed);
  if (tier != Tier::Compile) {
    if (auto code = tier == Tier::Auto ? cache_.find_ready(key) : nullptr) {
      execute(graph, {code->plan(), code.get(), nullptr}, aliases, targets, keep_history);
      return;
    }
    std::shared_ptr<const Tier0Graph> code = interpreted(graph, std::move(plan), aliases, key, tier == Tier::Auto);
    const Clock::time_point run_start = Clock::now();
    execute(graph, {code->plan, nullptr, code.get(), tier == Tier::Interpret}, aliases, targets, keep_history);
    // Queued once the run has given the user its results: compiling beside it would slow it.
    if (tier == Tier::Auto) {
      const int64_t run_ns = nanoseconds_since(run_start);
      if (Tier0Graph::Compile compile = code->after_run(run_ns, compile_cost_ns()); compile.job != nullptr) {
        compile_in_background(key, std::move(compile), std::move(code));
      }
    }
    return;
  }
  std::shared_ptr<const codegen::CompiledGraph> code = compiled(graph, std::move(plan), aliases, key);
  execute(graph, {code->plan(), code.get(), nullptr}, aliases, targets, keep_history);
}

std::shared_ptr<const lowering::KernelPlan> GraphExecutor::plan_of(const ir::Graph& graph) {
  absl::StatusOr<std::shared_ptr<const lowering::KernelPlan>> plan = plans_.get_or_make(graph.key, [&] {
    counters_.graphs_planned.fetch_add(1, std::memory_order_relaxed);
    const Clock::time_point start = Clock::now();
    auto plan = std::make_shared<const lowering::KernelPlan>(lowering::plan_graph(graph));
    counters_.plan_ns.fetch_add(nanoseconds_since(start), std::memory_order_relaxed);
    return plan;
  });
  return *std::move(plan);  // planning fails only by throwing
}

std::shared_ptr<const codegen::CompiledGraph> GraphExecutor::compiled(const ir::Graph& graph,
                                                                      std::shared_ptr<const lowering::KernelPlan> plan,
                                                                      std::span<const lowering::Alias> aliases,
                                                                      const ir::Hash128& key) {
  auto result = cache_.get_or_make(key, [&] {
    return run_with_stack(kCompileThreadStackBytes, [&] {
      if (plan == nullptr) plan = plan_of(graph);
      return graph_compiler_.compile(graph, *plan, aliases, key, [this](size_t count, auto task) {
        on_runtime_threads(kKernelCompileStackBytes, count, task);
      });
    });
  });
  if (!result.ok()) {
    throw Error(fmt::format("compiling graph {}: {}", graph.key.to_hex(), std::string(result.status().message())));
  }
  return *std::move(result);
}

std::shared_ptr<const Tier0Graph> GraphExecutor::interpreted(const ir::Graph& graph,
                                                             std::shared_ptr<const lowering::KernelPlan> plan,
                                                             std::span<const lowering::Alias> aliases,
                                                             const ir::Hash128& key, bool compile_in_background) {
  auto result = tier0_graphs_.get_or_make(key, [&]() -> absl::StatusOr<std::shared_ptr<const Tier0Graph>> {
    Clock::time_point start;  // after planning, which plan_ns counts
    // Each kernel's IR is built, and then made ready for tier 0, as a task on the runtime's
    // threads: the user waits for this graph, and under auto no compile runs yet.
    auto lower_on_runtime_threads = [this](size_t count, absl::FunctionRef<void(size_t)> task) {
      on_runtime_threads(kLowerStackBytes, count, task);
    };
    absl::StatusOr<GraphCompiler::Lowered> lowered = run_with_stack(kLowerStackBytes, [&] {
      if (plan == nullptr) plan = plan_of(graph);
      start = Clock::now();
      return graph_compiler_.lower(graph, *plan, aliases, key, lower_on_runtime_threads);
    });
    if (!lowered.ok()) return lowered.status();
    const std::vector<lowering::LoweredKernel>& kernels = lowered->graph.kernels;
    std::vector<std::optional<Tier0Kernel>> prepared(kernels.size());
    lower_on_runtime_threads(kernels.size(), [&](size_t k) { prepared[k].emplace(kernels[k].kir); });
    std::vector<Tier0Kernel> ready;
    std::vector<std::shared_ptr<const codegen::CompiledKernel>> compiled;
    for (size_t k = 0; k < kernels.size(); ++k) {
      ready.push_back(*std::move(prepared[k]));
      compiled.push_back(compiler_.find(kernels[k]));
    }
    const bool all_compiled = std::all_of(compiled.begin(), compiled.end(), [](const auto& c) { return c != nullptr; });
    std::vector<ir::Hash128> contents;
    for (const lowering::LoweredKernel& kernel : kernels) contents.push_back(kernel.content);
    auto code = std::make_shared<Tier0Graph>(lowered->graph.plan, std::move(ready), std::move(compiled), contents);
    if (compile_in_background && !all_compiled) {
      // The job holds no graph: a graph would keep its parameters' buffers from being donated.
      code->keep_for_compile(std::make_shared<GraphCompiler::Lowered>(*std::move(lowered)));
    }
    counters_.tier0_prepare_ns.fetch_add(nanoseconds_since(start), std::memory_order_relaxed);
    return code;
  });
  if (!result.ok()) {
    throw Error(fmt::format("compiling graph {}: {}", graph.key.to_hex(), std::string(result.status().message())));
  }
  return *std::move(result);
}

void GraphExecutor::on_runtime_threads(size_t stack_bytes, size_t count, absl::FunctionRef<void(size_t)> task) const {
  executor_.for_each(count, [&](size_t i) { run_with_stack(stack_bytes, [&] { task(i); }); });
}

std::vector<size_t> Tier0Graph::slowest_first(std::vector<size_t> order) const {
  if (order.empty()) {
    order.resize(kernels.size());
    std::iota(order.begin(), order.end(), size_t{0});
  }
  std::vector<int64_t> ns(kernels.size());
  for (size_t k = 0; k < ns.size(); ++k) ns[k] = tier0_ns_[k].load(std::memory_order_relaxed);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ns[a] > ns[b]; });
  return order;
}

Tier0Graph::Compile Tier0Graph::after_run(int64_t run_ns, int64_t cost_ns) const {
  std::lock_guard lock(pending_mutex_);
  if (pending_ == nullptr) return {};
  std::vector<int64_t> ns(kernels.size());
  for (size_t k = 0; k < ns.size(); ++k) ns[k] = tier0_ns_[k].load(std::memory_order_relaxed);
  std::vector<bool> has_code(kernels.size());
  {
    std::lock_guard code_lock(compiled_mutex_);
    for (size_t k = 0; k < has_code.size(); ++k) has_code[k] = compiled_[k] != nullptr;
  }
  TierUp::Decision what = tier_up_.after_run(ns, has_code, run_ns, cost_ns);
  if (what.whole) return {std::move(pending_), std::move(what)};  // the last compile of the graph
  if (what.kernels.empty()) return {};
  return {pending_, std::move(what)};
}

int64_t GraphExecutor::compile_cost_ns() const {
  const int64_t set = compile_cost_ns_.load(std::memory_order_relaxed);
  if (set >= 0) return set;
  if (spare_core_) return 0;  // the whole graph from its second run
  // Else LLVM's time per kernel so far (about 10 ms a kernel where none is measured yet).
  constexpr int64_t kPriorKernelCompileNs = 10'000'000;
  return graph_compiler_.kernel_compile_ns(kPriorKernelCompileNs);
}

void GraphExecutor::compile_in_background(const ir::Hash128& key, Tier0Graph::Compile compile,
                                          std::shared_ptr<const Tier0Graph> tier0) {
  background_.enqueue([this, key, job = std::move(compile.job), what = std::move(compile.what), tier0] {
    const std::string stem = job->stem;
    const codegen::JitCompiler::Progress progress{
        .order = tier0->slowest_first(what.kernels),
        .ready = [&](size_t k, const std::shared_ptr<const codegen::CompiledKernel>& code) { tier0->set_compiled(k, code); }};
    auto on_compile_threads = [this](size_t count, absl::FunctionRef<void(size_t)> task) {
      background_.for_each(count, [&](size_t i) { with_compile_stack(task, i); });
    };
    try {
      if (!what.whole) {  // hot kernels ahead of the rest: the graph keeps running on tier 0
        absl::Status done = run_with_stack(kCompileThreadStackBytes, [&] {
          return graph_compiler_.compile_kernels(*job, what.kernels, on_compile_threads, progress);
        });
        if (!done.ok()) {
          LAZYJIT_LOG(warn, "compiling kernels of graph {} in the background: {}; tier 0 keeps running them", stem,
                      std::string(done.message()));
        }
        return;
      }
      auto made = cache_.get_or_make(key, [&] {
        return run_with_stack(kCompileThreadStackBytes, [&] {
          return graph_compiler_.compile(std::move(*job), on_compile_threads, /*background=*/true, &progress);
        });
      });
      if (made.ok()) {
        counters_.tier_switches.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      LAZYJIT_LOG(warn, "compiling graph {} in the background: {}; tier 0 keeps running it", stem,
                  std::string(made.status().message()));
    } catch (const std::exception& e) {
      LAZYJIT_LOG(warn, "compiling graph {} in the background: {}; tier 0 keeps running it", stem, e.what());
    }
  });
}

void GraphExecutor::execute(const ir::Graph& graph, const Code& code, std::span<const lowering::Alias> aliases,
                            const std::vector<std::shared_ptr<detail::TensorImpl>>& targets, bool keep_history) {
  const lowering::KernelPlan& plan = code.plan;
  const int num_parameters = static_cast<int>(graph.parameters.size());
  const int num_results = static_cast<int>(graph.roots.size());
  const int num_temps = static_cast<int>(plan.temps.size());
  std::vector<void*> buffers(lowering::temp_buffer_index(num_parameters, num_results, num_temps));
  for (int p = 0; p < num_parameters; ++p) buffers[p] = graph.parameters[p]->data()->data();

  std::vector<BackendDataPtr> outputs(num_results);
  for (const lowering::Alias& a : aliases) outputs[a.result] = graph.parameters[a.parameter]->data();
  for (int r = 0; r < num_results; ++r) {
    const ir::Node& root = *graph.nodes[graph.roots[r]];
    if (outputs[r] == nullptr) {
      outputs[r] = std::make_shared<CpuBuffer>(allocator_, root.dtype(),
                                               std::vector<int64_t>(root.shape().begin(), root.shape().end()));
    }
    buffers[num_parameters + r] = outputs[r]->data();
  }
  std::vector<ir::ScalarValue> scalars;
  scalars.reserve(graph.scalars.size());
  for (int n : graph.scalars) scalars.push_back(graph.nodes[n]->scalar());
  buffers[lowering::scalar_table_index(num_parameters, num_results)] = scalars.data();
  // The plan's launch geometry and temporary sizes for this run's dims.
  const std::vector<int64_t> shapes = lowering::shape_table(graph);
  std::vector<int64_t> sizes;
  plan.sizes.evaluate(shapes.data(), sizes);
  // Everything that can fail is done before the first kernel writes a donated buffer.
  std::vector<ir::NodePtr> leaves;
  leaves.reserve(num_results);
  for (const BackendDataPtr& output : outputs) leaves.push_back(ir::make_parameter(output));
  std::vector<size_t> order = donation_order(plan.kernels, aliases);
  if (plan.collectives > 1) order = in_trace_order(graph, plan, std::move(order), aliases);

  // Temporaries live from the first kernel that uses one to its last, in one block taken from
  // the caching allocator before the first kernel runs (nothing can fail once one has written
  // a donated buffer): a temporary reuses the bytes of those that died before it was born
  // (lay_out_temporaries), so a step's first run touches its peak of live bytes in fresh
  // memory, not the sum of its temporaries, and every later run gets the same block back. A
  // collective's temporaries live to the end of the run: it may use them until then.
  const int first_temp = lowering::temp_buffer_index(num_parameters, num_results, 0);
  std::vector<int> first(num_temps, -1), last(num_temps, -1);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const lowering::KernelSpec& kernel = plan.kernels[order[pos]];
    for (int b : kernel.frame.buffers) {
      if (b < first_temp) continue;
      const int t = b - first_temp;
      if (first[t] < 0) first[t] = static_cast<int>(pos);
      last[t] = kernel.kind == lowering::KernelKind::Collective ? static_cast<int>(order.size()) - 1
                                                                : std::max(last[t], static_cast<int>(pos));
    }
  }
  std::vector<int64_t> temp_bytes(num_temps);
  for (int t = 0; t < num_temps; ++t) temp_bytes[t] = sizes[plan.temps[t].bytes];
  const TempLayout layout = lay_out_temporaries(temp_bytes, first, last, order.size());
  // (An empty temporary gets the block's start: a pointer, never null, that no one reads.)
  const bool used = std::any_of(first.begin(), first.end(), [](int f) { return f >= 0; });
  std::unique_ptr<CpuBuffer> temps =
      used ? std::make_unique<CpuBuffer>(allocator_, DType::Bool, std::vector<int64_t>{std::max<int64_t>(layout.bytes, 1)})
           : nullptr;
  for (int t = 0; t < num_temps; ++t) {
    if (first[t] >= 0) buffers[first_temp + t] = static_cast<std::byte*>(temps->data()) + layout.offset[t];
  }
  CollectivesUnderWay collectives(graph, plan, buffers, temps, outputs, counters_);  // destroyed before the temporaries

  collectives.agree(order);
  // The kernels compiled by now (under auto, the graph's compile hands them over as it goes).
  const std::vector<std::shared_ptr<const codegen::CompiledKernel>> tier0_compiled =
      code.tier0 != nullptr && !code.tier0_only ? code.tier0->compiled()
                                                : std::vector<std::shared_ptr<const codegen::CompiledKernel>>();
  const Clock::time_point start = Clock::now();
  lowering::BoundFrame frame;
  int64_t offending = 0;  // a failed check's value (threads that fail at once store it atomically)
  int64_t tier0_runs = 0;
  KernelProfile* const profile = KernelProfile::get();
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const size_t k = order[pos];
    const lowering::KernelSpec& kernel = plan.kernels[k];
    collectives.wait_for(kernel);
    lowering::bind_frame(kernel.frame, buffers.data(), shapes.data(), scalars.data(), &offending, frame);
    const int64_t count = sizes[kernel.count], work = sizes[kernel.work];
    int32_t status = 0;
    const Clock::time_point kernel_start = profile != nullptr ? Clock::now() : Clock::time_point();
    if (code.compiled != nullptr) {
      status = executor_.run(code.compiled->function(k), frame.args.data(), frame.dims.data(), count, work);
    } else if (k < tier0_compiled.size() && tier0_compiled[k] != nullptr) {
      status = executor_.run(tier0_compiled[k]->function(), frame.args.data(), frame.dims.data(), count, work);
    } else {
      // Timed for the order of the graph's background compile; under LAZYJIT_TIER=0 none comes.
      const Clock::time_point tier0_start = code.tier0_only ? Clock::time_point() : Clock::now();
      status = executor_.run(code.tier0->kernels[k], frame.args.data(), frame.dims.data(), count, work);
      if (!code.tier0_only) code.tier0->ran_on_tier0(k, nanoseconds_since(tier0_start));
      ++tier0_runs;
    }
    if (profile != nullptr) {
      profile->add(graph.key, k, nanoseconds_since(kernel_start), [&] { return lowering::print_kernel(graph, kernel); });
    }
    if (status != 0) {  // no result is assigned; donated buffers are written last, so none was yet
      counters_.execute_ns.fetch_add(nanoseconds_since(start), std::memory_order_relaxed);
      const lowering::KernelCheck& check = kernel.frame.checks.at(status - 1);
      const ir::Node& node = *graph.nodes[check.node];
      if (check.bound == lowering::KernelCheck::kNonzero) throw Error(ir::division_error(node.op()));
      throw Error(ir::index_error(node.op(), node.attrs(), offending, shapes[check.bound]));
    }
    collectives.kernel_ran();
    if (kernel.kind == lowering::KernelKind::Collective) collectives.start(kernel);
  }
  collectives.wait_all();
  counters_.execute_ns.fetch_add(nanoseconds_since(start), std::memory_order_relaxed);
  counters_.kernels_launched.fetch_add(static_cast<int64_t>(plan.kernels.size()), std::memory_order_relaxed);
  counters_.tier0_kernel_runs.fetch_add(tier0_runs, std::memory_order_relaxed);
  counters_.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  counters_.donations.fetch_add(static_cast<int64_t>(aliases.size()), std::memory_order_relaxed);
  // A tensor updated in place meanwhile (by another thread) keeps its newer IR.
  for (int r = 0; r < num_results; ++r) {
    targets[r]->set_data(std::move(outputs[r]), std::move(leaves[r]), graph.nodes[graph.roots[r]], keep_history);
  }
  if (keep_history) {
    std::lock_guard kept(kept_mutex_);
    if (kept_.size() > 4096) std::erase_if(kept_, [](const Kept& k) { return k.tensor.expired(); });  // no steps
    for (const auto& t : targets) kept_.push_back({std::this_thread::get_id(), t});
  }
}

absl::flat_hash_map<const ir::Node*, ir::NodePtr> GraphExecutor::kept_histories() {
  std::vector<std::shared_ptr<detail::TensorImpl>> alive;
  {
    std::lock_guard lock(kept_mutex_);
    for (const Kept& k : kept_) {
      if (auto t = k.tensor.lock()) alive.push_back(std::move(t));
    }
  }
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> histories;
  for (const auto& t : alive) {
    ir::NodePtr history = t->history(), leaf = t->data_leaf();
    if (history && leaf) histories.emplace(leaf.get(), std::move(history));
  }
  return histories;
}

void GraphExecutor::drop_kept_histories() {
  std::vector<Kept> mine;
  {
    std::lock_guard lock(kept_mutex_);
    const auto others = std::partition(kept_.begin(), kept_.end(),
                                       [](const Kept& k) { return k.thread == std::this_thread::get_id(); });
    mine.assign(kept_.begin(), others);
    kept_.erase(kept_.begin(), others);
  }
  for (const Kept& k : mine) {
    if (std::shared_ptr<detail::TensorImpl> t = k.tensor.lock()) t->drop_history();
  }
}

void GraphExecutor::watch_growth(size_t nodes) {
  // Eight larger graphs in a row is no accident; one step's syncs rarely grow that often.
  constexpr int kGrowingSyncs = 8;
  std::lock_guard lock(growth_mutex_);
  Growth& growth = growth_[std::this_thread::get_id()];
  if (nodes == 0) {
    growth = {};
    return;
  }
  if (growth.syncs == 0 || nodes <= growth.last) {
    growth = {nodes, nodes, 1};
    return;
  }
  growth.last = nodes;
  if (++growth.syncs < kGrowingSyncs || reported_growth_) return;
  reported_growth_ = true;
  LAZYJIT_LOG(warn,
              "the last {} syncs on this thread each compiled a new, larger graph ({} -> {} nodes) with no "
              "mark_step() between them: tensors updated in place (weights, optimizer state) stay pending, so each "
              "read recompiles their whole history. Call lazyjit::mark_step() at the end of each training step "
              "(reported once)",
              growth.syncs, growth.first, growth.last);
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
  if (format == DumpFormat::Plan) return lowering::print_plan(graph, lowering::plan_graph(graph));
  lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  if (format == DumpFormat::KernelIr) return lowering::kernels_text(lowered);
  if (format == DumpFormat::Ptx) {
    absl::StatusOr<std::string> ptx = codegen::ptx_text(lowered);
    if (!ptx.ok()) throw Error(fmt::format("dump: {}", std::string(ptx.status().message())));
    return *std::move(ptx);
  }
  using Text = codegen::JitCompiler::Text;
  const Text form = format == DumpFormat::LlvmIr            ? Text::LlvmIr
                    : format == DumpFormat::OptimizedLlvmIr ? Text::OptimizedLlvmIr
                                                            : Text::Assembly;
  absl::StatusOr<std::string> text = compiler_.text(lowered, form);
  if (!text.ok()) throw Error(fmt::format("dump: {}", std::string(text.status().message())));
  return *std::move(text);
}

}  // namespace lazyjit::runtime
