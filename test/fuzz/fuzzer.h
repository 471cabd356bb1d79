// A whole fuzz program from a seed (a few leaves, 30 to 60 weighted random calls and reads, a
// final sync of everything), and the minimisation of a failing one to the steps it needs.
#pragma once

#include <cstdio>
#include <regex>
#include <cstdlib>
#include <string>

#include "reads.h"
#include "shape_calls.h"
#include "updates.h"

namespace lazyjit::fuzz {

struct Generator {
  const char* name;
  int weight;
  void (*run)(Program&);
};

inline constexpr Generator kGenerators[] = {
    {"from_vector", 5, gen_from_vector},
    {"full", 3, gen_full},
    {"arange", 1, gen_arange},
    {"rand", 2, gen_random},
    {"binary", 12, gen_binary},
    {"binary_scalar", 8, gen_binary_scalar},
    {"unary", 7, gen_unary},
    {"where", 3, gen_where},
    {"clamp", 2, gen_clamp},
    {"cast", 3, gen_cast},
    {"reduce", 6, gen_reduce},
    {"argmax", 2, gen_argmax},
    {"softmax", 2, gen_softmax},
    {"layer_norm", 1, gen_layer_norm},
    {"matmul", 4, gen_matmul},
    {"reshape", 4, gen_reshape},
    {"transpose", 2, gen_transpose},
    {"permute", 2, gen_permute},
    {"expand", 3, gen_expand},
    {"slice", 4, gen_slice},
    {"cat", 3, gen_cat},
    {"index_select", 2, gen_index_select},
    {"gather", 2, gen_gather},
    {"one_hot", 1, gen_one_hot},
    {"squeeze", 3, gen_squeeze},
    {"update", 5, gen_update},
    {"undefined", 1, gen_undefined},
    {"huge", 1, gen_huge},
    {"sync", 3, gen_sync},
    {"mark_step", 2, gen_mark_step},
    {"item", 2, gen_item},
    {"to_vector", 1, gen_to_vector},
    {"dump", 1, gen_dump},
};

inline void random_call(Program& p) {
  int total = 0;
  for (const Generator& g : kGenerators) total += g.weight;
  int64_t roll = p.rng().range(0, total - 1);
  for (const Generator& g : kGenerators) {
    if (roll < g.weight) return g.run(p);
    roll -= g.weight;
  }
}

/// A failure with its numbers and names blanked out, up to the first difference it reports:
/// the same bug still fails this way when unrelated steps are removed.
inline std::string signature(const std::string& failure) {
  std::string text = std::regex_replace(failure, std::regex("[-+]?[0-9][0-9a-fx.e+-]*"), "#");
  const std::string differs = "differs from its reference";
  if (const size_t at = text.find(differs); at != std::string::npos) text.resize(at + differs.size());
  return text;
}

/// The steps of a failing program with every chunk removed whose removal keeps the failure
/// (halving chunks down to single steps).
inline std::vector<Step> minimise(uint64_t seed, std::vector<Step> steps, const std::string& target) {
  for (size_t chunk = std::max<size_t>(steps.size() / 2, 1);; chunk /= 2) {
    for (size_t start = 0; start < steps.size();) {
      std::vector<Step> candidate(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(start));
      candidate.insert(candidate.end(), steps.begin() + static_cast<std::ptrdiff_t>(std::min(start + chunk, steps.size())),
                       steps.end());
      if (signature(Program::replay(seed, candidate).failure()) == target) {
        steps = std::move(candidate);
      } else {
        start += chunk;
      }
    }
    if (chunk == 1) return steps;
  }
}

/// The failing program `p` cut down to the steps the failure needs, as text.
inline std::string minimised_listing(const Program& p) {
  const std::string target = signature(p.failure());
  if (signature(Program::replay(p.seed(), p.steps()).failure()) != target) {
    return "(replaying the recorded steps does not fail the same way: not minimised)\n";
  }
  const std::vector<Step> steps = minimise(p.seed(), p.steps(), target);
  return fmt::format("minimised program ({} of {} steps):\n{}", steps.size(), p.steps().size(),
                     Program::replay(p.seed(), steps).listing());
}

/// Runs the program of `seed`; returns its failure report (what failed, the seed, the program
/// as C++ and, unless LAZYJIT_FUZZ_MINIMISE=0, the program cut down to what the failure
/// needs), or an empty string when every call kept the contract.
inline std::string run_program(uint64_t seed) {
  Program p(seed);
  Transcript::get().begin(fmt::format("seed {:#x}:\n", seed));
  const int64_t calls = p.rng().range(30, 60);
  try {
    while (p.size() < 3 && !p.failed()) make_leaf(p, random_dtype(p.rng()), random_shape(p.rng()));
    for (int64_t i = 0; i < calls && !p.failed(); ++i) {
      p.trim();
      random_call(p);
    }
    if (!p.failed()) check_everything(p);
  } catch (const std::exception& e) {
    p.fail(fmt::format("the fuzzer itself threw {}: {}", type_name(e), e.what()));
  }
  Transcript::get().end();
  if (std::getenv("LAZYJIT_FUZZ_VERBOSE") != nullptr) {
    const Coverage& c = p.coverage();
    std::fprintf(stderr, "seed %#llx (%lld compiles so far; values compared exact %d, close %d, not %d):\n%s",
                 static_cast<unsigned long long>(seed), static_cast<long long>(metrics().compiles), c.values[0],
                 c.values[1], c.values[2], p.listing().c_str());
  }
  if (!p.failed()) return "";
  const char* minimise = std::getenv("LAZYJIT_FUZZ_MINIMISE");
  const std::string shortest = minimise != nullptr && std::string(minimise) == "0" ? "" : minimised_listing(p);
  return fmt::format("{}\nprogram (seed {:#x}; rerun alone with LAZYJIT_FUZZ_SEED={:#x} LAZYJIT_FUZZ_SECONDS=0):\n{}{}",
                     p.failure(), seed, seed, p.listing(), shortest);
}

}  // namespace lazyjit::fuzz
