// A compiled graph's kernels run over a graph's tables the way the executor binds them, each
// kernel's iterations split as a test chooses (codegen_test, nvptx_test).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "host_data.h"
#include "codegen/jit_compiler.h"
#include "ir/graph.h"
#include "lowering/kernel_abi.h"
#include "lowering/shape_table.h"

namespace lazyjit::test {

/// Calls a kernel over its `count` iterations, as the test chooses to split them; returns the
/// first nonzero status word.
using Launch = std::function<int(lowering::KernelFn, void* const* args, const int64_t* dims, int64_t count)>;

struct KernelRun {
  std::vector<std::shared_ptr<HostData>> results;  ///< per root
  int status = 0;                                  ///< the first failing kernel's status word
};

/// Runs `code`'s kernels in plan order over `graph`'s tables (parameters, results, scalars,
/// 64-byte aligned temporaries), each by `launch`; stops at the first that fails.
inline KernelRun run_kernels(const ir::Graph& graph, const codegen::CompiledGraph& code, const Launch& launch) {
  std::vector<void*> buffers;
  for (const ir::Node* p : graph.parameters) buffers.push_back(p->data()->data());
  KernelRun run;
  for (int root : graph.roots) {
    const ir::Node& node = *graph.nodes[root];
    run.results.push_back(std::make_shared<HostData>(node.dtype(), std::vector<int64_t>(node.shape().begin(), node.shape().end())));
    buffers.push_back(run.results.back()->data());
  }
  std::vector<ir::ScalarValue> scalars;
  for (int s : graph.scalars) scalars.push_back(graph.nodes[s]->scalar());
  buffers.push_back(scalars.data());
  const std::vector<int64_t> shapes = lowering::shape_table(graph);
  std::vector<int64_t> sizes;
  code.plan().sizes.evaluate(shapes.data(), sizes);
  std::vector<std::vector<uint8_t>> temps;
  for (const lowering::TempBuffer& temp : code.plan().temps) {
    temps.emplace_back(sizes[temp.bytes] + 64);
    buffers.push_back(temps.back().data() + (64 - reinterpret_cast<uintptr_t>(temps.back().data()) % 64) % 64);
  }
  lowering::BoundFrame frame;
  for (size_t k = 0; k < code.kernels().size() && run.status == 0; ++k) {
    int64_t record = 0;
    lowering::bind_frame(code.kernels()[k].frame, buffers.data(), shapes.data(), scalars.data(), &record, frame);
    run.status = launch(code.function(k), frame.args.data(), frame.dims.data(), sizes[code.kernels()[k].count]);
  }
  return run;
}

}  // namespace lazyjit::test
