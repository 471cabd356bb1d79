#!/usr/bin/env python3
"""The first-minute chart: step time over a workload's first steps, one line per peer.

Reads the CSV that lazyjit-bench appends with BENCH_FIRST_STEPS_CSV (peer,workload,step,seconds;
the median over repetitions is drawn) and writes an SVG (no plotting library needed), log-scale
time on the y axis.

Usage: first_steps_chart.py STEPS.csv WORKLOAD OUT.svg
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

COLOURS = {
    "lazyjit_auto": "#d62728",
    "lazyjit_tier1": "#ff9896",
    "lazyjit_tier0": "#9467bd",
    "torch_eager": "#1f77b4",
    "torch_lazy": "#2ca02c",
}
LABELS = {
    "lazyjit_auto": "lazyjit, LAZYJIT_TIER=auto",
    "lazyjit_tier1": "lazyjit, LAZYJIT_TIER=1 (waits for LLVM)",
    "lazyjit_tier0": "lazyjit, LAZYJIT_TIER=0 (tier 0 alone)",
    "torch_eager": "PyTorch eager",
    "torch_lazy": "PyTorch LTC (TorchScript backend)",
}


def main():
    path, workload, out = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = defaultdict(lambda: defaultdict(list))  # peer -> step -> seconds
    with open(path) as f:
        for peer, wl, step, seconds in csv.reader(f):
            if wl == workload:
                runs[peer][int(step)].append(float(seconds))
    series = {peer: [statistics.median(steps[s]) * 1e3 for s in sorted(steps)] for peer, steps in runs.items()}
    if not series:
        sys.exit(f"no rows for {workload} in {path}")
    width, height, left, right, top, bottom = 760, 420, 70, 250, 30, 50
    n = max(len(s) for s in series.values())
    lo = min(min(s) for s in series.values())
    hi = max(max(s) for s in series.values())
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def x(i):
        return left + (width - left - right) * i / max(1, n - 1)

    def y(ms):
        return top + (height - top - bottom) * (hi_e - math.log10(ms)) / (hi_e - lo_e)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">{workload}: time of each of the first {n} steps, fresh process (median of runs)</text>']
    for e in range(lo_e, hi_e + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if not (10 ** lo_e <= v <= 10 ** hi_e):
                continue
            svg.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
            svg.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g} ms</text>')
    for i in range(0, n, 5):
        svg.append(f'<text x="{x(i):.1f}" y="{height - bottom + 18}" text-anchor="middle">{i}</text>')
    svg.append(f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">step</text>')
    for k, peer in enumerate(p for p in COLOURS if p in series):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(series[peer]))
        svg.append(f'<polyline fill="none" stroke="{COLOURS[peer]}" stroke-width="2" points="{points}"/>')
        ly = top + 20 + 18 * k
        svg.append(f'<line x1="{width - right + 10}" x2="{width - right + 30}" y1="{ly}" y2="{ly}" stroke="{COLOURS[peer]}" stroke-width="2"/>')
        svg.append(f'<text x="{width - right + 36}" y="{ly + 4}">{LABELS.get(peer, peer)}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
