#!/usr/bin/env bash
# Installs lazyjit's dependencies and the benchmark peers (libtorch, Eigen, OpenBLAS, gnuplot),
# builds lazyjit-bench (Release, Ninja) and runs it with every peer in its best setting. Writes
# OUTDIR/results.json (Google Benchmark), OUTDIR/results.csv and OUTDIR/chart.png, and prints
# the table. Usage: scripts/bench.sh OUTDIR [BUILD_DIR] [lazyjit-bench flags...]   (default build dir: build)
set -euo pipefail
cd "$(dirname "$0")/.."
outdir=${1:?usage: scripts/bench.sh OUTDIR [BUILD_DIR] [lazyjit-bench flags...]}
build_dir=${2:-build}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$outdir"

scripts/setup.sh --peers
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYJIT_BUILD_BENCHMARKS=ON
cmake --build "$build_dir" --target lazyjit-bench

# The peers' best settings (benchmarks/README.md): AVX-512 kernels in OpenBLAS and ATen, OpenMP
# threads that sleep instead of spinning on the two cores, malloc on huge pages.
env OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512 OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 \
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 LAZYJIT_NUM_THREADS=2 \
    "$build_dir/benchmarks/lazyjit-bench" --benchmark_out="$outdir/results.json" --benchmark_out_format=json "$@"

python3 benchmarks/bench_report.py "$outdir/results.json" "$outdir"
columns=$(head -1 "$outdir/chart.dat" | wc -w)
gnuplot <<GNUPLOT
set terminal pngcairo size 1400,700 noenhanced
set output "$outdir/chart.png"
set title "median time relative to lazyjit (above 1: lazyjit is faster), 2 threads"
set style data histogram
set style histogram clustered gap 1
set style fill solid border -1
set logscale y
set grid ytics
set key outside right
set linetype 9 lc rgb "#8b4513"   # the default cycle has 8 colours
set linetype 10 lc rgb "#808080"
set xtics rotate by 30 right
plot for [i=2:$columns] "$outdir/chart.dat" using i:xtic(1) title columnhead
GNUPLOT
echo "bench: wrote $outdir/results.json, $outdir/results.csv, $outdir/chart.png"
