// lazyjit-dump: prints a .ljir graph, its LLVM IR before or after optimisation, or its
// assembly, and runs it (MLIR toyc's -emit= is the model).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "fmt/format.h"
#include "ir/dtype_dispatch.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lazyjit/lazyjit.h"
#include "runtime/runtime.h"

namespace lazyjit::detail {
Tensor make_pending(ir::NodePtr node);
}

namespace {

using namespace lazyjit;

constexpr const char* kUsage = R"(usage: lazyjit-dump FILE.ljir [options]
       lazyjit-dump - [options]            (reads standard input)

Prints a lazyjit graph in the chosen form.

options:
  --emit=ir        the graph's text (default), re-printed after parsing
  --emit=plan      its plan: the kernels fusion made, their temporaries, cuts and donation candidates
  --emit=kernels   each kernel's kernel IR (frame, loops, loads, stores, folds)
  --emit=llvm      the LLVM IR of its fused kernels, before optimisation
  --emit=llvm-opt  the LLVM IR after optimisation (vectorised for this CPU)
  --emit=asm       the assembly for this CPU
  --emit=ptx       the PTX of its kernels for an NVIDIA GPU (sm_90, PTX 8.0; no GPU needed)
  --run            compile and run it; print every result
  --seed=N         seed for the parameters the file gives no values for (default 0)
  --help           this text
)";

struct Options {
  std::string path;
  std::string emit = "ir";
  bool run = false;
  uint64_t seed = 0;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "lazyjit-dump: %s\n", message.c_str());
  std::exit(1);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg.rfind("--emit=", 0) == 0) {
      options.emit = arg.substr(7);
      if (options.emit != "ir" && options.emit != "plan" && options.emit != "kernels" && options.emit != "llvm" && options.emit != "llvm-opt" &&
          options.emit != "asm" && options.emit != "ptx") {
        fail(fmt::format("unknown --emit={} (expected ir, plan, kernels, llvm, llvm-opt, asm or ptx)", options.emit));
      }
    } else if (arg == "--run") {
      options.run = true;
    } else if (arg.rfind("--seed=", 0) == 0) {
      try {
        options.seed = std::stoull(arg.substr(7));
      } catch (const std::exception&) {
        fail(fmt::format("--seed expects a non-negative integer, got '{}'", arg.substr(7)));
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      fail(fmt::format("unknown option '{}' (see --help)", arg));
    } else if (options.path.empty()) {
      options.path = arg;
    } else {
      fail(fmt::format("more than one input file ('{}' and '{}')", options.path, arg));
    }
  }
  if (options.path.empty()) fail("no input file (see --help)");
  return options;
}

std::string read_input(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    // A directory, a device or a FIFO is no graph: refuse it rather than read it forever.
    std::error_code error;
    const std::filesystem::file_status status = std::filesystem::status(path, error);
    if (error || !std::filesystem::exists(status)) fail(fmt::format("cannot open '{}'", path));
    if (!std::filesystem::is_regular_file(status)) fail(fmt::format("'{}' is not a regular file", path));
    std::ifstream file(path);
    if (!file) fail(fmt::format("cannot open '{}'", path));
    text << file.rdbuf();
  }
  return text.str();
}

/// Fills the parameters the text gave no values for: floats in [-1, 1), integers in
/// [-10, 10], bools at random; the same for a given seed on every machine.
void fill_missing(const ir::ParsedGraph& parsed, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t slot = 0; slot < parsed.parameters.size(); ++slot) {
    if (parsed.given[slot]) continue;
    BackendData& data = *parsed.parameters[slot]->data();
    ir::dispatch_dtype(data.dtype(), [&]<class T>(T) {
      using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
      S* p = static_cast<S*>(data.data());
      for (int64_t i = 0; i < data.numel(); ++i) {
        const uint64_t bits = rng();
        if constexpr (std::is_floating_point_v<T>) {
          p[i] = static_cast<T>(static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0);
        } else if constexpr (std::is_same_v<T, bool>) {
          p[i] = bits & 1;
        } else {
          p[i] = static_cast<T>(static_cast<int64_t>(bits % 21) - 10);
        }
      }
    });
  }
}

int run(const Options& options) {
  const ir::ParsedGraph parsed = [&] {
    absl::StatusOr<ir::ParsedGraph> g = ir::parse_graph(read_input(options.path));
    if (!g.ok()) fail(fmt::format("{}: {}", options.path == "-" ? "<stdin>" : options.path, std::string(g.status().message())));
    return *std::move(g);
  }();
  const ir::Graph graph = ir::build_graph(parsed.roots);
  if (absl::Status s = ir::verify(graph); !s.ok()) fail(std::string(s.message()));

  if (options.run) {
    fill_missing(parsed, options.seed);
    std::vector<Tensor> results;
    for (const auto& root : parsed.roots) results.push_back(detail::make_pending(root));
    sync(results);
    for (size_t r = 0; r < results.size(); ++r) {
      std::printf("%%%d = %s%s %s\n", graph.roots[r], std::string(dtype_name(results[r].dtype())).c_str(),
                  ir::shape_to_string(results[r].shape()).c_str(), ir::values_text(*results[r].impl()->data()).c_str());
    }
    return 0;
  }
  if (options.emit == "ir") {
    // Values are printed when the file gave them, so the output reads back to itself.
    const bool all_given = std::all_of(parsed.given.begin(), parsed.given.end(), [](bool g) { return g; });
    std::fputs(ir::print_graph(graph, {.with_key = true, .with_values = all_given && !parsed.given.empty()}).c_str(),
               stdout);
    return 0;
  }
  std::vector<Tensor> tensors;
  for (const auto& root : parsed.roots) tensors.push_back(detail::make_pending(root));
  const DumpFormat format = options.emit == "plan"       ? DumpFormat::Plan
                            : options.emit == "kernels"  ? DumpFormat::KernelIr
                            : options.emit == "llvm"     ? DumpFormat::LlvmIr
                            : options.emit == "llvm-opt" ? DumpFormat::OptimizedLlvmIr
                            : options.emit == "ptx"      ? DumpFormat::Ptx
                                                         : DumpFormat::Assembly;
  std::fputs(dump(tensors, format).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  try {
    return run(options);
  } catch (const lazyjit::Error& e) {
    fail(e.what());
  }
}
