#!/usr/bin/python3
"""Reads compare.sh's JSON files in OUT, prints the tables with the ratios (throughput against the peer
and the limits, CPU efficiency against the bare gather, strider's per-batch CPU account), checks the
goals (the pipeline against the peer and the limits, strider from Python, CPU efficiency) and writes
OUT/results.json and OUT/compare.png (matplotlib, when installed)."""

import glob
import json
import os
import statistics
import sys

WORKLOADS = {
    "w1": "1M x 64 f32, shuffled, B=256",
    "w2": "8192 x 64 KiB, shuffled, B=32",
    "w3": "sequences, bucketed 16k tokens",
    "w4": "class-balanced, imbalance 100",
}


def load(path):
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def gather_at(limit, key, ranks):
    """The gather limit for `ranks` ranks (that many gathers at once), or {}."""
    return ((limit.get(key) or {}).get(str(ranks))) or {}


def paired_ratios(out, tag, numerator, num_key, denominator, den_key):
    """Each repeat's own ratio, runs/NUMERATOR-TAG.K.json's num_key over runs/DENOMINATOR-TAG.K.json's
    den_key (compare.sh runs the two of a repeat back to back), for every K that has both; sorted."""
    ratios = []
    for path in glob.glob(os.path.join(out, "runs", f"{numerator}-{tag}.*.json")):
        k = path.rsplit(".", 2)[-2]
        num, den = load(path), load(os.path.join(out, "runs", f"{denominator}-{tag}.{k}.json"))
        if num and den and num.get(num_key) and den.get(den_key):
            ratios.append(num[num_key] / den[den_key])
    return sorted(ratios)


def set_paired(row, key, ratios):
    """row[key] = the median of the repeats' ratios and row[key + '_pairs'] = them, where there are any."""
    if ratios:
        row[key] = statistics.median(ratios)
        row[key + "_pairs"] = ratios


def pairs_text(row, key, goal=None):
    """' (median of N pairs, a-b)' for a ratio set by set_paired, else ''; with `goal` (the ratio the
    goal needs), it also says when the pairs fall on both sides of it: the verdict is then the
    median's, not the machine's settled answer."""
    ratios = row.get(key + "_pairs")
    if not ratios or len(ratios) < 2:
        return ""
    split = goal is not None and ratios[0] < goal <= ratios[-1]
    return (f" (median of {len(ratios)} pairs, {100 * ratios[0]:.0f}%-{100 * ratios[-1]:.0f}%"
            + ("; the pairs fall on both sides of the goal" if split else "") + ")")


def repeat_rates(out, kind):
    """{TAG: the samples/s of every repeat runs/KIND-TAG.K.json}."""
    rates = {}
    for path in glob.glob(os.path.join(out, "runs", f"{kind}-*.json")):
        run = load(path)
        if run:
            rates.setdefault(os.path.basename(path)[len(kind) + 1:].rsplit(".", 2)[0], []).append(run["samples_per_s"])
    return rates


