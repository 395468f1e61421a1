#!/usr/bin/python3
"""Turns the sampler microbenchmarks of one bench/scripts/compare.sh run (bench/sampler_bench.cpp's
Google Benchmark output, OUT/sampler-bench.json) into bench/results/samplers.json, the sampler table
docs/performance.md is generated from (scripts/docs/gen-performance.py), with the machine they were
measured on.

  bench/scripts/sampler_results.py OUT/sampler-bench.json > bench/results/samplers.json

Per mode: indices/s of batch() and the time of set_epoch (N = 1M, 4 ranks, batches of 256, one
core); the Feistel permutation's indices/s per domain size, with and without cycle walking."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine  # noqa: E402

# The modes in the table's order. A mode whose set_epoch does no work per sample shows its cost
# rather than a time of nanoseconds; some carry a note on what set_epoch does.
MODES = ("distributed", "streaming", "bucketed", "block", "balanced", "weighted", "stratified")
CONSTANT_SET_EPOCH = {"streaming", "block", "weighted"}
NOTES = {"distributed": "torch's permutation", "bucketed": "shuffle, sort windows, pack",
         "weighted": "counter-based draws"}


def two_figures(value):
    """Two significant figures: 0.043, 8.4, 85, 120 (whole numbers from 10 up)."""
    rounded = float(f"{value:.2g}")
    return int(rounded) if rounded >= 10 else rounded


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", help="the sampler benchmark's JSON output (compare.sh: OUT/sampler-bench.json)")
    args = parser.parse_args()
    with open(args.benchmarks) as handle:
        by_name = {b["name"]: b for b in json.load(handle).get("benchmarks", [])}

    def milliseconds(benchmark):
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[benchmark["time_unit"]]
        return benchmark["real_time"] * scale

    measured = {name.split("/", 1)[1] for name in by_name if name.startswith("batches/")}
    for mode in sorted(measured - set(MODES)):
        print(f"sampler_results: batches/{mode} is not in the table (add it to MODES)", file=sys.stderr)
    runs = []
    for mode in MODES:
        for name in (f"batches/{mode}", f"set_epoch/{mode}"):
            if name not in by_name:
                sys.exit(f"sampler_results: {args.benchmarks} lacks {name}")
        batches, plan = by_name[f"batches/{mode}"], by_name[f"set_epoch/{mode}"]
        run = {"mode": mode, "million_indices_per_s": round(batches["indices_per_s"] / 1e6)}
        if mode in CONSTANT_SET_EPOCH:
            run.update(set_epoch_ms=None, set_epoch_cost="O(1)")
        else:
            run["set_epoch_ms"] = two_figures(milliseconds(plan))
        if mode in NOTES:
            run["set_epoch_note"] = NOTES[mode]
        runs.append(run)

    # feistel_permutation/BITS/WALK: a domain of 2^BITS indices, with (0) or without (1) cycle walking.
    domains = sorted({int(name.split("/")[1]) for name in by_name if name.startswith("feistel_permutation/")})
    walking = [by_name[f"feistel_permutation/{bits}/0"]["indices_per_s"] for bits in domains
               if f"feistel_permutation/{bits}/0" in by_name]
    direct = [b["indices_per_s"] for name, b in by_name.items()
              if name.startswith("feistel_permutation/") and name.endswith("/1")]
    result = {"machine": machine(), "runs": runs}
    if walking and direct:
        result["feistel"] = {"domains_log2": domains,
                             "million_indices_per_s_each": round(min(walking) / 1e6),
                             "million_indices_per_s_without_cycle_walking": round(min(direct) / 1e6)}
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
