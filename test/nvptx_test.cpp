// Tests of the NVPTX target that need no GPU: the portable math functions, run on the CPU
// (the same LLVM IR the GPU runs) against glibc, within the ulp bounds docs/semantics.md
// states; the GPU target's kernel bodies, run on the CPU behind the CPU entry, against the
// interpreter; and every op's kernel made into PTX.
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "host_kernels.h"
#include "codegen/jit_compiler.h"
#include "codegen/kir_llvm.h"
#include "codegen/kir_nvptx.h"
#include "codegen/portable_math.h"
#include "gpu_programs.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/hash.h"
#include "ir/op.h"
#include "ir/interpreter.h"
#include "ir/structured.h"
#include "lazyjit/lazyjit.h"
#include "runtime/tensor_impl.h"
#include "lazyjit/backend.h"
#include "llvm/IR/IRBuilder.h"
#include "lowering/fusion.h"
#include "lowering/kernel_abi.h"
#include "lowering/lower.h"

namespace lazyjit::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using gpu_test::expect_matches_interpreter;
using gpu_test::gpu_programs;
using gpu_test::GpuProgram;
using gpu_test::graph_of;
using gpu_test::out_of_range_program;

JitCompiler& jit() {
  static std::unique_ptr<JitCompiler> compiler = [] {
    absl::StatusOr<std::unique_ptr<JitCompiler>> c = JitCompiler::create();
    if (!c.ok()) throw std::runtime_error(std::string(c.status().message()));
    return *std::move(c);
  }();
  return *compiler;
}

// ---------------------------------------------------------------------------------------------
// The portable math, on the CPU

/// Writes one element: the function of the loaded operands (one or two).
using EmitOne = std::function<llvm::Value*(llvm::IRBuilder<>&, llvm::Value*, llvm::Value*)>;

/// A compiled kernel out[i] = f(a[i], b[i]) for i in [begin, end) (args: a, b, out), with the
/// portable math in place of libm, for elements of `f32 ? float : double`.
class PortableKernel {
 public:
  PortableKernel(const std::string& name, bool f32, const EmitOne& f) {
    lowering::LoweredGraph lowered;
    lowered.kernels.emplace_back().content = ir::hash_bytes(name + (f32 ? "f32" : "f64"));
    const std::string symbol = "portable_" + name + (f32 ? "_f32" : "_f64");
    lowered.plan.kernels.push_back({.symbol = symbol, .domain = 0, .results = {0}});
    std::vector<KernelModule> modules(1);
    KernelModule& m = modules[0];
    m.context = std::make_unique<llvm::LLVMContext>();
    m.module = std::make_unique<llvm::Module>(symbol, *m.context);
    llvm::LLVMContext& ctx = *m.context;
    llvm::IRBuilder<> b(ctx);
    auto* ptr = b.getPtrTy();
    auto* i64 = b.getInt64Ty();
    llvm::Type* type = f32 ? b.getFloatTy() : b.getDoubleTy();
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b.getInt32Ty(), {ptr, ptr, i64, i64}, false),
                                      llvm::Function::ExternalLinkage, symbol, *m.module);
    auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
    auto* loop = llvm::BasicBlock::Create(ctx, "loop", fn);
    auto* done = llvm::BasicBlock::Create(ctx, "done", fn);
    b.SetInsertPoint(entry);
    llvm::Value* buffers[3];
    for (int k = 0; k < 3; ++k) buffers[k] = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, fn->getArg(0), k));
    b.CreateCondBr(b.CreateICmpSLT(fn->getArg(2), fn->getArg(3)), loop, done);
    b.SetInsertPoint(loop);
    llvm::PHINode* i = b.CreatePHI(i64, 2);
    i->addIncoming(fn->getArg(2), entry);
    llvm::Value* x = b.CreateLoad(type, b.CreateInBoundsGEP(type, buffers[0], i));
    llvm::Value* y = b.CreateLoad(type, b.CreateInBoundsGEP(type, buffers[1], i));
    b.CreateStore(f(b, x, y), b.CreateInBoundsGEP(type, buffers[2], i));
    llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(next, fn->getArg(3)), loop, done);
    b.SetInsertPoint(done);
    b.CreateRet(b.getInt32(0));
    use_portable_math(*m.module);
    for (const llvm::Function& defined : *m.module) {
      if (defined.isDeclaration() && !defined.isIntrinsic()) ADD_FAILURE() << name << " still calls " << defined.getName().str();
    }
    absl::StatusOr<std::shared_ptr<const CompiledGraph>> code = jit().compile(std::move(lowered), std::move(modules));
    if (!code.ok()) throw std::runtime_error(std::string(code.status().message()));
    code_ = *std::move(code);
  }

  template <class T>
  std::vector<T> run(const std::vector<T>& a, const std::vector<T>& b) const {
    std::vector<T> out(a.size());
    void* args[] = {const_cast<T*>(a.data()), const_cast<T*>(b.data()), out.data()};
    const int64_t dims[] = {0};
    EXPECT_EQ(code_->function(0)(args, dims, 0, static_cast<int64_t>(a.size())), 0);
    return out;
  }

 private:
  std::shared_ptr<const CompiledGraph> code_;
};

