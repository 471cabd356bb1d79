#!/usr/bin/env bash
# Installs lazyjit from BUILD_DIR into a scratch prefix, then configures, builds and runs
# test/consumer against it with find_package(lazyjit CONFIG).
set -euo pipefail
build_dir=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > /dev/null
cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/build" > /dev/null
"$work/build/consumer"
