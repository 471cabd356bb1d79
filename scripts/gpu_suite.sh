#!/usr/bin/env bash
# The GPU tests on a lent GPU machine, which has the NVIDIA driver but no Debian packages:
# builds the GPU test binaries and lazyjit-bench-gpu here, bundles them in .gpu/ (ignored by git)
# with the shared libraries they load (the large ones xz-compressed) and benchmarks/gpu_peers.py,
# and writes .gpu/run.sh, which runs the tests there, then the benchmark and its PyTorch peers.
# Usage: scripts/gpu_suite.sh [BUILD_DIR]   (default: build, configured by scripts/test.sh)
# Then on the device: carry [".gpu"], command "bash .gpu/run.sh".
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
tests=(lazyjit_nvptx_test lazyjit_cuda_test)
programs=("${tests[@]/#/test/}" benchmarks/lazyjit-bench-gpu)

cmake --build "$build_dir" --target "${tests[@]}" lazyjit-bench-gpu
rm -rf .gpu
mkdir -p .gpu/lib
for p in "${programs[@]}"; do cp "$build_dir/$p" .gpu/ && strip .gpu/"$(basename "$p")"; done
cp benchmarks/gpu_peers.py .gpu/
# Every library they load but glibc's own (the GPU machine has a glibc of its own).
for p in "${programs[@]}"; do ldd .gpu/"$(basename "$p")"; done | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libmvec|libdl|libpthread|librt|ld-linux-x86-64)\.so' | while read -r lib; do cp -L "$lib" .gpu/lib/; done
find .gpu/lib -size +1M -exec xz -T0 -6 {} +  # libLLVM and its ICU and Z3: 26 MB and less
cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs the GPU tests of this bundle (scripts/gpu_suite.sh made it) on a machine with a GPU.
set -euo pipefail
cd "$(dirname "$0")"
for f in lib/*.xz; do [ -e "$f" ] && xz -d -T0 "$f"; done
export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
status=0
for t in lazyjit_nvptx_test lazyjit_cuda_test; do ./"$t" || status=1; done
./lazyjit-bench-gpu || status=1
env -u LD_LIBRARY_PATH python3 gpu_peers.py || true  # PyTorch beside it, where the machine has it with CUDA
exit "$status"
RUN
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qsx '/.gpu/' "$exclude" || echo '/.gpu/' >> "$exclude"
du -sh .gpu