/// Distance in units in the last place: 0 for equal values (NaN equals NaN), and the count of
/// representable values between them otherwise (huge across signs or against a NaN).
template <class T>
double ulps(T got, T want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : 1e300;
  if (got == want) return 0;
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  auto ordered = [](T v) {  // the representable values in order, as integers
    const Bits bits = std::bit_cast<Bits>(v);
    const Bits sign = Bits{1} << (8 * sizeof(T) - 1);
    const __int128 magnitude = bits & ~sign;
    return (bits & sign) != 0 ? -magnitude : magnitude;
  };
  const __int128 d = ordered(got) - ordered(want);
  return static_cast<double>(d < 0 ? -d : d);
}

struct Case {
  std::string name;
  int arity;
  EmitOne emit;
  std::function<double(double, double)> reference;
  double f64_bound;                               // ulps of double
  std::function<std::pair<double, double>(std::mt19937_64&)> inputs;
  std::vector<std::pair<double, double>> specials;
};

llvm::Value* intrinsic(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, llvm::Value* x, llvm::Value* y = nullptr) {
  if (y != nullptr) return b.CreateBinaryIntrinsic(id, x, y);
  return b.CreateUnaryIntrinsic(id, x);
}
EmitOne libm(const char* name) {
  return [name](llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value*) {
    const std::string symbol = std::string(name) + (x->getType()->isFloatTy() ? "f" : "");
    return b.CreateCall(b.GetInsertBlock()->getModule()->getOrInsertFunction(symbol, x->getType(), x->getType()), {x});
  };
}

