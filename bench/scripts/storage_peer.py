#!/usr/bin/python3
"""The PyTorch peer of strider-bench --workload: DataLoader + DistributedSampler + h5py on the same
records file (strider-gen --workload), a sleeping step per batch (an accelerator the host waits on),
and MLPerf Storage's accelerator utilization (AU), computed as strider does (each epoch's first step
left out, epochs averaged, then the mean over ranks; no barrier per step).

The DataLoader reads through the page cache (h5py cannot use O_DIRECT), so the file is dropped from
the page cache at every epoch's start: posix_fadvise(DONTNEED) on the file by every rank (--drop
file, the default), or the whole page cache through /proc/sys/vm/drop_caches by rank 0 (--drop all;
needs root, and empties the page cache of everything else on the machine too).

Started with mpirun (one process per rank); gloo is initialised from the MPI rank and size. Writes
one JSON object with the keys strider-bench uses: au, au_min, au_threshold, passed,
steady_samples_per_s, steady_bytes_per_s (over the ranks' AU windows), samples_per_s, bytes_per_s, ranks.
"""

import argparse
import json
import os
import sys
import time


def epoch_windows(steps):
    """One rank's AU windows from (epoch, requested, compute_start, compute_end, samples, bytes) tuples
    in run order, as strider::epoch_windows: per epoch with two steps or more, (epoch, start, end,
    computing, samples, bytes) from the end of its first step (left out) to its last compute end, with
    the other steps' compute time, samples and bytes."""
    windows = []
    first = 0
    while first < len(steps):
        end = first + 1
        while end < len(steps) and steps[end][0] == steps[first][0]:
            end += 1
        counted = steps[first + 1:end]
        start, stop = steps[first][3], steps[end - 1][3]
        if counted and stop > start:
            windows.append((steps[first][0], start, stop, sum(s[3] - s[2] for s in counted),
                            sum(s[4] for s in counted), sum(s[5] for s in counted)))
        first = end
    return windows


def accelerator_utilization(windows):
    """One rank's AU: the mean over its windows of compute time / window (0 without windows)."""
    return sum(w[3] / (w[2] - w[1]) for w in windows) / len(windows) if windows else 0.0


def summarize_utilization(ranks):
    """(AU, lowest rank's AU, samples/s, bytes/s) of a job from every rank's windows, as
    strider::summarize_utilization: the mean of the ranks' AU; the rates per epoch the sum over ranks
    of each rank's over its own window (DLIO's throughput), averaged over epochs."""
    if not ranks:
        return 0.0, 0.0, 0.0, 0.0
    per_rank = [accelerator_utilization(windows) for windows in ranks]
    rates = {}
    for windows in ranks:
        for epoch, start, stop, _, samples, nbytes in windows:
            rate = rates.setdefault(epoch, [0.0, 0.0])
            rate[0] += samples / (stop - start)
            rate[1] += nbytes / (stop - start)
    epochs = list(rates.values())
    return (sum(per_rank) / len(per_rank), min(per_rank), sum(r[0] for r in epochs) / len(epochs) if epochs else 0.0,
            sum(r[1] for r in epochs) / len(epochs) if epochs else 0.0)


def drop_page_cache(path, how, rank):
    if how == "file":
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)
    elif how == "all" and rank == 0:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as control:
            control.write("1\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--workload", required=True, help="its name, for the report")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--compute-s", type=float, required=True, help="the step: seconds of sleep per batch")
    parser.add_argument("--au-threshold", type=float, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0, help="at most this many steps per epoch (0: all)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader num_workers")
    parser.add_argument("--prefetch-factor", type=int, default=2, help="batches each worker reads ahead")
    parser.add_argument("--drop", choices=["file", "all", "none"], default="file",
                        help="how the page cache is dropped at each epoch's start")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args()

    # Imported here so that the AU arithmetic above can be imported (and tested) without torch.
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_peer import H5Rows, mpi_rank_size, peak_rss_bytes  # the same dataset as compare.sh's peer

    rank, size = mpi_rank_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + (os.getppid() % 20000)))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)

    dataset = H5Rows(args.data)
    sampler = DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True, seed=args.seed)
    extra = dict(prefetch_factor=args.prefetch_factor, persistent_workers=True) if args.workers > 0 else {}
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        pin_memory=torch.cuda.is_available(), **extra)

    steps = []
    samples = 0
    dist.barrier()
    start = time.perf_counter()
    first_batch = None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        if args.drop != "none":
            dist.barrier()  # nobody is reading while the file leaves the page cache
            drop_page_cache(args.data, args.drop, rank)
            dist.barrier()
        iterator = iter(loader)
        step = 0
        while args.steps <= 0 or step < args.steps:
            requested = time.perf_counter() - start
            try:
                batch = next(iterator)
            except StopIteration:
                break
            compute_start = time.perf_counter() - start
            if first_batch is None:
                first_batch = compute_start
            time.sleep(args.compute_s)
            count = int(batch[0].shape[0])
            steps.append((epoch, requested, compute_start, time.perf_counter() - start, count, count * dataset.row_bytes))
            samples += count
            del batch
            step += 1
        del iterator
    wall = time.perf_counter() - start
    windows = epoch_windows(steps)
    mine = dict(rank=rank, samples=samples, wall_s=wall, au=accelerator_utilization(windows), steps=len(steps),
                time_to_first_batch_s=first_batch or 0.0, peak_rss_bytes=peak_rss_bytes())
    ranks = [None] * size
    dist.all_gather_object(ranks, dict(mine, windows=windows))
    if rank == 0:
        au, au_min, steady_samples, steady_bytes = summarize_utilization([r.pop("windows") for r in ranks])
        wall = max(r["wall_s"] for r in ranks)
        total = sum(r["samples"] for r in ranks)
        result = dict(data=args.data, workload=args.workload, world=size, batch_size=args.batch_size,
                      compute_s=args.compute_s, workers=args.workers, prefetch_factor=args.prefetch_factor,
                      page_cache_drop=args.drop, epochs=args.epochs, samples=total, wall_s=wall,
                      samples_per_s=total / wall if wall > 0 else 0.0,
                      bytes_per_s=total * dataset.row_bytes / wall if wall > 0 else 0.0,
                      sample_bytes=dataset.row_bytes,
                      au=au, au_min=au_min, au_threshold=args.au_threshold, passed=au >= args.au_threshold,
                      steady_samples_per_s=steady_samples, steady_bytes_per_s=steady_bytes,
                      torch=torch.__version__, ranks=ranks)
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
        print(f"peer {args.workload}: {size} ranks, {args.workers} workers, AU {100 * au:.1f}% "
              f"(lowest rank {100 * au_min:.1f}%), {result['steady_bytes_per_s'] / 1e9:.3f} GB/s useful in the "
              f"AU window", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
