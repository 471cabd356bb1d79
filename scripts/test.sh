#!/usr/bin/env bash
# Installs the dependencies, builds lazyjit (Release, Ninja) and passes every test:
# the gtest and lit suites through ctest, then a project outside the tree built against
# the installed package. Usage: scripts/test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
test/consumer/check.sh "$build_dir"