/// A double whose exponent is uniform over [lo, hi) (magnitudes across the range), signed or not.
double spread(std::mt19937_64& rng, double lo, double hi, bool sign) {
  const double v = std::exp2(std::uniform_real_distribution<double>(lo, hi)(rng));
  return sign && (rng() & 1) ? -v : v;
}
double uniform(std::mt19937_64& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<Case> cases() {
  using I = llvm::Intrinsic::ID;
  auto unary = [](I id) { return [id](llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value*) { return intrinsic(b, id, x); }; };
  const std::vector<std::pair<double, double>> common = {{0.0, 0}, {-0.0, 0}, {kInf, 0}, {-kInf, 0}, {kNaN, 0},
                                                         {1e-310, 0}, {-1e-310, 0}, {1.0, 0}, {-1.0, 0}, {0x1p-60, 0}};
  return {
      {"exp", 1, unary(llvm::Intrinsic::exp), [](double x, double) { return std::exp(x); }, 2,
       [](auto& r) { return std::pair{r() % 4 ? uniform(r, -750, 712) : spread(r, -60, 3, true), 0.0}; }, common},
      {"expm1", 1, libm("expm1"), [](double x, double) { return std::expm1(x); }, 2,
       [](auto& r) { return std::pair{r() % 4 ? uniform(r, -50, 712) : spread(r, -60, 3, true), 0.0}; }, common},
      {"log", 1, unary(llvm::Intrinsic::log), [](double x, double) { return std::log(x); }, 2,
       [](auto& r) { return std::pair{r() % 4 ? spread(r, -1074, 1024, false) : uniform(r, 0.5, 2), 0.0}; }, common},
      {"log1p", 1, libm("log1p"), [](double x, double) { return std::log1p(x); }, 3,
       [](auto& r) { return std::pair{r() % 2 ? uniform(r, -1, 2) : spread(r, -80, 1000, true), 0.0}; }, common},
      {"tanh", 1, libm("tanh"), [](double x, double) { return std::tanh(x); }, 3,
       [](auto& r) { return std::pair{r() % 2 ? uniform(r, -25, 25) : spread(r, -80, 5, true), 0.0}; }, common},
      {"sin", 1, unary(llvm::Intrinsic::sin), [](double x, double) { return std::sin(x); }, 2,
       [](auto& r) { return std::pair{r() % 2 ? uniform(r, -10, 10) : spread(r, -40, 20, true), 0.0}; }, common},
      {"cos", 1, unary(llvm::Intrinsic::cos), [](double x, double) { return std::cos(x); }, 2,
       [](auto& r) { return std::pair{r() % 2 ? uniform(r, -10, 10) : spread(r, -40, 20, true), 0.0}; }, common},
      {"erf", 1, libm("erf"), [](double x, double) { return std::erf(x); }, 6,
       [](auto& r) { return std::pair{r() % 4 ? uniform(r, -7, 7) : spread(r, -80, 3, true), 0.0}; }, common},
      {"pow", 2, [](llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) { return intrinsic(b, llvm::Intrinsic::pow, x, y); },
       [](double x, double y) { return std::pow(x, y); }, 0,  // checked below: relative to |y log x|
       [](auto& r) {
         const double x = r() % 8 ? uniform(r, 0, 10) : -std::round(uniform(r, 0, 6));
         return std::pair{x, r() % 8 ? uniform(r, -20, 20) : std::round(uniform(r, -9, 9))};
       },
       {{0.0, -1}, {-0.0, -1}, {-0.0, -2}, {-0.0, 3}, {kNaN, 0}, {1, kNaN}, {-1, kInf}, {-1, -kInf}, {0.5, kInf},
        {2, -kInf}, {-8, 1.0 / 3}, {-kInf, 3}, {-kInf, 0.5}, {-kInf, -3}, {kInf, -2}, {-2, 3}, {-2, 1e300}, {0, 0}}},
      {"fmod", 2, [](llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) { return b.CreateFRem(x, y); },
       [](double x, double y) { return std::fmod(x, y); }, 0,
       [](auto& r) { return std::pair{spread(r, -1074, 1024, true), spread(r, -1074, 1024, true)}; },
       {{5, 3}, {-5, 3}, {-6, 3}, {5, -3}, {1, 0}, {kInf, 2}, {2, kInf}, {-0.0, 1}, {kNaN, 1}, {1, kNaN}, {1e300, 1e-300},
        {1e-310, 3e-320}, {0.5, 1}}},
  };
}

/// Runs `c` on the CPU in double and in float over random and special inputs; returns the
/// largest distance from glibc, in double ulps (float results must be within 1 float ulp).
template <class T>
double measure(const Case& c, const std::vector<double>& xs, const std::vector<double>& ys) {
  const PortableKernel kernel(c.name, sizeof(T) == 4, c.emit);
  std::vector<T> a, b;
  for (size_t i = 0; i < xs.size(); ++i) {
    a.push_back(static_cast<T>(xs[i]));
    b.push_back(static_cast<T>(ys[i]));
  }
  const std::vector<T> got = kernel.run(a, b);
  double worst = 0;
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const T want = static_cast<T>(c.reference(a[i], b[i]));
    double bound = sizeof(T) == 4 ? 1 : c.f64_bound;
    if (c.name == "pow" && sizeof(T) == 8) bound = 2 + 2 * std::abs(b[i] * std::log(std::abs(a[i])));
    const double d = ulps(got[i], want);
    if (d > bound && reported++ < 5) {
      ADD_FAILURE() << fmt::format("{}({:a}, {:a}) in {}: got {:a}, glibc {:a}: {} ulps (bound {})", c.name, double(a[i]),
                                   double(b[i]), sizeof(T) == 4 ? "float" : "double", double(got[i]), double(want), d,
                                   bound);
    }
    if (std::isfinite(d) && d < 1e299) worst = std::max(worst, c.name == "pow" ? 0 : d);
  }
  return worst;
}

