// The GPU target on a GPU: the driver, the PTX of each program of gpu_programs.h run through
// run_graph and compared with the interpreter, a failing check's code and value. Without a
// CUDA driver or GPU each test is skipped with the reason (CI has none); scripts/gpu_suite.sh
// runs this on a lent GPU machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu_programs.h"
#include "lazyjit/error.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_graph.h"
#include "codegen/kir_nvptx.h"
#include "lowering/lower.h"

namespace lazyjit::runtime::cuda {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using gpu_test::gpu_programs;
using gpu_test::graph_of;

/// GPU 0, or the reason there is none (the test is then skipped).
std::shared_ptr<Gpu> gpu_or_skip(std::string& why) {
  static const absl::StatusOr<std::shared_ptr<Gpu>> gpu = Gpu::open(0);
  if (!gpu.ok()) why = std::string(gpu.status().message());
  return gpu.ok() ? *gpu : nullptr;
}

#define LAZYJIT_GPU_OR_SKIP(name)                                     \
  std::string why;                                                    \
  const std::shared_ptr<Gpu> name = gpu_or_skip(why);                 \
  if (name == nullptr) GTEST_SKIP() << "no GPU: " << why;

TEST(CudaTest, TheDriverLoadsOrSaysWhyNot) {
  absl::StatusOr<const Driver*> driver = Driver::get();
  if (!driver.ok()) {
    EXPECT_THAT(driver.status().message(), AnyOf(HasSubstr("libcuda.so.1"), HasSubstr("cuInit"), HasSubstr("no GPU")));
    GTEST_SKIP() << driver.status().message();
  }
  EXPECT_GE((*driver)->version(), 12000);
  EXPECT_GE((*driver)->device_count(), 1);
  EXPECT_THAT(std::string((*driver)->check(1, "cuSomething").message()), HasSubstr("cuSomething: CUDA_ERROR_INVALID_VALUE"));
  EXPECT_FALSE(Gpu::open(-1).ok());
}

TEST(CudaTest, ProgramsMatchTheInterpreter) {
  LAZYJIT_GPU_OR_SKIP(gpu);
  std::printf("%s, sm_%d, %d multiprocessors\n", gpu->name().c_str(), gpu->capability(), gpu->multiprocessors());
  for (const gpu_test::GpuProgram& program : gpu_programs()) {
    const ir::Graph graph = graph_of(program.results);
    GraphRun run;
    try {
      run = run_graph(*gpu, graph, /*timed_repeats=*/2);  // relaunched kernels leave the same results
    } catch (const Error& e) {
      ADD_FAILURE() << program.name << ": " << e.what();
      continue;
    }
    if (run.failed_kernel != -1) {  // every program is run: one GPU session shows every failure
      ADD_FAILURE() << program.name << ": kernel " << run.failed_kernel << "'s check " << run.code << " found "
                    << run.offending;
      continue;
    }
    EXPECT_EQ(run.repeat_ms.size(), 2u) << program.name;
    gpu_test::expect_matches_interpreter(graph, run.results, program.rtol, program.name);
  }
}

/// Sizes past one wave of blocks (each thread strides over several iterations), long rows and
/// a product larger than a tile: what gpu_programs' small sizes do not reach.
std::vector<gpu_test::GpuProgram> large_programs() {
  using gpu_test::values;
  const Tensor x = values<float>({5, 1000, 1001}, -4, 4, 21);
  const Tensor rows = values<float>({300, 2048}, -4, 4, 22);
  const Tensor a = values<float>({257, 300}, -1, 1, 23), b = values<float>({300, 190}, -1, 1, 24);
  return {{"large elementwise", {tanh(x) * 0.5 + exp(-abs(x)), gt(x, 0.0)}},
          {"long rows", {softmax(rows, -1), sum(rows, {0}), layer_norm(rows, 1)}, 2e-5},
          {"large matmul", {matmul(a, b)}, 2e-5}};
}

TEST(CudaTest, LargeProgramsMatchTheInterpreter) {
  LAZYJIT_GPU_OR_SKIP(gpu);
  for (const gpu_test::GpuProgram& program : large_programs()) {
    const ir::Graph graph = graph_of(program.results);
    const GraphRun run = run_graph(*gpu, graph);
    EXPECT_EQ(run.failed_kernel, -1) << program.name;
    gpu_test::expect_matches_interpreter(graph, run.results, program.rtol, program.name);
  }
}

TEST(CudaTest, AFailingCheckReportsItsKernelCodeAndValue) {
  LAZYJIT_GPU_OR_SKIP(gpu);
  const GraphRun run = run_graph(*gpu, graph_of({gpu_test::out_of_range_program()}));
  EXPECT_EQ(run.failed_kernel, 0);
  EXPECT_EQ(run.code, 1);
  EXPECT_EQ(run.offending, 9);
}

TEST(CudaTest, AKernelIsLoadedOncePerGpuAndBadPtxIsTheDriversError) {
  LAZYJIT_GPU_OR_SKIP(gpu);
  const lowering::LoweredGraph lowered = lowering::lower_graph(graph_of({exp(gpu_test::values<float>({100}, -1, 1, 1))}));
  int made = 0;
  auto make = [&] {
    ++made;
    return codegen::compile_ptx(lowered.kernels[0], ptx_target(*gpu));
  };
  const std::string& symbol = lowered.plan.kernels[0].symbol;
  ASSERT_TRUE(gpu->load(symbol, make).ok());
  ASSERT_TRUE(gpu->load(symbol, make).ok());
  EXPECT_EQ(made, 1);
  absl::StatusOr<Function> bad = gpu->load("lj_not_ptx", [] { return absl::StatusOr<std::string>("not PTX at all"); });
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("loading the PTX of lj_not_ptx"));
}

}  // namespace
}  // namespace lazyjit::runtime::cuda
