#!/usr/bin/env python3
"""Google Benchmark JSON from lazyjit-bench -> results.csv (one row per workload and system:
median, min, max) and chart.dat (per workload, each system's median / lazyjit's, for gnuplot).
Usage: bench_report.py results.json OUTDIR"""
import csv
import json
import sys

FAMILIES = ("lazyjit", "hand", "openblas", "torch", "eigen")  # as kSystemFamilies in bench_main.cpp
COUNTERS = ("compiles", "compile_seconds", "settle_seconds", "time_per_op")  # user counters copied to the CSV (from the median)


def split_name(run_name):
    """'BM_ew_simple_hand_stream/16777216' -> ('ew_simple/16777216', 'hand_stream')."""
    function, _, args = run_name.partition("/")
    function = function.removeprefix("BM_")
    cut = min((i for f in FAMILIES if (i := function.find("_" + f)) >= 0), default=len(function))
    args = "/".join(a for a in args.split("/") if ":" not in a and not a.endswith("_time"))  # min_time:, real_time
    workload = function[:cut] + ("/" + args if args else "")
    return workload, function[cut + 1:] or "?"


def main(json_path, outdir):
    rows = {}
    for b in json.load(open(json_path))["benchmarks"]:
        row = rows.setdefault(split_name(b["run_name"]), {"unit": b["time_unit"], "error": ""})
        if b.get("error_occurred"):
            row["error"] = b.get("error_message", "failed")
        stat = b.get("aggregate_name") if b["run_type"] == "aggregate" else None
        if stat in ("median", "min", "max") or (stat is None and b.get("repetitions", 1) <= 1):
            for key in ((stat,) if stat else ("median", "min", "max")):
                row[key] = b["real_time"]
            if stat != "min" and stat != "max":
                row["counters"] = " ".join(f"{c}={b[c]:.4g}" for c in COUNTERS if c in b)

    systems = sorted({s for _, s in rows}, key=lambda s: (s != "lazyjit", s))
    workloads = sorted({w for w, _ in rows})
    with open(f"{outdir}/results.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["workload", "system", "median", "min", "max", "unit", "ratio_to_lazyjit", "counters", "error"])
        for w in workloads:
            lazy = rows.get((w, "lazyjit"), {}).get("median")
            for s in systems:
                r = rows.get((w, s))
                if r is None:
                    continue
                ratio = f"{r['median'] / lazy:.3g}" if lazy and "median" in r and not r["error"] else ""
                out.writerow([w, s] + [f"{r[k]:.4g}" if k in r else "" for k in ("median", "min", "max")] +
                             [r["unit"], ratio, r.get("counters", ""), r["error"]])
    peers = [s for s in systems if s != "lazyjit"]
    with open(f"{outdir}/chart.dat", "w") as f:
        f.write("workload " + " ".join(peers) + "\n")
        for w in workloads:
            lazy = rows.get((w, "lazyjit"), {})
            if "median" not in lazy or lazy["error"] or not any((w, s) in rows for s in peers):
                continue
            cells = []
            for s in peers:
                r = rows.get((w, s), {})
                cells.append(f"{r['median'] / lazy['median']:.4g}" if "median" in r and not r["error"] else "NaN")
            f.write(f'"{w}" ' + " ".join(cells) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
