#!/usr/bin/env bash
# Installs the dependencies, builds lazyjit and runs the main job: a batch-norm + GELU
# program that prints its results, lazyjit's metrics and the LLVM IR of its fused kernel.
# Usage: scripts/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" --target batchnorm_gelu
"$build_dir/examples/batchnorm_gelu"
