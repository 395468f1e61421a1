#!/usr/bin/python3
"""Turns one bench/scripts/compare.sh run (its OUT/results.json) into bench/results/compare.json, the
figures docs/performance.md is generated from (scripts/docs/gen-performance.py), with the machine
they were measured on.

  bench/scripts/compare_results.py OUT --seconds S [--python-only-seconds P] > bench/results/compare.json

S is the run's total time ("done in S s", the last line compare.sh prints); P that of a
BENCH_ONLY=python run, where one was made. The run's sampler microbenchmarks have their own file
(bench/scripts/sampler_results.py)."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine  # noqa: E402

# The workloads as the performance page's table names them.
TITLES = {"w1": "1M x 64 f32", "w2": "64 KiB rows", "w3": "sequences, bucketed", "w4": "class-balanced"}


def rounded(value, digits=2):
    return None if value is None else round(value, digits)


def low_high(values, digits=0):
    return {"low": round(min(values), digits) if digits else round(min(values)),
            "high": round(max(values), digits) if digits else round(max(values))}


def peer_variant(row, variant):
    rate = row.get(f"peer_{variant}_samples_per_s")
    if rate is None:
        return None
    return {"samples_per_s": round(rate), "workers": row[f"peer_{variant}_num_workers"]}


def ratio_to_peer(ratio):
    """Two significant figures below 10 (3.3x), whole numbers above (147x)."""
    if ratio is None:
        return None
    return round(ratio, 1) if ratio < 10 else round(ratio)


def run_of(row):
    """One row of compare.sh's table as the page's table reads it."""
    def ratio(key, digits=2):
        return rounded(row.get(key), digits)

    gather = row.get("strider_rank_over_gather")
    return {
        "workload": row["workload"],
        "ranks": row["ranks"],
        "samples_per_s": round(row["strider_samples_per_s"]),
        "gb_per_s": rounded(row["strider_bytes_per_s"] / 1e9),
        "peer_per_row": peer_variant(row, "per_row"),
        "peer_batched": peer_variant(row, "batched"),
        "ratio_to_peer": ratio_to_peer(row.get("strider_over_peer")),
        "sequential_read_gb_per_s": rounded(row["sequential_read_bytes_per_s"] / 1e9),
        "ratio_to_sequential_read": ratio("strider_over_sequential_read"),
        "gather_limit_rows_per_s_one_core": round(row["gather_rows_per_s_one_core"]),
        "slowest_rank_of_gather_percent": round(100 * gather) if gather is not None else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="compare.sh's output folder (BENCH_OUT), holding results.json")
    parser.add_argument("--seconds", type=int, required=True, help="the run's total time")
    parser.add_argument("--python-only-seconds", type=int, help="a BENCH_ONLY=python run's total time")
    args = parser.parse_args()
    with open(os.path.join(args.out, "results.json")) as handle:
        results = json.load(handle)
    rows = [row for row in results["table"] if row.get("strider_samples_per_s")]
    if not rows:
        sys.exit(f"compare_results: {args.out}/results.json has no strider figures")

    # The spread of repeated runs of one configuration within this run: how far the machine drifts.
    spreads = [max(row["strider_runs_samples_per_s"]) / min(row["strider_runs_samples_per_s"])
               for row in rows if len(row.get("strider_runs_samples_per_s", [])) > 1]
    described = machine(packages=("torch", "h5py"))

    # w1's repeats against the peer (measured once) and the gather limit (one core).
    w1_repeats = {}
    for row in rows:
        runs = row.get("strider_runs_samples_per_s", [])
        if row["workload"] != "w1" or not runs:
            continue
        entry = {"million_samples_per_s": low_high([rate / 1e6 for rate in runs], 1)}
        if row.get("peer_best_samples_per_s"):
            entry["ratio_to_peer"] = low_high([rate / row["peer_best_samples_per_s"] for rate in runs])
        w1_repeats[f"ranks_{row['ranks']}"] = entry

    cold = {extra["world"]: extra for extra in results.get("extras", []) if extra["tag"].startswith("w1-cold")}
    page_cache = {f"w1_cold_ranks_{ranks}_million_samples_per_s": round(extra["samples_per_s"] / 1e6, 2)
                  for ranks, extra in sorted(cold.items())}
    durations = {"compare": args.seconds}
    if args.python_only_seconds:
        durations["python_only"] = args.python_only_seconds

    # 2 ranks against 1 (w3, w4), and against 1 rank held to one core where compare.sh ran it.
    scaling = {}
    for row in rows:
        if row["ranks"] == 2 and row.get("strider_over_one_rank"):
            scaling[row["workload"]] = {
                "two_ranks_over_one": rounded(row["strider_over_one_rank"]),
                "two_ranks_over_one_paired": rounded(row.get("strider_over_one_rank_paired")),
                "two_ranks_over_one_on_one_core": rounded(row.get("strider_over_one_rank_one_core")),
                "one_rank_one_core_million_samples_per_s": rounded(
                    row.get("strider_one_rank_one_core_samples_per_s", 0) / 1e6, 1) or None,
                # What 2 fully busy cores would give at the CPU the 2-rank run spent per sample, over
                # the 1-rank figure (summarize.py).
                "cpu_ceiling_over_one": rounded(row.get("strider_cpu_ceiling_over_one_rank")),
                "two_ranks_million_samples_per_cpu_s": rounded(row.get("strider_samples_per_cpu_s", 0) / 1e6, 1) or None,
                # The same at the CPU the 1-rank run spent per sample: 2 ranks that split its work
                # with no cost of their own.
                "one_rank_cpu_bound_over_one": rounded(row.get("strider_one_rank_cpu_bound_over_one_rank")),
            }

    compare = {
        "machine": described,
        # The largest max/min over the repeats of one configuration in this run.
        "repeat_spread_factor": round(max(spreads), 2) if spreads else None,
        "workloads": {row["workload"]: TITLES.get(row["workload"], row["title"]) for row in rows},
        "durations_s": durations,
        "page_cache": page_cache,
        "w1_repeats": w1_repeats,
        "scaling": scaling,
        "runs": [run_of(row) for row in rows],
    }
    json.dump(compare, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
