#!/usr/bin/env bash
# Installs the dependencies, builds lazyjit and runs the main job: a LeNet-style CNN trained on
# sklearn's handwritten digits (examples/digits_cnn.cpp), printing the loss per epoch, the test
# accuracy, lazyjit's metrics and a summary (compiles, donations per step); it fails below 97%
# accuracy.
# Usage: scripts/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" --target digits_cnn
"$build_dir/examples/digits_cnn"
