#!/usr/bin/python3
"""Reads storage.sh's files in OUT and writes OUT/storage.json (every figure and the goals),
OUT/storage.md (the table) and OUT/storage.png (AU against the accelerator count, strider and the
peer; matplotlib, when installed), and prints the table. Standard library only, but for the plot."""

import glob
import json
import math
import os
import sys

from summarize import load  # compare.sh's reader: a JSON file, or None


def figures(run):
    """The figures of one run's JSON that the summary uses."""
    return dict(accelerators=run["world"], au=run["au"], au_min=run["au_min"], passed=bool(run["passed"]),
                samples_per_s=run["steady_samples_per_s"], bytes_per_s=run["steady_bytes_per_s"])


def runs(out, who, workload):
    """Every run of `who` (strider or peer) on `workload`, by accelerator count."""
    found = [figures(run) for run in map(load, glob.glob(os.path.join(out, f"{who}-{workload}-*.json"))) if run]
    return sorted(found, key=lambda run: run["accelerators"])


def step_overshoot_s(run):
    """Seconds per step that a run's emulated compute took beyond its nominal step (a sleep's wake-up
    latency: a share of millisecond steps on a busy machine), the mean over ranks, at least 0: the
    step's measured compute is the AU times the step's period in the AU window."""
    extra = [rank["au"] * run["batch_size"] / rank["steady_samples_per_s"] - run["compute_us"] / 1e6
             for rank in run["ranks"] if rank["steady_samples_per_s"] > 0]
    return max(0.0, sum(extra) / len(extra)) if extra else 0.0


def refinement(out, workload):
    """storage.sh's refinement runs of `workload` (refine-W-N-I.json), in the order they ran, each with
    its slowdown, step and demand (the bytes per second its ranks ask for at full utilization: with
    the nominal step, and with the step as measured, its overshoot added)."""
    found = []
    for path in glob.glob(os.path.join(out, f"refine-{workload}-*-*.json")):
        run = load(path)
        if run is None:
            continue
        step_s, batch_bytes = run["compute_us"] / 1e6, run["world"] * run["batch_size"] * run["sample_bytes"]
        found.append(dict(figures(run), attempt=int(path.rsplit("-", 1)[1].split(".")[0]),
                          slowdown=run["accelerator_slowdown"], step_s=step_s, demand_bytes_per_s=batch_bytes / step_s,
                          measured_demand_bytes_per_s=batch_bytes / (step_s + step_overshoot_s(run))))
    return sorted(found, key=lambda run: run["attempt"])


def largest_held(series):
    """The largest count that held the threshold (the search stops at the first failure), or None."""
    held = [run for run in series if run["passed"]]
    return held[-1] if held else None


