#!/usr/bin/env python3
"""compare.sh's BENCH_ONLY=baseline table: two builds of strider-bench on w1, run in alternation.

    summarize_baseline.py OUT REPEATS RANKS...

Reads OUT/runs/{baseline,current}-w1-rR.K.json (K = 1..REPEATS), prints each build's median
samples/s per rank count and the median of the pairs' ratios (this build / the baseline: each
ratio divides two runs made one after the other), and writes OUT/baseline.json.
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, repeats, ranks_list = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

    def rate(build, ranks, k):
        with open(f"{out}/runs/{build}-w1-r{ranks}.{k}.json") as f:
            return json.load(f)["samples_per_s"]

    runs = []
    for ranks in ranks_list:
        base = [rate("baseline", ranks, k) for k in range(1, repeats + 1)]
        mine = [rate("current", ranks, k) for k in range(1, repeats + 1)]
        ratios = [m / b for m, b in zip(mine, base)]
        runs.append({"ranks": int(ranks), "baseline_samples_per_s": statistics.median(base),
                     "samples_per_s": statistics.median(mine), "ratio_to_baseline": statistics.median(ratios),
                     "pair_ratios": ratios})
        print(f"w1 at {ranks} rank(s): baseline {statistics.median(base):,.0f} samples/s, this build "
              f"{statistics.median(mine):,.0f}; this build / baseline {statistics.median(ratios):.3f} "
              f"(median of {repeats} pairs; pairs {', '.join(f'{r:.3f}' for r in ratios)})")
    with open(f"{out}/baseline.json", "w") as f:
        json.dump({"workload": "w1", "repeats": repeats, "runs": runs}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
