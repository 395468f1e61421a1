#!/usr/bin/env python3
"""compare.sh's paired runs on w1: two kinds of strider-bench run made in alternation (each first in
half the pairs), so that both see the same phases of the machine's drift.

    summarize_pairs.py OUT REPEATS A B NAME RANKS...

Reads OUT/runs/{A,B}-w1-rR.K.json (K = 1..REPEATS), prints per rank count each kind's median
samples/s and time to first batch, and the median of the pairs' ratios (B / A: each ratio divides
two runs made one after the other); writes OUT/NAME.json. BENCH_ONLY=baseline pairs another
build (A: baseline) with this one (B: current); BENCH_ONLY=short pairs a 3-epoch run (A: epochs3)
with a 1-epoch one (B: epochs1), the start-up a short job pays.
"""
import json
import statistics
import sys


def main():
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    out, repeats, a, b, name, ranks_list = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], \
        sys.argv[6:]

    def figures(kind, ranks):
        runs = []
        for k in range(1, repeats + 1):
            with open(f"{out}/runs/{kind}-w1-r{ranks}.{k}.json") as f:
                run = json.load(f)
            runs.append((run["samples_per_s"], run["time_to_first_batch_s"], run.get("startup_s")))
        return runs

    def startup_median(runs):
        # Each start-up phase's median over the runs (strider-bench's startup_s: the slowest rank's).
        phases = [run[2] for run in runs if run[2]]
        return {phase: statistics.median(p[phase] for p in phases) for phase in phases[0]} if phases else None

    results = []
    for ranks in ranks_list:
        first, second = figures(a, ranks), figures(b, ranks)
        ratios = [y[0] / x[0] for x, y in zip(first, second)]
        result = {"ranks": int(ranks), "repeats": repeats,
                  f"{a}_samples_per_s": statistics.median(x[0] for x in first),
                  f"{b}_samples_per_s": statistics.median(y[0] for y in second),
                  f"{a}_time_to_first_batch_s": statistics.median(x[1] for x in first),
                  f"{b}_time_to_first_batch_s": statistics.median(y[1] for y in second),
                  "ratio": statistics.median(ratios), "pair_ratios": ratios}
        startup = startup_median(second)
        if startup:
            result[f"{b}_startup_s"] = startup
        results.append(result)
        print(f"w1 at {ranks} rank(s): {a} {result[f'{a}_samples_per_s']:,.0f} samples/s (first batch "
              f"{1e3 * result[f'{a}_time_to_first_batch_s']:.1f} ms), {b} {result[f'{b}_samples_per_s']:,.0f} "
              f"(first batch {1e3 * result[f'{b}_time_to_first_batch_s']:.1f} ms); {b} / {a} {result['ratio']:.3f} "
              f"(median of {repeats} pairs; pairs {', '.join(f'{r:.3f}' for r in ratios)})")
        if startup:
            print(f"  {b}'s start-up (medians): " + ", ".join(f"{phase.replace('_', ' ')} {1e3 * value:.1f} ms"
                                                          for phase, value in startup.items()))
    with open(f"{out}/{name}.json", "w") as f:
        json.dump({"workload": "w1", "a": a, "b": b, "runs": results}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