def main(out, quick):
    machine = open(os.path.join(out, "machine.txt")).read().strip() if os.path.exists(os.path.join(out, "machine.txt")) else ""
    fio = []
    if os.path.exists(os.path.join(out, "fio.jsonl")):
        fio = [json.loads(line) for line in open(os.path.join(out, "fio.jsonl")) if line.strip()]
    results = dict(machine=machine.splitlines(), workloads=[], goals=[],
                   note=("MLPerf-Storage-style (DLIO's workloads and AU), not MLPerf results: one HDF5 file of "
                         "fixed-size samples, not a file per sample of varying sizes; strider reads with O_DIRECT "
                         "instead of a dataset 5x the memory; a virtual disk's host may cache what it reads"))
    rows = []
    setups = sorted((load(path) for path in glob.glob(os.path.join(out, "setup-*.json"))), key=lambda s: s["order"])
    for setup in setups:
        workload = setup["workload"]
        strider, peer = runs(out, "strider", workload), runs(out, "peer", workload)
        local = runs(out, "local", workload)  # strider-bench --shuffle local: DLIO's read order
        limits = {entry["jobs"]: entry for entry in fio if entry["workload"] == workload}
        best, peer_best = largest_held(strider), largest_held(peer)
        copy_threads = setup["copy_threads"]
        # What one accelerator asks for at full utilization, and how many fio's best random-read rate
        # could feed at the threshold.
        demand = setup["batch_size"] * setup["sample_bytes"] / setup["step_s"]
        best_limit = max((e["random_bytes_per_s"] for e in limits.values()), default=0)
        feedable = math.floor(best_limit / (setup["au_threshold"] * demand)) if demand > 0 else 0
        for run in strider:
            limit = limits.get(run["accelerators"] * copy_threads, {}).get("random_bytes_per_s", 0)
            run["fraction_of_fio"] = run["bytes_per_s"] / limit if limit else None
        fractions = [run for run in strider if run["fraction_of_fio"] is not None]
        entry = dict(setup, demand_bytes_per_s=demand, fio=sorted(limits.values(), key=lambda e: e["jobs"]),
                     strider=strider, strider_local=local, peer=peer, feedable_by_fio=feedable,
                     strider_best_fraction=max(fractions, key=lambda r: r["fraction_of_fio"]) if fractions else None)
        if best:
            limit = limits.get(best["accelerators"] * copy_threads, {}).get("random_bytes_per_s", 0)
            entry["strider_largest"] = dict(best, h100_equivalents=best["accelerators"] / setup["slowdown"],
                                            fio_random_bytes_per_s=limit,
                                            fraction_of_fio=best["bytes_per_s"] / limit if limit else None)
        if peer_best:
            entry["peer_largest"] = dict(peer_best, h100_equivalents=peer_best["accelerators"] / setup["slowdown"])
        # The refined step: at the grid's largest count, the held refinement run with the largest
        # demand, or the grid's own run where none held (or refinement was off).
        attempts = refinement(out, workload)
        entry["strider_refined"] = None
        if best:
            largest = entry["strider_largest"]
            held = [run for run in attempts if run["passed"] and run["accelerators"] == best["accelerators"]]
            chosen = (dict(max(held, key=lambda run: run["demand_bytes_per_s"])) if held else
                      dict(best, slowdown=setup["slowdown"], step_s=setup["step_s"],
                           demand_bytes_per_s=best["accelerators"] * demand))
            chosen.pop("attempt", None)
            limit = largest["fio_random_bytes_per_s"]
            entry["strider_refined"] = dict(chosen, source="refinement" if held else "grid",
                                            h100_equivalents=chosen["accelerators"] / chosen["slowdown"],
                                            fio_random_bytes_per_s=limit,
                                            fraction_of_fio=chosen["bytes_per_s"] / limit if limit else None,
                                            attempts=attempts)
        results["workloads"].append(entry)

        refined = entry["strider_refined"]
        strider_count = best["accelerators"] if best else 0
        peer_count = peer_best["accelerators"] if peer_best else 0
        fraction = refined["fraction_of_fio"] if refined else None
        if fraction is not None:
            results["goals"].append(dict(workload=workload,
                                         goal="at the largest count that holds (refined step), >= 90% of fio's bandwidth",
                                         value=fraction, grid_value=entry["strider_largest"]["fraction_of_fio"],
                                         met=fraction >= 0.9))
        if peer:
            # In H100 equivalents: strider's at the refined step, the peer's at the grid's step.
            strider_h100 = refined["h100_equivalents"] if refined else 0
            peer_h100 = peer_count / setup["slowdown"]
            four_times = strider_h100 > 0 and strider_h100 >= 4 * peer_h100
            feeds_all = fraction is not None and fraction >= 0.9
            clause = {(True, True): "both", (True, False): "4x the peer", (False, True): "all the storage can feed",
                      (False, False): "neither"}[(four_times, feeds_all)]
            # The grid's judgement: accelerators against the peer's, "all" as many as fio's rate feeds.
            grid_feeds_all = strider_count > 0 and strider_count >= feedable
            results["goals"].append(dict(workload=workload,
                                         goal="holds the threshold with >= 4x the peer's H100 equivalents (or all the storage can feed)",
                                         value=dict(strider_h100_equivalents=strider_h100, peer_h100_equivalents=peer_h100,
                                                    fraction_of_fio=fraction),
                                         clause=clause, met=four_times or feeds_all,
                                         grid_value=[strider_count, peer_count, feedable],
                                         grid_met=strider_count >= 4 * peer_count or grid_feeds_all))
        rows.append((workload, setup, best, peer_best, entry, peer))
    if quick:
        results["goals"] = []
        results["quick"] = True

    lines = [f"| workload | step (x slowdown) | fio random GB/s (jobs) | strider: accelerators (H100s) | AU | samples/s | "
             f"GB/s | of fio | best of fio (accelerators) | refined step (x slowdown) | refined H100s | refined AU | "
             f"refined samples/s | refined GB/s | refined of fio | peer: accelerators (H100s) | peer AU | "
             f"strider refined / peer H100s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for workload, setup, best, peer_best, entry, peer in rows:
        largest, refined = entry.get("strider_largest"), entry["strider_refined"]
        fio_text = "-"
        if largest:
            fio_text = f"{largest['fio_random_bytes_per_s'] / 1e9:.2f} ({largest['accelerators'] * setup['copy_threads']})"
        strider_text = f"{best['accelerators']} ({best['accelerators'] / setup['slowdown']:.2f})" if best else "none"
        if peer:
            peer_text = f"{peer_best['accelerators']} ({peer_best['accelerators'] / setup['slowdown']:.2f})" if peer_best else "none"
            peer_au = f"{100 * (peer_best or peer[0])['au']:.1f}%"
            ratio = (f"{refined['h100_equivalents'] / (peer_best['accelerators'] / setup['slowdown']):.1f}x"
                     if refined and peer_best else ("peer holds none" if best else "-"))
        else:
            peer_text, peer_au, ratio = "not run", "-", "-"
        fraction = largest.get("fraction_of_fio") if largest else None
        refined_text = "- | - | - | - | - | - | "
        if refined:
            refined_text = (f"{refined['step_s']:.4g} s (x{refined['slowdown']:.4g}{', the grid' if refined['source'] == 'grid' else ''}) | "
                            f"{refined['h100_equivalents']:.2f} | {100 * refined['au']:.1f}% | {refined['samples_per_s']:.1f} | "
                            f"{refined['bytes_per_s'] / 1e9:.3f} | "
                            + (f"{100 * refined['fraction_of_fio']:.0f}% | " if refined["fraction_of_fio"] is not None else "- | "))
        lines.append(
            f"| {workload} | {setup['step_s']:.4g} s (x{setup['slowdown']}) | {fio_text} | {strider_text} | "
            + (f"{100 * best['au']:.1f}% | {best['samples_per_s']:.1f} | {best['bytes_per_s'] / 1e9:.3f} | "
               if best else "- | - | - | ")
            + (f"{100 * fraction:.0f}% | " if fraction is not None else "- | ")
            + (f"{100 * entry['strider_best_fraction']['fraction_of_fio']:.0f}% "
               f"({entry['strider_best_fraction']['accelerators']}) | " if entry["strider_best_fraction"] else "- | ")
            + refined_text + f"{peer_text} | {peer_au} | {ratio} |")
    lines.append("")
    lines.append("AU at each count (strider with a global shuffle / strider with DLIO's local shuffle / peer):")
    for workload, setup, best, peer_best, entry, peer in rows:
        by_count = {}
        for column, key in enumerate(("strider", "strider_local", "peer")):
            for run in entry[key]:
                by_count.setdefault(run["accelerators"], ["-", "-", "-"])[column] = f"{100 * run['au']:.1f}%"
        lines.append(f"- {workload} (threshold {100 * setup['au_threshold']:.0f}%): " +
                     ", ".join(f"{count}: {' / '.join(cells)}" for count, cells in sorted(by_count.items())))
    lines.append("")
    lines.append("Refinement at the largest count that held (strider; each run's slowdown, the rate its ranks ask for, its AU):")
    for workload, setup, best, peer_best, entry, peer in rows:
        attempts = entry["strider_refined"]["attempts"] if entry["strider_refined"] else []
        if not best:
            text = "none (no count held)"
        elif not attempts:
            text = f"at {best['accelerators']}: no run (off, or the grid's step already asked for fio's rate)"
        else:
            text = f"at {best['accelerators']}: " + ", ".join(
                f"x{run['slowdown']:.4g} ({run['demand_bytes_per_s'] / 1e9:.3f} GB/s asked, "
                f"{run['measured_demand_bytes_per_s'] / 1e9:.3f} with the step as measured): {100 * run['au']:.1f}%"
                for run in attempts)
        lines.append(f"- {workload}: {text}")
    table = "\n".join(lines)
    print(machine)
    print(table)
    if quick:
        print("STORAGE_QUICK=1: no goals (tiny records, the figures are not the workloads')")
    for goal in results["goals"]:
        clause = f"; clause: {goal['clause']}" if "clause" in goal else ""
        print(f"goal, {goal['workload']}: {goal['goal']}: {'met' if goal['met'] else 'MISSED'} ({goal['value']}{clause}; "
              f"grid: {goal['grid_value']})")
    with open(os.path.join(out, "storage.md"), "w") as file:
        file.write(table + "\n")
    with open(os.path.join(out, "storage.json"), "w") as file:
        json.dump(results, file, indent=1)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: python3-matplotlib is not installed (bench/scripts/setup-bench.sh)")
        return 0
    if not rows:
        return 0
    figure, axes = plt.subplots(1, len(rows), figsize=(4.2 * len(rows), 3.6), squeeze=False)
    for axis, (workload, setup, best, peer_best, entry, peer) in zip(axes[0], rows):
        for series, label, marker in ((entry["strider"], "strider (O_DIRECT)", "o"), (entry["peer"], "DataLoader + h5py", "s")):
            if series:
                axis.plot([run["accelerators"] for run in series], [100 * run["au"] for run in series], marker=marker, label=label)
        axis.axhline(100 * setup["au_threshold"], color="grey", linestyle="--", linewidth=1, label="threshold")
        axis.set_xscale("log", base=2)
        counts = sorted({run["accelerators"] for run in entry["strider"] + entry["peer"]})
        axis.set_xticks(counts)
        axis.set_xticklabels([str(count) for count in counts])
        axis.minorticks_off()
        axis.set_title(f"{workload} (step x{setup['slowdown']}: {setup['step_s']:.3g} s)")
        axis.set_xlabel("simulated accelerators (ranks)")
        axis.set_ylabel("AU %")
        axis.set_ylim(0, 105)
        axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    figure.savefig(os.path.join(out, "storage.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--quick" in sys.argv[2:]))
