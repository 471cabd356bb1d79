// Fuzz test of the public API: random programs of ops (random shapes, dtypes, dims, numbers,
// valid and not) checked against the documented contract and the reference interpreter.
//
// Always: every seed of test/fuzz/seeds.txt except those of test/fuzz/known_failures.txt.
// LAZYJIT_FUZZ_SECONDS=N: new seeds (from LAZYJIT_FUZZ_SEED, else the clock) for N seconds,
// printing each failing one (N=0 with a seed: that one program). A failure prints the seed,
// the program as C++ and the program cut down to the steps the failure needs
// (LAZYJIT_FUZZ_MINIMISE=0 skips that). LAZYJIT_FUZZ_VERBOSE=1 prints every program;
// LAZYJIT_FUZZ_DIR names another corpus directory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzzer.h"

namespace lazyjit::fuzz {
namespace {

constexpr int kHangSeconds = 50;

std::filesystem::path corpus_dir() {
  if (const char* dir = std::getenv("LAZYJIT_FUZZ_DIR")) return dir;
  return std::filesystem::path(__FILE__).parent_path() / "fuzz";
}

/// Seeds of a corpus file, each the first word of a line, with the rest of the line (a known
/// failure's description). Lines starting with '#' are comments.
std::map<uint64_t, std::string> read_seeds(const std::string& file) {
  std::map<uint64_t, std::string> seeds;
  std::ifstream in(corpus_dir() / file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string seed, rest;
    if (!(words >> seed) || seed[0] == '#') continue;
    std::getline(words >> std::ws, rest);
    seeds[std::stoull(seed, nullptr, 0)] = rest;
  }
  return seeds;
}

std::vector<uint64_t> corpus() {
  const std::map<uint64_t, std::string> known = read_seeds("known_failures.txt");
  std::vector<uint64_t> seeds;
  for (const auto& [seed, _] : read_seeds("seeds.txt")) {
    if (!known.contains(seed)) seeds.push_back(seed);
  }
  return seeds;
}

/// The crash handlers and the watchdog, installed once per process.
void prepare() {
  static const bool prepared = [] {
    Transcript::get().install_crash_handlers();
    Transcript::get().start_watchdog(kHangSeconds);
    return true;
  }();
  (void)prepared;
}

std::string run_seed(uint64_t seed) {
  prepare();
  return run_program(seed);
}

class Corpus : public testing::TestWithParam<uint64_t> {};

TEST_P(Corpus, ProgramKeepsTheContract) {
  const std::string failure = run_seed(GetParam());
  EXPECT_TRUE(failure.empty()) << failure;
}

INSTANTIATE_TEST_SUITE_P(Seeds, Corpus, testing::ValuesIn(corpus()),
                         [](const testing::TestParamInfo<uint64_t>& info) {
                           return fmt::format("seed_{:x}", info.param);
                         });

uint64_t first_new_seed() {
  if (const char* s = std::getenv("LAZYJIT_FUZZ_SEED")) return std::stoull(s, nullptr, 0);
  return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

/// Seeds first, first + 1, ... for LAZYJIT_FUZZ_SECONDS (at least one program).
TEST(Fuzz, NewSeedsForABoundedTime) {
  const char* seconds = std::getenv("LAZYJIT_FUZZ_SECONDS");
  if (seconds == nullptr) GTEST_SKIP() << "set LAZYJIT_FUZZ_SECONDS to fuzz new seeds";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::stod(seconds));
  uint64_t seed = first_new_seed();
  int programs = 0, failures = 0;
  do {
    const std::string failure = run_seed(seed);
    ++programs;
    if (!failure.empty()) {
      ++failures;
      ADD_FAILURE() << "failing seed " << fmt::format("{:#x}", seed) << " (add it to test/fuzz/seeds.txt)\n"
                    << failure;
    }
    ++seed;
  } while (std::chrono::steady_clock::now() < deadline);
  std::fprintf(stderr, "lazyjit fuzz: %d programs, %d failing\n", programs, failures);
}

/// The seeds of known_failures.txt, which the corpus skips: run with
/// --gtest_also_run_disabled_tests to see which still fail (a fixed one can move back).
TEST(Fuzz, DISABLED_KnownFailures) {
  for (const auto& [seed, description] : read_seeds("known_failures.txt")) {
    const std::string failure = run_seed(seed);
    if (failure.empty()) {
      std::fprintf(stderr, "seed %#llx passes now (%s): remove it from known_failures.txt\n",
                   static_cast<unsigned long long>(seed), description.c_str());
    } else {
      ADD_FAILURE() << "known failure " << fmt::format("{:#x}", seed) << " (" << description << ")\n" << failure;
    }
  }
}

TEST(Fuzz, CorpusIsPresent) { EXPECT_GE(read_seeds("seeds.txt").size(), 32u) << corpus_dir(); }

}  // namespace
}  // namespace lazyjit::fuzz
