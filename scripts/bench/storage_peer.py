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
steady_samples_per_s, steady_bytes_per_s (over the AU window), samples_per_s, bytes_per_s, ranks.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import H5Rows, mpi_rank_size, peak_rss_bytes  # noqa: E402 (the same dataset as compare.sh's peer)


def accelerator_utilization(steps):
    """(AU, samples/s, bytes/s) of one rank from (epoch, requested, compute_start, compute_end, samples,
    bytes) tuples in run order, as strider::accelerator_utilization: per epoch, the window runs from
    the end of its first step to its last compute end; AU is the other steps' compute time over it,
    the rates their samples and bytes over it; each the mean over epochs with two steps or more."""
    epochs = []
    first = 0
    while first < len(steps):
        end = first + 1
        while end < len(steps) and steps[end][0] == steps[first][0]:
            end += 1
        window = steps[end - 1][3] - steps[first][3]
        if end - first >= 2 and window > 0:
            counted = steps[first + 1:end]
            epochs.append((sum(s[3] - s[2] for s in counted) / window, sum(s[4] for s in counted) / window,
                           sum(s[5] for s in counted) / window))
        first = end
    if not epochs:
        return 0.0, 0.0, 0.0
    return tuple(sum(e[i] for e in epochs) / len(epochs) for i in range(3))


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
    au, steady_samples, steady_bytes = accelerator_utilization(steps)
    mine = dict(rank=rank, samples=samples, wall_s=wall, au=au, steady_samples_per_s=steady_samples,
                steady_bytes_per_s=steady_bytes, steps=len(steps),
                time_to_first_batch_s=first_batch or 0.0, peak_rss_bytes=peak_rss_bytes())
    ranks = [None] * size
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        per_rank = [r["au"] for r in ranks]
        au = sum(per_rank) / len(per_rank)
        wall = max(r["wall_s"] for r in ranks)
        total = sum(r["samples"] for r in ranks)
        result = dict(data=args.data, workload=args.workload, world=size, batch_size=args.batch_size,
                      compute_s=args.compute_s, workers=args.workers, prefetch_factor=args.prefetch_factor,
                      page_cache_drop=args.drop, epochs=args.epochs, samples=total, wall_s=wall,
                      samples_per_s=total / wall if wall > 0 else 0.0,
                      bytes_per_s=total * dataset.row_bytes / wall if wall > 0 else 0.0,
                      au=au, au_min=min(per_rank), au_threshold=args.au_threshold, passed=au >= args.au_threshold,
                      steady_samples_per_s=sum(r["steady_samples_per_s"] for r in ranks),
                      steady_bytes_per_s=sum(r["steady_bytes_per_s"] for r in ranks),
                      torch=torch.__version__, ranks=ranks)
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
        print(f"peer {args.workload}: {size} ranks, {args.workers} workers, AU {100 * au:.1f}% "
              f"(lowest rank {100 * min(per_rank):.1f}%), {result['steady_bytes_per_s'] / 1e9:.3f} GB/s useful in the "
              f"AU window", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
