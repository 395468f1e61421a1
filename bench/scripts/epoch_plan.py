#!/usr/bin/env python3
"""What the torch-exact shuffle's per-epoch plan costs: runs strider-epoch-plan-bench
(bench/epoch-plan/main.cpp) at N = 1e6, 1e8 and 1e9 and writes the figures with the machine they
were measured on.

    bench/scripts/epoch_plan.py [--bin DIR] [--sizes 1e6,1e8,1e9] [--repeats 5] [--out RESULTS]

--bin is the folder holding strider-epoch-plan-bench (default: $STRIDER_BIN, else build/bin).
--out defaults to bench/results/epoch_plan.json; scripts/docs/gen-performance.py makes the
performance page's table from it. Each size N needs 8N bytes of memory (8 GB at 1e9): a size
that does not fit in half of the memory available is left out, and said so.
"""
import argparse
import json
import os
import subprocess
import sys

from machine import machine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def available_bytes():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.environ.get("STRIDER_BIN", os.path.join(ROOT, "build", "bin")))
    parser.add_argument("--sizes", default="1e6,1e8,1e9")
    parser.add_argument("--repeats", default="5")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "epoch_plan.json"))
    args = parser.parse_args()
    program = os.path.join(args.bin, "strider-epoch-plan-bench")
    if not os.access(program, os.X_OK):
        sys.exit(f"epoch_plan: {program} not found; build strider (scripts/test.sh) or pass --bin")
    sizes = []
    for text in args.sizes.split(","):
        try:
            n = int(float(text))
        except ValueError:
            sys.exit(f"epoch_plan: --sizes: '{text}' is not a number")
        if 16 * n > available_bytes():
            print(f"epoch_plan: N = {text} left out: its order needs {8 * n / 1e9:.1f} GB and "
                  f"{available_bytes() / 1e9:.1f} GB are available", file=sys.stderr)
            continue
        sizes.append(str(n))
    if not sizes:
        sys.exit("epoch_plan: no size fits in this machine's memory")
    output = subprocess.run([program, "--sizes", ",".join(sizes), "--repeats", args.repeats],
                            stdout=subprocess.PIPE, text=True)
    if output.returncode != 0:
        sys.exit(f"epoch_plan: strider-epoch-plan-bench failed (exit {output.returncode})")
    results = {"machine": machine(), **json.loads(output.stdout)}
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    for run in results["runs"]:
        print(f"N = {run['n']:>13,}: {run['epoch_ms']:10.1f} ms per epoch, {run['ns_per_sample']:.2f} ns per sample "
              f"(first epoch {run['first_epoch_ms']:.1f} ms)")
    print(f"epoch_plan: wrote {args.out}")


if __name__ == "__main__":
    main()
