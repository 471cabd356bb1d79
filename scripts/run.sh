#!/usr/bin/env bash
# Installs the dependencies, builds lazyjit and runs the main job: a character-level GPT trained
# on the GPL-3 text every Debian system has (examples/char_gpt.cpp), printing the loss per step,
# tokens per second, a greedy continuation, lazyjit's metrics and checks (the loss falls below
# its bound, one compile, every parameter and AdamW buffer updated in place); it exits 1 if one
# fails. examples/digits_cnn.cpp (a CNN on sklearn's digits) is the other example ctest runs.
# Usage: scripts/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" --target char_gpt
"$build_dir/examples/char_gpt"