def main(out):
    strider = {os.path.basename(p)[8:-5]: load(p) for p in glob.glob(os.path.join(out, "strider-*.json"))}
    peers = {os.path.basename(p)[5:-5]: load(p) for p in glob.glob(os.path.join(out, "peer-*.json"))}
    limits = {os.path.basename(p)[6:-5]: load(p) for p in glob.glob(os.path.join(out, "limit-*.json"))}
    pythons = {os.path.basename(p)[7:-5]: load(p) for p in glob.glob(os.path.join(out, "python-*.json"))}
    machine = open(os.path.join(out, "machine.txt")).read().strip() if os.path.exists(os.path.join(out, "machine.txt")) else ""
    rows, goals = [], []
    repeats = repeat_rates(out, "strider")  # tag -> samples/s of every repeated run (compare.sh keeps the median)
    python_repeats = repeat_rates(out, "python")
    one_core_repeats = repeat_rates(out, "onecore")  # compare.sh's WITH_ONE_CORE runs
    ranks_seen = sorted({int(k.split("-r")[-1]) for k in strider if k[:2] in WORKLOADS and k.count("-") == 1})

    print(machine)
    head = (f"{'workload':32s} {'R':>2s} {'strider/s':>11s} {'GB/s':>6s} {'peer row/s':>11s} {'peer batch/s':>12s} "
            f"{'x peer':>7s} {'seq GB/s':>8s} {'/seq':>5s} {'gather/s':>10s} {'rank/gath':>9s} {'1st(s)':>6s} {'RSS MiB':>7s}")
    print(head)
    print("-" * len(head))
    for workload, title in WORKLOADS.items():
        limit = limits.get(workload) or {}
        sequential = limit.get("sequential_read_bytes_per_s", 0)
        gather = (limit.get("gather") or {}).get("rows_per_s", 0)
        for ranks in ranks_seen:
            tag = f"{workload}-r{ranks}"
            s, p = strider.get(tag), peers.get(tag)
            if not s and not p and not pythons.get(tag):
                continue  # not measured in this run (BENCH_ONLY)
            row = dict(workload=workload, title=title, ranks=ranks, sequential_read_bytes_per_s=sequential,
                       gather_rows_per_s_one_core=gather)
            if s:
                per_rank = [r["samples_per_s"] for r in s["ranks"]]
                row.update(strider_samples_per_s=s["samples_per_s"], strider_bytes_per_s=s["bytes_per_s"],
                           strider_stall_fraction=s["stall_fraction"], strider_time_to_first_batch_s=s["time_to_first_batch_s"],
                           strider_peak_rss_bytes=s["peak_rss_bytes"], strider_read_amplification=s["read_amplification"],
                           strider_min_rank_samples_per_s=min(per_rank))
                if tag in repeats:
                    row["strider_runs_samples_per_s"] = sorted(repeats[tag])
            if p:
                best = p.get("best", {})
                for variant in ("per-row", "batched"):
                    if variant in best:
                        key = variant.replace("-", "_")
                        row[f"peer_{key}_samples_per_s"] = best[variant]["samples_per_s"]
                        row[f"peer_{key}_bytes_per_s"] = best[variant]["bytes_per_s"]
                        row[f"peer_{key}_num_workers"] = best[variant]["num_workers"]
                row["peer_best_samples_per_s"] = p["samples_per_s"]
                if "note" in p:
                    row["peer_note"] = p["note"]
            if s and p and p["samples_per_s"] > 0:
                row["strider_over_peer"] = s["samples_per_s"] / p["samples_per_s"]
            py = pythons.get(tag)
            if py:
                row.update(python_samples_per_s=py["samples_per_s"], python_bytes_per_s=py["bytes_per_s"],
                           python_stall_fraction=py["stall_fraction"], python_us_per_batch=py["python_us_per_batch"],
                           python_runs_samples_per_s=sorted(python_repeats.get(tag, [])))
                if p and p["samples_per_s"] > 0:
                    row["python_over_peer"] = py["samples_per_s"] / p["samples_per_s"]
                if s and s["samples_per_s"] > 0:
                    row["python_over_strider"] = py["samples_per_s"] / s["samples_per_s"]
                set_paired(row, "python_over_strider", paired_ratios(out, tag, "python", "samples_per_s", "strider", "samples_per_s"))
            if s and sequential > 0:
                row["strider_over_sequential_read"] = s["bytes_per_s"] / sequential
            if s and gather > 0:
                row["strider_rank_over_gather"] = row["strider_min_rank_samples_per_s"] / gather
            together = gather_at(limit, "gather_by_ranks", ranks)
            with_labels = gather_at(limit, "gather_with_labels_by_ranks", ranks)
            if together:
                row["gather_rows_per_s_ranks"] = together["rows_per_s"]
                row["gather_rows_per_cpu_s"] = together["rows_per_cpu_s"]
            if with_labels:
                row["gather_with_labels_rows_per_s_ranks"] = with_labels["rows_per_s"]
                row["gather_with_labels_rows_per_cpu_s"] = with_labels["rows_per_cpu_s"]
            if s and s.get("samples_per_cpu_s"):
                row["strider_samples_per_cpu_s"] = s["samples_per_cpu_s"]
                if together:
                    row["strider_cpu_over_gather"] = s["samples_per_cpu_s"] / together["rows_per_cpu_s"]
                if with_labels:
                    row["strider_cpu_over_gather_with_labels"] = s["samples_per_cpu_s"] / with_labels["rows_per_cpu_s"]
            if s and together:
                row["strider_over_gather_ranks"] = s["samples_per_s"] / together["rows_per_s"]
            # Where the gathers ran beside every repeat (compare.sh's PAIRED), each ratio is the median
            # of the repeats' own: strider's run over the gathers run just before it.
            set_paired(row, "strider_over_gather_ranks", paired_ratios(out, tag, "strider", "samples_per_s", "gather", "rows_per_s"))
            set_paired(row, "strider_cpu_over_gather",
                       paired_ratios(out, tag, "strider", "samples_per_cpu_s", "gather", "rows_per_cpu_s"))
            set_paired(row, "strider_cpu_over_gather_with_labels",
                       paired_ratios(out, tag, "strider", "samples_per_cpu_s", "gather-labels", "rows_per_cpu_s"))
            rows.append(row)

            def cell(key, fmt, width, scale=1.0):
                return f"{row[key] * scale:{width}{fmt}}" if key in row else f"{'-':>{width}s}"

            peer_row = cell("peer_per_row_samples_per_s", ".0f", 8)
            if "peer_per_row_num_workers" in row:
                peer_row += f"/w{row['peer_per_row_num_workers']}"
            else:
                peer_row = f"{'-':>11s}"
            peer_batch = cell("peer_batched_samples_per_s", ".0f", 9)
            if "peer_batched_num_workers" in row:
                peer_batch += f"/w{row['peer_batched_num_workers']}"
            else:
                peer_batch = f"{'-':>12s}"
            print(f"{workload + ' ' + title:32s} {ranks:2d} {cell('strider_samples_per_s', '.0f', 11)} "
                  f"{cell('strider_bytes_per_s', '.2f', 6, 1e-9)} {peer_row:>11s} {peer_batch:>12s} "
                  f"{cell('strider_over_peer', '.1f', 7)} {sequential / 1e9:8.2f} {cell('strider_over_sequential_read', '.2f', 5)} "
                  f"{gather:10.0f} {cell('strider_rank_over_gather', '.2f', 9)} "
                  f"{cell('strider_time_to_first_batch_s', '.3f', 6)} {cell('strider_peak_rss_bytes', '.0f', 7, 1 / 1048576)}")
    print("x peer: strider samples/s / the best peer configuration; /seq: strider useful GB/s / sequential read of the "
          "same bytes from the page cache (one dd); rank/gath: the slowest rank's samples/s / one core's memory-gather "
          "limit. Peer: best of num_workers " + "0,1,2; 'wN' is the best's num_workers. strider: the median of its runs:")
    for row in rows:
        if "strider_runs_samples_per_s" in row:
            print(f"  {row['workload']} at {row['ranks']} rank(s): runs " +
                  " ".join(f"{v:.0f}" for v in row["strider_runs_samples_per_s"]) + " samples/s")
    for tag in sorted(peers):
        if peers[tag] and "note" in peers[tag] and tag.endswith("-r1"):
            print(f"note {tag[:2]}: {peers[tag]['note']}")
    python_rows = [row for row in rows if "python_samples_per_s" in row]
    if python_rows:
        print("\nstrider from Python (strider.Loader, each batch wrapped with torch.from_numpy; python_loop.py), "
              "median of its runs:")
        for row in python_rows:
            print(f"  {row['workload']} at {row['ranks']} rank(s): {row['python_samples_per_s']:11.0f} samples/s = "
                  + (f"{row['python_over_peer']:.1f}x the peer, " if "python_over_peer" in row else "")
                  + (f"{100 * row['python_over_strider']:.0f}%{pairs_text(row, 'python_over_strider')} of "
                     "strider-bench's C++ loop, " if "python_over_strider" in row else "")
                  + f"{row['python_us_per_batch']:.1f} us per batch outside the wait, stall "
                  + f"{100 * row['python_stall_fraction']:.1f}%; runs "
                  + " ".join(f"{v:.0f}" for v in row["python_runs_samples_per_s"]))

    print("\nthroughput against R gathers at once, and CPU efficiency (samples per CPU-second, user + system of "
          "every process and thread) against the bare gather's:")
    head = (f"{'workload':8s} {'R':>2s} {'strider/s':>11s} {'R gathers/s':>12s} {'/gathers':>8s} "
            f"{'strider/CPU-s':>13s} {'gather/CPU-s':>12s} {'ratio':>6s} {'+labels/CPU-s':>13s} {'ratio':>6s}")
    print(head)
    print("-" * len(head))
    for row in rows:
        def c(key, fmt, width, scale=1.0):
            return f"{row[key] * scale:{width}{fmt}}" if key in row else f"{'-':>{width}s}"
        print(f"{row['workload']:8s} {row['ranks']:2d} {c('strider_samples_per_s', '.0f', 11)} "
              f"{c('gather_rows_per_s_ranks', '.0f', 12)} {c('strider_over_gather_ranks', '.2f', 8)} "
              f"{c('strider_samples_per_cpu_s', '.0f', 13)} {c('gather_rows_per_cpu_s', '.0f', 12)} "
              f"{c('strider_cpu_over_gather', '.2f', 6)} {c('gather_with_labels_rows_per_cpu_s', '.0f', 13)} "
              f"{c('strider_cpu_over_gather_with_labels', '.2f', 6)}")
    print("R gathers/s: R gather_limit processes at once (the limit for R ranks); +labels: the gather copying each "
          "row's label too, as strider does.")
    paired = sorted(name for name, limit in limits.items() if limit and limit.get("paired"))
    if paired:
        print(f"limits of {', '.join(paired)}: the gathers run just before each strider run (paired in time); the "
              "columns show the run kept as the median and its pair, each ratio is the median of every pair's own:")
        for row in rows:
            for key, name in (("strider_over_gather_ranks", "/gathers"), ("strider_cpu_over_gather", "CPU ratio"),
                              ("strider_cpu_over_gather_with_labels", "CPU ratio +labels")):
                if row.get(key + "_pairs"):
                    print(f"  {row['workload']} at {row['ranks']} rank(s), {name}: pairs "
                          + " ".join(f"{v:.2f}" for v in row[key + "_pairs"]))

    accounts = {}
    for tag in ("w1-r1", "w1-r2"):
        s = strider.get(tag)
        if s and all("account_us_per_batch" in r for r in s["ranks"]):
            accounts[tag] = {str(r["rank"]): r["account_us_per_batch"] for r in s["ranks"]}
    if accounts:
        print("\nstrider's CPU account on w1, per batch of 256 (us; counts per batch), and the bare gather's CPU per batch:")
        columns = [(tag, rank) for tag in accounts for rank in accounts[tag]]
        print(f"  {'':40s}" + "".join(f"{tag + ' rank ' + rank:>16s}" for tag, rank in columns))
        for key in next(iter(next(iter(accounts.values())).values())):
            print(f"  {key:40s}" + "".join(f"{accounts[tag][rank][key]:16.2f}" for tag, rank in columns))
        for tag in accounts:
            row = next((r for r in rows if f"{r['workload']}-r{r['ranks']}" == tag), {})
            if row.get("gather_rows_per_cpu_s"):
                print(f"  bare gather CPU per batch ({tag}): {256e6 / row['gather_rows_per_cpu_s']:.2f} us"
                      + (f", with labels {256e6 / row['gather_with_labels_rows_per_cpu_s']:.2f} us"
                         if row.get("gather_with_labels_rows_per_cpu_s") else ""))

    extras = []
    print("\nstall fraction with an emulated step (w1; busy wait or sleep per batch), warm vs cold page cache (w1):")
    for tag in sorted(strider):
        if tag.startswith(("w1-compute", "w1-cold")):
            s = strider[tag]
            if not s:
                continue
            read_us = max(1e6 * r["io_seconds"] / max(1, -(-r["samples"] // s["batch_size"])) for r in s["ranks"])
            extras.append(dict(tag=tag, world=s["world"], compute_us=s["compute_us"], cold=s["cold"], read_us_per_batch=read_us,
                               samples_per_s=s["samples_per_s"], bytes_per_s=s["bytes_per_s"], stall_fraction=s["stall_fraction"],
                               time_to_first_batch_s=s["time_to_first_batch_s"]))
            extras[-1]["thread_layouts"] = [r.get("thread_layout", "-") for r in s["ranks"]]
            print(f"  {tag:32s} ranks {s['world']} compute {s['compute_us']:7.1f} us: {s['samples_per_s']:11.0f} samples/s, "
                  f"{s['bytes_per_s'] / 1e9:6.3f} GB/s, read {read_us:6.1f} us/batch, stall {100 * s['stall_fraction']:5.1f}%, "
                  f"first batch {s['time_to_first_batch_s']:.3f} s, per rank stall "
                  + ", ".join(f"{100 * r['stall_fraction']:.1f}%" for r in s["ranks"])
                  + ", layout " + "/".join(extras[-1]["thread_layouts"]))
    print("\npeak RSS against N (1 rank, pread engine, 200 steps of 256):")
    rss = {}
    for tag in sorted(strider):
        if tag.startswith("rss-") and strider[tag]:
            rss[tag[4:]] = strider[tag]["peak_rss_bytes"]
            print(f"  {tag[4:]:36s} {strider[tag]['peak_rss_bytes'] / 1048576:7.1f} MiB")

    samplers = []
    micro = load(os.path.join(out, "sampler-bench.json"))
    if micro:
        print("\nsamplers alone (1M samples, 4 ranks, batches of 256; one core; bench/sampler_bench.cpp):")
        for b in micro.get("benchmarks", []):
            rate = next((b[k] for k in ("indices_per_s", "samples_per_s") if k in b), None)
            unit = "indices/s" if "indices_per_s" in b else "samples/s"
            samplers.append(dict(name=b["name"], real_time=b["real_time"], time_unit=b["time_unit"], rate=rate, unit=unit))
            print(f"  {b['name']:28s} {b['real_time']:12.1f} {b['time_unit']:2s}" + (f"  {rate / 1e6:12.1f} M {unit}" if rate else ""))

    # ---- goals: the pipeline ----
    def goal(name, met, detail):
        goals.append(dict(goal=name, met=met, detail=detail))

    for row in rows:
        if row["workload"] == "w1" and "python_over_peer" in row:
            goal(f"w1 at {row['ranks']} rank(s), from Python: >= 50x the peer", row["python_over_peer"] >= 50,
                 f"{row['python_over_peer']:.1f}x")
        if row["workload"] == "w1" and "python_over_strider" in row:
            goal(f"w1 at {row['ranks']} rank(s), from Python: >= 80% of strider-bench's C++ figure",
                 row["python_over_strider"] >= 0.8,
                 f"{100 * row['python_over_strider']:.0f}%{pairs_text(row, 'python_over_strider', 0.8)}")
        if row["workload"] == "w1" and "strider_over_peer" in row:
            goal(f"w1 at {row['ranks']} rank(s): >= 50x the peer", row["strider_over_peer"] >= 50, f"{row['strider_over_peer']:.1f}x")
        if row["workload"] in ("w1", "w3", "w4") and "strider_rank_over_gather" in row:
            goal(f"{row['workload']} at {row['ranks']} rank(s): >= 40% of the gather limit per rank",
                 row["strider_rank_over_gather"] >= 0.4, f"{100 * row['strider_rank_over_gather']:.0f}%")
        if row["workload"] == "w2" and "strider_over_sequential_read" in row:
            goal(f"w2 at {row['ranks']} rank(s): >= half the sequential-read limit", row["strider_over_sequential_read"] >= 0.5,
                 f"{100 * row['strider_over_sequential_read']:.0f}%")
    by_ranks = {(row["workload"], row["ranks"]): row for row in rows}
    for workload in ("w3", "w4"):  # scaling: 2 ranks against 1
        one, two = by_ranks.get((workload, 1), {}), by_ranks.get((workload, 2), {})
        if one.get("strider_samples_per_s") and two.get("strider_samples_per_s"):
            medians = two["strider_samples_per_s"] / one["strider_samples_per_s"]
            two["strider_over_one_rank"] = medians
            tag = f"{workload}-r2"
            # The goal's ratio: each 2-rank repeat against 1 rank run just after it with the same
            # options (compare.sh's WITH_ONE_RANK), the median of the repeats' own ratios, as every
            # ratio of runs here is; the two series' medians, measured minutes apart, where those
            # runs are missing.
            set_paired(two, "strider_over_one_rank_paired",
                       paired_ratios(out, tag, "strider", "samples_per_s", "onerank", "samples_per_s"))
            scaling = two.get("strider_over_one_rank_paired", medians)
            paired = ""
            if "strider_over_one_rank_paired" in two:
                paired = (f" against 1 rank run just after each 2-rank repeat"
                          f"{pairs_text(two, 'strider_over_one_rank_paired', 1.6)}; {medians:.2f}x the"
                          " 1-rank series' median")
            # Beside it, 1 rank held to one core, run just after each 2-rank repeat (compare.sh's
            # WITH_ONE_CORE): the same cores per rank; the median of the repeats' own ratios.
            set_paired(two, "strider_over_one_rank_one_core",
                       paired_ratios(out, tag, "strider", "samples_per_s", "onecore", "samples_per_s"))
            one_core_runs = one_core_repeats.get(tag, [])
            per_core = ""
            if "strider_over_one_rank_one_core" in two and one_core_runs:
                two["strider_one_rank_one_core_samples_per_s"] = statistics.median(one_core_runs)
                per_core = (f" ({two['strider_over_one_rank_one_core']:.2f}x 1 rank held to one core"
                            f"{pairs_text(two, 'strider_over_one_rank_one_core')}, "
                            f"{two['strider_one_rank_one_core_samples_per_s']:.0f} samples/s)")
            # What 2 fully busy cores would give at the CPU the 2-rank run spent per sample (its copies,
            # its ranks' shares of the plans, its waits), over the 1-rank figure, and how busy the
            # run kept them: the scaling is that figure times that share. At 1 rank the plan of the
            # next epoch has the second core to itself; at 2 ranks it takes the ranks' own.
            ceiling = ""
            if two.get("strider_samples_per_cpu_s"):
                cores = min(2, len(os.sched_getaffinity(0)))  # the cores compare.sh and its runs may use
                two["strider_cpu_ceiling_over_one_rank"] = (cores * two["strider_samples_per_cpu_s"] /
                                                            one["strider_samples_per_s"])
                busy = medians / two["strider_cpu_ceiling_over_one_rank"]  # the 2-rank run's own share
                # The same at the CPU the 1-rank run spent per sample (its reads and all its plans):
                # what 2 ranks would give that split its work with no cost of their own. The two
                # figures' ratio is what running as 2 ranks adds per sample.
                at_one = ""
                if one.get("strider_samples_per_cpu_s"):
                    two["strider_one_rank_cpu_bound_over_one_rank"] = (cores * one["strider_samples_per_cpu_s"] /
                                                                       one["strider_samples_per_s"])
                    at_one = (f" ({two['strider_one_rank_cpu_bound_over_one_rank']:.2f}x at the 1-rank run's CPU "
                              "per sample)")
                ceiling = (f"; at the CPU the 2-rank run spent per sample, {cores} fully busy cores would give "
                           f"{two['strider_cpu_ceiling_over_one_rank']:.2f}x{at_one}, and the run kept them "
                           f"{100 * busy:.0f}% busy")
            goal(f"{workload} at 2 ranks: >= 1.6x its 1-rank samples/s", scaling >= 1.6,
                 f"{scaling:.2f}x{paired}{per_core}{ceiling}")
    for row in rows:  # CPU efficiency, and w1 at 2 ranks against the two-process gather and the peer
        if row["workload"] != "w1":
            continue
        if "strider_cpu_over_gather" in row:
            goal(f"w1 at {row['ranks']} rank(s): samples per CPU-second >= 80% of the bare gather's",
                 row["strider_cpu_over_gather"] >= 0.8,
                 f"{100 * row['strider_cpu_over_gather']:.0f}%{pairs_text(row, 'strider_cpu_over_gather', 0.8)} "
                 f"({100 * row.get('strider_cpu_over_gather_with_labels', 0):.0f}% "
                 "of the gather that copies the labels too)")
        if row["ranks"] == 2 and "strider_over_gather_ranks" in row:
            goal("w1 at 2 ranks: >= 70% of the two-process gather limit", row["strider_over_gather_ranks"] >= 0.7,
                 f"{100 * row['strider_over_gather_ranks']:.0f}%{pairs_text(row, 'strider_over_gather_ranks', 0.7)}")
        if row["ranks"] == 2 and "strider_over_peer" in row:
            goal("w1 at 2 ranks: >= 100x the peer", row["strider_over_peer"] >= 100, f"{row['strider_over_peer']:.1f}x")
    for extra in extras:  # the goal: stall < 5% where the step is at least the time to read a batch
        if extra["tag"].startswith("w1-compute") and "-layout" in extra["tag"]:
            continue  # forced layouts: shown for comparison, not a goal
        if extra["tag"].startswith("w1-compute"):
            below = extra["compute_us"] < extra["read_us_per_batch"]
            goal(f"stall < 5% ({extra['tag']}, {extra['world']} rank(s), compute {extra['compute_us']:.0f} us, read "
                 f"{extra['read_us_per_batch']:.0f} us/batch in this run{': compute < read here' if below else ''})",
                 extra["stall_fraction"] < 0.05, f"{100 * extra['stall_fraction']:.1f}%")
    for suffix in ("-nolabels", ""):
        small = rss.get(f"streaming-small{suffix}")
        large_name = "big" if rss.get(f"streaming-big{suffix}") else "w1"
        large = rss.get(f"streaming-{large_name}{suffix}")
        if small and large:
            growth = (large - small) / 1048576
            goal(f"streaming RSS flat in N (100k -> {'10M' if large_name == 'big' else '1M'}"
                 f"{', no labels' if suffix else ', labels read per batch'})",
                 growth < 1.0, f"{small / 1048576:.1f} -> {large / 1048576:.1f} MiB (+{growth:.1f} MiB)")
    print("\ngoals (the pipeline; strider from Python; CPU and the two-process gather):")
    for g in goals:
        print(f"  [{'met' if g['met'] else 'MISSED'}] {g['goal']}: {g['detail']}")

    with open(os.path.join(out, "results.json"), "w") as file:
        json.dump(dict(machine=machine, table=rows, extras=extras, peak_rss_bytes=rss, goals=goals, samplers=samplers,
                       accounts=accounts, strider=strider, peers=peers, limits=limits, python=pythons), file, indent=1)
    plot(out, rows)


def plot(out, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot; bench/scripts/setup-bench.sh installs it)")
        return
    labels = [f"{r['workload']}\n{r['ranks']} rank{'s' if r['ranks'] > 1 else ''}" for r in rows]
    series = [("strider", "strider_samples_per_s"), ("strider from Python", "python_samples_per_s"),
              ("peer, per row", "peer_per_row_samples_per_s"), ("peer, batched", "peer_batched_samples_per_s"),
              ("gather limit, R at once", "gather_rows_per_s_ranks")]
    width = 0.16
    figure, axes = plt.subplots(figsize=(11, 5))
    for k, (name, key) in enumerate(series):
        values = [r.get(key, 0) or 0 for r in rows]
        axes.bar([i + (k - 2) * width for i in range(len(rows))], values, width, label=name)
    axes.set_yscale("log")
    axes.set_xticks(range(len(rows)))
    axes.set_xticklabels(labels)
    axes.set_ylabel("samples/s (log)")
    axes.set_title("strider vs PyTorch DataLoader + h5py vs the memory-gather limit (page cache)")
    axes.set_ylim(top=axes.get_ylim()[1] * 8)
    axes.legend(loc="upper center", ncol=5, fontsize="small")
    figure.tight_layout()
    figure.savefig(os.path.join(out, "compare.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
