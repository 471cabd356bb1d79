// Picks tier 0's block functions for the CPU at hand.
#include "runtime/tier0_blocks.h"

namespace lazyjit::runtime::tier0 {

void fill_baseline(BlockTable& table);
void fill_avx2(BlockTable& table);
void fill_avx512(BlockTable& table);

namespace {

struct Tables {
  BlockTable baseline, avx2, avx512;
  bool has_avx2, has_avx512;
  Tables() {
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    // The AVX-512 build uses the subsets compiled kernels use on such CPUs.
    has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    fill_baseline(baseline);
    baseline.isa = "x86-64";
    if (has_avx2) {
      fill_avx2(avx2);
      avx2.isa = "avx2";
    }
    if (has_avx512) {
      fill_avx512(avx512);
      avx512.isa = "avx512";
    }
  }
};

const Tables& tables() {
  static const Tables& t = *new Tables;  // never destroyed, like the runtime that uses it
  return t;
}

}  // namespace

const BlockTable* block_table_for(int isa) {
  const Tables& t = tables();
  switch (isa) {
    case 0: return &t.baseline;
    case 1: return t.has_avx2 ? &t.avx2 : nullptr;
    case 2: return t.has_avx512 ? &t.avx512 : nullptr;
    default: return nullptr;
  }
}

const BlockTable& block_table() {
  static const BlockTable* chosen = block_table_for(2) ? block_table_for(2)
                                    : block_table_for(1) ? block_table_for(1)
                                                         : block_table_for(0);
  return *chosen;
}

}  // namespace lazyjit::runtime::tier0