TEST(PortableMathTest, EachFunctionIsWithinItsBoundOfGlibc) {
  std::mt19937_64 rng(0x9a7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<double> xs, ys;
    for (int i = 0; i < 200000; ++i) {
      auto [x, y] = c.inputs(rng);
      xs.push_back(x);
      ys.push_back(y);
    }
    for (auto [x, y] : c.specials) {
      xs.push_back(x);
      ys.push_back(y);
    }
    const double f64 = measure<double>(c, xs, ys);
    const double f32 = measure<float>(c, xs, ys);
    std::printf("%-6s worst: %.0f ulp (double), %.0f ulp (float)\n", c.name.c_str(), f64, f32);
  }
}

TEST(PortableMathTest, TheFunctionsAreTheOnesItReplaces) {
  EXPECT_THAT(portable_math_functions(),
              testing::UnorderedElementsAre("exp", "expm1", "log", "log1p", "tanh", "sin", "cos", "erf", "pow", "fmod"));
}

// ---------------------------------------------------------------------------------------------
// The GPU target's kernel bodies, run on the CPU

using test::HostData;

/// `graph` run by its kernels as a GPU thread runs them (emit_body for EmitTarget::Gpu: the
/// scalar micro-kernel, the portable math) behind the CPU entry, one iteration per call as
/// the PTX entry calls it. Returns the results, and the first nonzero status word, if any.
std::pair<std::vector<std::shared_ptr<HostData>>, int> run_gpu_bodies(const ir::Graph& graph) {
  lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  std::vector<KernelModule> modules;
  for (const lowering::LoweredKernel& kernel : lowered.kernels) modules.push_back(emit_module(kernel, EmitTarget::Gpu));
  absl::StatusOr<std::shared_ptr<const CompiledGraph>> compiled = jit().compile(std::move(lowered), std::move(modules));
  if (!compiled.ok()) throw std::runtime_error(std::string(compiled.status().message()));
  test::KernelRun run = test::run_kernels(graph, **compiled, [](lowering::KernelFn f, void* const* args, const int64_t* dims, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (const int status = f(args, dims, i, i + 1); status != 0) return status;
    }
    return 0;
  });
  return {std::move(run.results), run.status};
}

TEST(GpuBodyTest, ProgramsMatchTheInterpreter) {
  for (const GpuProgram& program : gpu_programs()) {
    const ir::Graph graph = graph_of(program.results);
    auto [results, status] = run_gpu_bodies(graph);
    ASSERT_EQ(status, 0) << program.name;
    std::vector<ir::HostTensor> got;
    for (size_t r = 0; r < results.size(); ++r) {
      const auto* bytes = static_cast<const uint8_t*>(results[r]->data());
      const ir::Node& root = *graph.nodes[graph.roots[r]];
      got.push_back({root.dtype(), root.shape(), std::vector<uint8_t>(bytes, bytes + results[r]->size_bytes())});
    }
    expect_matches_interpreter(graph, got, program.rtol, program.name);
  }
}

TEST(GpuBodyTest, AnIndexOutOfRangeFailsTheKernelsCheck) {
  auto [results, status] = run_gpu_bodies(graph_of({out_of_range_program()}));
  EXPECT_NE(status, 0);
}

// ---------------------------------------------------------------------------------------------
// PTX

