// A whole fuzz program from a seed: a few leaves, 30 to 60 weighted random calls and reads,
// and a final sync that compares every live tensor with its reference.
#pragma once

#include <cstdio>
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
    {"matmul", 4, gen_matmul},
    {"reshape", 4, gen_reshape},
    {"transpose", 2, gen_transpose},
    {"permute", 2, gen_permute},
    {"expand", 3, gen_expand},
    {"slice", 4, gen_slice},
    {"cat", 3, gen_cat},
    {"squeeze", 3, gen_squeeze},
    {"update", 5, gen_update},
    {"undefined", 1, gen_undefined},
    {"huge", 1, gen_huge},
    {"sync", 3, gen_sync},
    {"mark_step", 1, gen_mark_step},
    {"item", 2, gen_item},
    {"to_vector", 1, gen_to_vector},
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

/// Runs the program of `seed`; returns its failure report (what failed, the seed and the
/// program as C++), or an empty string when every call kept the contract.
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
    p.fail(fmt::format("the fuzzer itself threw {}: {}", typeid(e).name(), e.what()));
  }
  Transcript::get().end();
  if (std::getenv("LAZYJIT_FUZZ_VERBOSE") != nullptr) {
    const Coverage& c = p.coverage();
    std::fprintf(stderr, "seed %#llx (%lld compiles so far; values compared exact %d, close %d, not %d):\n%s",
                 static_cast<unsigned long long>(seed), static_cast<long long>(metrics().compiles), c.values[0],
                 c.values[1], c.values[2], p.listing().c_str());
  }
  if (!p.failed()) return "";
  return fmt::format("{}\nprogram (seed {:#x}; reproduce with LAZYJIT_FUZZ_SEED={:#x} LAZYJIT_FUZZ_SECONDS=0):\n{}",
                     p.failure(), seed, seed, p.listing());
}

}  // namespace lazyjit::fuzz
