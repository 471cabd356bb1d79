#!/usr/bin/env bash
# Installs lazyjit's build dependencies from Debian 12's archive. Idempotent: packages
# already present are left alone and apt is not even consulted.
#   scripts/setup.sh            build + test dependencies, the PyTorch front end's, and the main job's data set
#   scripts/setup.sh --peers    also the optional benchmark peers (Eigen, OpenBLAS, gnuplot)
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  llvm-19-dev llvm-19-tools libzstd-dev zlib1g-dev libxml2-dev libedit-dev libffi-dev
  libtbb-dev libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3
  python3-sklearn  # the main job's data set: sklearn/datasets/data/digits.csv.gz
  libtorch-dev python3-torch pybind11-dev python3-dev  # the PyTorch front end (frontends/torch), also a benchmark peer
  libopenmpi-dev openmpi-bin iproute2  # lazyjit_dist: collectives over MPI (lib/dist); mpirun and ip netns for its tests
)
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(libeigen3-dev libopenblas-dev gnuplot-nox)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