/// Every kernel of `roots`' graph as PTX: one entry each, no call of anything outside it.
void expect_ptx(const std::vector<ir::NodePtr>& roots, const std::string& context) {
  const ir::Graph graph = ir::build_graph(roots);
  const lowering::LoweredGraph lowered = lowering::lower_graph(graph);
  for (const lowering::LoweredKernel& kernel : lowered.kernels) {
    absl::StatusOr<std::string> ptx = compile_ptx(kernel);
    ASSERT_TRUE(ptx.ok()) << context << ": " << ptx.status();
    EXPECT_THAT(*ptx, HasSubstr(".target sm_90")) << context;
    EXPECT_THAT(*ptx, HasSubstr(".visible .entry lj_" + kernel.content.to_hex() + "(")) << context;
    EXPECT_THAT(*ptx, Not(HasSubstr(".extern"))) << context << ":\n" << *ptx;
  }
}

struct OpRow {
  ir::OpKind op;
  const char* name;
  int arity;
};
constexpr OpRow kOps[] = {
#define LAZYJIT_OP(Name, text, arity, rule, admits, kind) {ir::OpKind::Name, text, arity},
#include "ir/ops.def"
};

TEST(PtxTest, EveryElementwiseOpInEveryDtypeBecomesPtx) {
  int made = 0;
  for (const OpRow& row : kOps) {
    for (DType dtype : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
      std::vector<ir::NodePtr> operands;
      for (int i = 0; i < row.arity; ++i) {
        const DType d = row.op == ir::OpKind::Where && i == 0 ? DType::Bool : dtype;
        operands.push_back(ir::make_parameter(std::make_shared<HostData>(d, std::vector<int64_t>{3, 5})));
      }
      absl::StatusOr<ir::NodePtr> node = ir::make_elementwise(row.op, operands);
      if (!node.ok()) continue;  // not elementwise, or not of this dtype
      expect_ptx({*node}, fmt::format("{} {}", row.name, dtype_name(dtype)));
      ++made;
    }
  }
  EXPECT_GT(made, 150);
}

TEST(PtxTest, AFailingCheckLeavesItsCodeInTheStatusWord) {
  // gather's index check: its code goes to the status word by a compare-and-swap from 0.
  const ir::NodePtr t = ir::make_parameter(std::make_shared<HostData>(DType::Float32, std::vector<int64_t>{4, 6}));
  const ir::NodePtr index = ir::make_parameter(std::make_shared<HostData>(DType::Int64, std::vector<int64_t>{4, 2}));
  absl::StatusOr<ir::NodePtr> gather = ir::make_structured(ir::OpKind::Gather, {t, index}, {1});
  ASSERT_TRUE(gather.ok()) << gather.status();
  const ir::NodePtr roots[] = {*gather};
  const lowering::LoweredGraph lowered = lowering::lower_graph(ir::build_graph(roots));
  ASSERT_EQ(lowered.kernels.size(), 1u);
  absl::StatusOr<std::string> ptx = compile_ptx(lowered.kernels[0]);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(*ptx, HasSubstr("atom.global.cas.b32"));
  EXPECT_THAT(*ptx, HasSubstr("%nctaid.x"));  // a grid-stride loop
}

TEST(PtxTest, AnArchitectureLlvmDoesNotKnowIsAnError) {
  const ir::NodePtr x = ir::make_parameter(std::make_shared<HostData>(DType::Float32, std::vector<int64_t>{8}));
  const ir::NodePtr operands[] = {x};
  const ir::NodePtr roots[] = {*ir::make_elementwise(ir::OpKind::Exp, operands)};
  const lowering::LoweredGraph lowered = lowering::lower_graph(ir::build_graph(roots));
  absl::StatusOr<std::string> ptx = compile_ptx(lowered.kernels[0], {.sm = "sm_90", .ptx = "ptx99"});
  ASSERT_FALSE(ptx.ok());
  EXPECT_THAT(ptx.status().message(), HasSubstr("does not know the PTX version ptx99"));
  ptx = compile_ptx(lowered.kernels[0], {.sm = "sm_9000", .ptx = "ptx80"});
  ASSERT_FALSE(ptx.ok());
  EXPECT_THAT(ptx.status().message(), HasSubstr("does not know sm_9000"));
}

}  // namespace
}  // namespace lazyjit::codegen
