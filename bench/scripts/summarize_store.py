#!/usr/bin/python3
"""Reads the JSON files bench/scripts/store.sh wrote in DIR, prints the in-memory store's and
--lookahead's figures against their goals, and writes DIR/store.json (and DIR/store_cold.json: the
first epoch with a cold load, through the page cache and through O_DIRECT, with the machine)."""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine  # noqa: E402


def read_json(path):
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def first_epoch_with_load(run):
    """Samples per second of the first epoch, the store's load included."""
    epoch = run["epochs"][0]
    return epoch["samples"] / (run.get("store_load_seconds", 0) + epoch["seconds"])


def later_epochs(run):
    """Samples per second over the epochs after the first."""
    later = run["epochs"][1:]
    return sum(e["samples"] for e in later) / sum(e["seconds"] for e in later) if later else 0


def main(directory):
    runs = {os.path.basename(p)[:-5]: read_json(p) for p in glob.glob(os.path.join(directory, "*.json"))}
    runs.pop("store", None)
    rows, goals = [], []

    def goal(text, value, target, met):
        goals.append({"goal": text, "value": value, "target": target, "met": bool(met)})

    gather = (runs.get("limit-gather") or {}).get("rows_per_s", 0)
    for ranks in (2, 4):
        store, shuffled, chunks = runs.get(f"store-r{ranks}"), runs.get(f"shuffled-r{ranks}"), runs.get(f"limit-chunks-r{ranks}")
        if not (store and shuffled and chunks):
            continue
        first, later = first_epoch_with_load(store), later_epochs(store)
        steps = sum(e["samples"] for e in store["epochs"][1:]) / store["batch_size"]  # rank-steps after epoch 0
        requests = sum(e["remote_requests"] for e in store["epochs"][1:])
        remote = sum(e["bytes_remote"] for e in store["epochs"][1:])
        row = {
            "ranks": ranks,
            "nodes": store["store_nodes"],
            "layout": store["store_layout"],
            "load_seconds": store["store_load_seconds"],
            # Epoch 0 apart from the load, and the mean of the later ones: on a virtual machine with
            # shadow page tables epoch 0 also pays each rank's first access to every page of the
            # node segment (docs/performance.md, In-memory store).
            "epoch0_seconds": store["epochs"][0]["seconds"],
            "later_epoch_seconds": (sum(e["seconds"] for e in store["epochs"][1:]) / (len(store["epochs"]) - 1)
                                    if len(store["epochs"]) > 1 else 0),
            "first_epoch_with_load_samples_per_s": first,
            "in_order_limit_samples_per_s": chunks["rows_per_s"],
            "later_epochs_samples_per_s": later,
            "later_epochs_per_rank_samples_per_s": later / ranks,
            "shuffled_today_samples_per_s": shuffled["samples_per_s"],
            "gather_limit_rows_per_s_one_core": gather,
            "remote_requests_per_rank_step": requests / steps if steps else 0,
            "remote_bytes_per_rank_step": remote / steps if steps else 0,
            "store_bytes_per_node": store["store_bytes_per_node"],
            # What the node holds: every row (replicate) or its share (partition).
            "dataset_bytes_per_node": store["useful_bytes"] / len(store["epochs"]) /
                                      (store["store_nodes"] if store["store_layout"] == "partition" else 1),
            "peak_rss_bytes": store["peak_rss_bytes"],
            # The I/O thread's time per batch, all epochs (the load apart): copies and, with
            # several nodes, one request and reply per owner node.
            "io_seconds_per_batch": sum(r["io_seconds"] for r in store["ranks"]) /
                                    (sum(e["samples"] for e in store["epochs"]) / store["batch_size"]),
            "file_bytes_per_epoch": [e["bytes_read_file"] for e in store["epochs"]],
        }
        rows.append(row)
        goal(f"{ranks} ranks: first epoch with the load >= 80% of the in-order limit",
             first / chunks["rows_per_s"], 0.8, first >= 0.8 * chunks["rows_per_s"])
        goal(f"{ranks} ranks: later epochs >= 1000x today's shuffled", later / shuffled["samples_per_s"], 1000,
             later >= 1000 * shuffled["samples_per_s"])
        if gather:  # per core: the ranks share the machine's cores when they outnumber them
            per_core = later / min(ranks, os.cpu_count() or ranks)
            goal(f"{ranks} ranks: later epochs per core >= 50% of the gather limit per core", per_core / gather, 0.5,
                 per_core >= 0.5 * gather)
        goal(f"{ranks} ranks: node memory <= 1.1 x the rows it holds ({row['layout']}; the ring apart)",
             row["store_bytes_per_node"] / row["dataset_bytes_per_node"], 1.1,
             row["store_bytes_per_node"] <= 1.1 * row["dataset_bytes_per_node"])
        goal(f"{ranks} ranks: no file bytes after the first epoch", sum(row["file_bytes_per_epoch"][1:]), 0,
             sum(row["file_bytes_per_epoch"][1:]) == 0)

    lookahead, shuffled = runs.get("lookahead-r2"), runs.get("shuffled-r2")
    if lookahead and shuffled:
        goal("--lookahead 256: read amplification <= 1/30 of today's",
             lookahead["read_amplification"] / shuffled["read_amplification"], 1 / 30,
             lookahead["read_amplification"] <= shuffled["read_amplification"] / 30)
    cold_runs = {}  # the first epoch with the load against its sequential read, as the page shows them
    for name, store_tag, limit_tag, what in (
            ("page_cache", "cold-store-r2", "limit-cold-sequential-r2", "a cold sequential read"),
            ("odirect", "odirect-store-r2", "limit-odirect-sequential-r2", "an O_DIRECT sequential read")):
        cold, sequential = runs.get(store_tag), runs.get(limit_tag)
        if not (cold and sequential):
            continue
        # The sequential reader reads the file's bytes; in rows: its bytes/s over the row size.
        rows_per_s = sequential["bytes_per_s"] / (cold["useful_bytes"] / cold["samples"])
        first = first_epoch_with_load(cold)
        label = "cold" if name == "page_cache" else "O_DIRECT"
        goal(f"contiguous, {label}: first epoch with the load >= 80% of {what}", first / rows_per_s, 0.8,
             first >= 0.8 * rows_per_s)
        cold_runs[name] = {"load_s": round(cold.get("store_load_seconds", 0), 2),
                           "first_epoch_with_load_million_samples_per_s": round(first / 1e6, 2),
                           "sequential_read_gb_per_s": round(sequential["bytes_per_s"] / 1e9, 2),
                           "of_sequential_read_percent": round(100 * first / rows_per_s)}

    load_path = os.path.join(directory, "load.txt")
    machine_load = open(load_path).read().strip().replace("\n", "; ") if os.path.exists(load_path) else ""
    print(f"in-memory store and lookahead ({machine_load})")
    head = f"{'R':>2s} {'nodes':>5s} {'layout':>9s} {'load s':>7s} {'epoch0 s':>8s} {'later s':>7s} " \
           f"{'epoch1+load/s':>13s} {'in-order/s':>10s} " \
           f"{'later/s':>10s} {'today/s':>8s} {'req/step':>8s} {'B/step':>8s} {'io us/batch':>11s} {'node MiB':>8s}"
    print(head)
    print("-" * len(head))
    for row in rows:
        print(f"{row['ranks']:2d} {row['nodes']:5d} {row['layout']:>9s} {row['load_seconds']:7.2f} "
              f"{row['epoch0_seconds']:8.3f} {row['later_epoch_seconds']:7.3f} "
              f"{row['first_epoch_with_load_samples_per_s']:13,.0f} {row['in_order_limit_samples_per_s']:10,.0f} "
              f"{row['later_epochs_samples_per_s']:10,.0f} {row['shuffled_today_samples_per_s']:8,.0f} "
              f"{row['remote_requests_per_rank_step']:8.2f} {row['remote_bytes_per_rank_step']:8,.0f} "
              f"{1e6 * row['io_seconds_per_batch']:11.1f} "
              f"{row['store_bytes_per_node'] / 2**20:8.1f}")
    if lookahead and shuffled:
        print(f"read amplification: today {shuffled['read_amplification']:.1f}x, --lookahead 256 "
              f"{lookahead['read_amplification']:.2f}x ({lookahead['samples_per_s']:,.0f} samples/s)")
    exchange = sorted((r for n, r in runs.items() if n.startswith("exchange-") and r),
                      key=lambda r: (r["row_bytes"], r["mode"], r["osc"]))
    if exchange:
        print("rows of another node, 4 ranks as 2 x 2, batches of 256 (store_exchange_bench):")
        for r in exchange:
            how = "request/reply" if r["mode"] == "request" else "MPI_Get, " + r["osc"].split(";")[0]
            print(f"  {r['row_bytes']:6d} B rows  {how:28s} {r['us_per_batch']:9.1f} us/batch "
                  f"{r['rows_per_s']:12,.0f} rows/s {r['gb_per_s']:6.2f} GB/s{'' if r['correct'] else '  WRONG BYTES'}")
    cache = runs.get("chunk-cache")
    if cache:
        saved = ", ".join(f"{c['mib']} MiB {1 - c['decompressions_per_epoch'] / cache['decompressions_per_epoch']:.0%}"
                          for c in cache["cache"])
        print(f"--lookahead {cache['lookahead']}, rank 0 of {cache['ranks']}: {cache['decompressions_per_epoch']:,} chunk "
              f"decompressions per epoch ({cache['distinct_chunks']:,} chunks); a chunk cache would save {saved}")
    for g in goals:
        print(f"  {'met ' if g['met'] else 'MISSED'} {g['goal']}: {g['value']:.3g} (target {g['target']:.3g})")
    with open(os.path.join(directory, "store.json"), "w") as file:
        json.dump({"load": machine_load, "rows": rows, "goals": goals, "runs": runs}, file, indent=1)
    if cold_runs:  # bench/results/store_cold.json's form: the figures with the machine
        with open(os.path.join(directory, "store_cold.json"), "w") as file:
            json.dump({"machine": machine(), "ranks": 2, "cold": cold_runs}, file, indent=1)
            file.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
