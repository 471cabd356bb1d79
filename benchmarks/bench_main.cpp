// lazyjit-bench entry point: Google Benchmark's main plus a table per workload of every system's
// median, min and max and the ratios of the medians.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "hand_loops.h"
#include "peers.h"

namespace {

// Rows are named BM_<workload>_<system>: the system starts at the first of these words.
constexpr const char* kSystemFamilies[] = {"lazyjit", "hand", "openblas", "torch", "eigen"};

struct Row {
  std::string workload, system;
  double median = 0, min = 0, max = 0;  // seconds of real time
  benchmark::TimeUnit unit = benchmark::kNanosecond;
  std::string error;
};

// Splits "BM_ew_simple_hand_stream" (args "16777216") into "ew_simple/16777216" and "hand_stream".
std::pair<std::string, std::string> split_name(const benchmark::BenchmarkReporter::Run& r) {
  std::string name = r.run_name.function_name;
  if (name.rfind("BM_", 0) == 0) name.erase(0, 3);
  size_t cut = name.size();
  for (const char* family : kSystemFamilies) cut = std::min(cut, name.find(std::string("_") + family));
  std::string workload = name.substr(0, cut), system = cut < name.size() ? name.substr(cut + 1) : "?";
  if (!r.run_name.args.empty()) workload += "/" + r.run_name.args;
  return {workload, system};
}

// The console output, then one table per workload: median, min, max of each system and the
// ratio of its median to every other system's.
class TableReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      auto [workload, system] = split_name(r);
      Row& row = rows_[{workload, system}];
      row.workload = workload;
      row.system = system;
      row.unit = r.time_unit;
      if (r.error_occurred) row.error = r.error_message;
      const double seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (single || r.aggregate_name == "median") row.median = seconds;
      if (single || r.aggregate_name == "min") row.min = seconds;
      if (single || r.aggregate_name == "max") row.max = seconds;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::map<std::string, std::vector<const Row*>> by_workload;
    for (const auto& [key, row] : rows_) by_workload[row.workload].push_back(&row);
    for (auto& [workload, rows] : by_workload)  // lazyjit first, then by name
      std::stable_partition(rows.begin(), rows.end(), [](const Row* r) { return r->system == "lazyjit"; });
    auto& out = GetOutputStream();
    out << "\nmedian [min, max] real time per workload; ratio = this system's median / the column's ("
        << bench::kHandThreads << " threads each)\n";
    for (const auto& [workload, rows] : by_workload) print_workload(out, workload, rows);
    out.flush();
  }

 private:
  static void print_workload(std::ostream& out, const std::string& workload, const std::vector<const Row*>& rows) {
    const double mult = benchmark::GetTimeUnitMultiplier(rows.front()->unit);
    char line[512];
    std::snprintf(line, sizeof line, "\n%-32s %10s %10s %10s  ratio to:", workload.c_str(), "median", "min", "max");
    out << line;
    for (const Row* other : rows) out << " " << std::setw(14) << other->system;
    out << "\n";
    for (const Row* row : rows) {
      if (!row->error.empty()) {
        out << "  " << std::left << std::setw(30) << row->system << std::right << " FAILED: " << row->error << "\n";
        continue;
      }
      std::snprintf(line, sizeof line, "  %-30s %7.3g %-2s %7.3g %-2s %7.3g %-2s           ", row->system.c_str(),
                    row->median * mult, benchmark::GetTimeUnitString(row->unit), row->min * mult,
                    benchmark::GetTimeUnitString(row->unit), row->max * mult, benchmark::GetTimeUnitString(row->unit));
      out << line;
      for (const Row* other : rows) {
        if (other->error.empty()) std::snprintf(line, sizeof line, " %13.3gx", row->median / other->median);
        else std::snprintf(line, sizeof line, " %14s", "-");
        out << line;
      }
      out << "\n";
    }
  }

  std::map<std::pair<std::string, std::string>, Row> rows_;
};

// OpenBLAS reads OPENBLAS_CORETYPE as it loads, before main: here it can only be reported.
void configure_openblas() {
#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
  openblas_set_num_threads(bench::kHandThreads);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OpenBLAS: %d threads, %s kernels; OPENBLAS_CORETYPE=%s\n", openblas_get_num_threads(),
              openblas_get_corename(), coretype ? coretype : "(unset)");
  if (!coretype || std::string(coretype) != "SkylakeX")
    std::printf("note: the recorded OpenBLAS figures use its AVX-512 (SkylakeX) kernels, set before it loads:\n"
                "  OPENBLAS_CORETYPE=SkylakeX build/benchmarks/lazyjit-bench\n");
#else
  std::printf("OpenBLAS: not built in, its rows are left out (install libopenblas-dev: scripts/setup.sh --peers)\n");
#endif
  std::fflush(stdout);
}

void configure_peers() {
#ifdef LAZYJIT_BENCH_HAVE_TORCH
  bench::torch_setup();
#else
  std::printf("PyTorch: not built in, its rows are left out (install libtorch-dev: scripts/setup.sh --peers)\n");
#endif
#ifdef LAZYJIT_BENCH_HAVE_EIGEN
  bench::eigen_setup();
#else
  std::printf("Eigen: not built in, its rows are left out (install libeigen3-dev: scripts/setup.sh --peers)\n");
#endif
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("LAZYJIT_NUM_THREADS", std::to_string(bench::kHandThreads).c_str(), /*overwrite=*/0);
  // Rows time steady steps: compiled code from the first (first_steps rows set their own tier).
  setenv("LAZYJIT_TIER", "1", /*overwrite=*/0);
  // A first_steps row re-runs this binary to time a user's first steps in a fresh process.
  if (const char* spec = std::getenv(bench::kFirstStepsEnv)) return bench::first_steps_child(spec);
#ifdef LAZYJIT_BENCH_HAVE_TORCH
  // A compile_time_*_torch_* row re-runs this binary to time a first step in a fresh process.
  if (const char* spec = std::getenv(bench::kColdStepEnv)) return bench::torch_cold_step(spec);
#endif
  // Repetitions of the rows run in a random interleaved order unless asked otherwise: a
  // system's five repetitions then meet the same minutes of a shared machine's load as its
  // peers', not five minutes of their own (conv2d_fwd's ratio to eager read 0.98-1.35 in
  // three runs in row order and 1.35-1.53 in three interleaved, docs/benchmarks.md).
  std::vector<char*> args(argv, argv + argc);
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (std::none_of(args.begin(), args.end(), [](const char* a) {
        return std::string(a).rfind("--benchmark_enable_random_interleaving", 0) == 0;
      })) {
    args.insert(args.begin() + 1, interleave);
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  configure_openblas();
  configure_peers();
  TableReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                               : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
