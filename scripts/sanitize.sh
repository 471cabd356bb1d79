#!/usr/bin/env bash
# The tests under sanitizers (CI runs this after scripts/test.sh):
#   ASan + UBSan: every gtest suite;
#   TSan: the suites that exercise threads (caches, executor, tensors shared with mark_step,
#         tier 0 beside background compiles), and the side-by-side training threads 100 times
#         on tier 0 and 20 times with background compiles (LAZYJIT_TIER=auto).
# Usage: scripts/sanitize.sh [BUILD_DIR_PREFIX]   (default: build; makes PREFIX-asan, PREFIX-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build}
scripts/setup.sh

# The PyTorch front end is left out: its Python tests load the module into Debian's python3,
# which cannot host a sanitizer runtime (scripts/test.sh runs them).
configure() {  # DIR FLAGS
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAZYJIT_BUILD_BENCHMARKS=OFF \
    -DLAZYJIT_BUILD_EXAMPLES=OFF -DLAZYJIT_BUILD_TORCH=OFF -DCMAKE_CXX_FLAGS="$2 -fno-omit-frame-pointer"
}

configure "$prefix-asan" "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cmake --build "$prefix-asan"
# LLVM keeps process-lifetime singletons, so leak checking is off; every other error aborts.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$prefix-asan" --output-on-failure -j "$(nproc)" -E '^lit$'

threaded=(lazyjit_api_test lazyjit_codegen_test lazyjit_runtime_test lazyjit_step_test lazyjit_tier_test)
configure "$prefix-tsan" "-fsanitize=thread"
cmake --build "$prefix-tsan" --target "${threaded[@]}" lazyjit_hardening_test
for suite in "${threaded[@]}"; do
  echo "== $suite under ThreadSanitizer"
  # As ctest runs them: on tier 0 unless a test asks for another tier (tier_test does).
  LAZYJIT_TIER=0 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/test/tsan.supp" "$prefix-tsan/test/$suite" --gtest_brief=1
done
# Threads that train side by side, and the barrier lock, 100 times (issue 13).
echo "== lazyjit_hardening_test ThreadsTest.* x100 under ThreadSanitizer"
LAZYJIT_TIER=0 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/test/tsan.supp" "$prefix-tsan/test/lazyjit_hardening_test" \
  --gtest_brief=1 --gtest_filter='ThreadsTest.*' --gtest_repeat=100
# A compile budget of 0: each graph compiles from its second run (the default would keep
# most of these small graphs on tier 0 on two cores, and test no compile beside them).
echo "== lazyjit_hardening_test ThreadsTest.* x20 with background compiles under ThreadSanitizer"
LAZYJIT_TIER=auto LAZYJIT_COMPILE_COST_MS=0 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/test/tsan.supp" "$prefix-tsan/test/lazyjit_hardening_test" \
  --gtest_brief=1 --gtest_filter='ThreadsTest.*' --gtest_repeat=20
