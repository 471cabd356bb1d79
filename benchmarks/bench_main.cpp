// lazyjit-bench entry point: Google Benchmark's main plus a table of lazyjit/peer ratios of medians.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#ifdef LAZYJIT_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "hand_loops.h"

namespace {

struct Median {
  double seconds;
  benchmark::TimeUnit unit;
};

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (r.error_occurred || !(median || single)) continue;
      std::string key = r.run_name.function_name;
      if (!r.run_name.args.empty()) key += "/" + r.run_name.args;
      double seconds = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      medians_[key] = {seconds, r.time_unit};
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    auto& out = GetOutputStream();
    bool header = false;
    for (const auto& [key, lazy] : medians_) {
      auto pos = key.find("_lazyjit");
      if (pos == std::string::npos) continue;
      for (const char* variant :
           {"hand", "hand_stream", "hand_fastmath", "hand_plus_pass", "openblas", "openblas_plus_pass"}) {
        std::string peer = key;
        peer.replace(pos + 1, 7, variant);
        auto hand = medians_.find(peer);
        if (hand == medians_.end()) continue;
        if (!header) out << "\nmedian real time, lazyjit vs peers (" << bench::kHandThreads << " threads each):\n";
        header = true;
        std::string workload = key.substr(0, pos) + key.substr(pos + 8);
        if (workload.rfind("BM_", 0) == 0) workload.erase(0, 3);
        double mult = benchmark::GetTimeUnitMultiplier(lazy.unit);
        const char* unit = benchmark::GetTimeUnitString(lazy.unit);
        char line[256];
        std::snprintf(line, sizeof line, "ratio %s: lazyjit %.3g %s, %s %.3g %s -> %.2fx\n", workload.c_str(),
                      lazy.seconds * mult, unit, variant, hand->second.seconds * mult, unit,
                      lazy.seconds / hand->second.seconds);
        out << line;
      }
    }
    out.flush();
  }

 private:
  std::map<std::string, Median> medians_;
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

}  // namespace

int main(int argc, char** argv) {
  setenv("LAZYJIT_NUM_THREADS", std::to_string(bench::kHandThreads).c_str(), /*overwrite=*/0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  configure_openblas();
  RatioReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_Color
                                               : benchmark::ConsoleReporter::OO_None);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
