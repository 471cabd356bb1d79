#!/usr/bin/env bash
# Builds the tests with AddressSanitizer + UndefinedBehaviorSanitizer and runs the gtest
# suites under them (CI runs this after scripts/test.sh). Usage: scripts/sanitize.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-asan}

scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAZYJIT_BUILD_BENCHMARKS=OFF \
  -DLAZYJIT_BUILD_EXAMPLES=OFF -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake --build "$build_dir"
# LLVM keeps process-lifetime singletons, so leak checking is off; every other error aborts.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -E '^lit$'
