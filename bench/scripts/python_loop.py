#!/usr/bin/python3
"""strider's Python module in a training loop's shape: strider.Loader, and every batch wrapped with
torch.from_numpy (samples and labels; --wrap dlpack: torch.from_dlpack), nothing else. Started with mpirun, one process per rank, like
strider-bench and the PyTorch peer, with the same definitions and JSON keys: samples_per_s and
bytes_per_s for the job are the total over the slowest rank's wall time (from the first epoch's start
to the last batch, after a barrier), stall_fraction is the time waiting for a batch over wall time.
Besides: python_us_per_batch, the time per batch spent outside the wait (the loop, the views,
torch.from_numpy), which is what the Python layer adds to strider-bench's C++ loop, and its account
(account_us_per_batch, the slowest rank's): next() outside the wait (the call, the GIL handed back and
forth, the Batch object), the views (batch.samples and batch.labels), the wrapping, and the loop
itself (what remains).

    mpirun -np 2 python3 bench/scripts/python_loop.py --data w1.h5 --batch-size 256 --epochs 2 --json out.json
"""

import argparse
import json
import resource
import sys
import time

import numpy as np
import strider
from mpi4py import MPI


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--warmup-epochs", type=int, default=0,
                        help="epochs run before the clock starts and left out of the figures (as strider-bench's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wrap", choices=["torch", "dlpack", "numpy"], default="torch",
                        help="torch: torch.from_numpy on samples and labels; dlpack: torch.from_dlpack; "
                             "numpy: only touch the arrays")
    parser.add_argument("--json", help="write the figures here (rank 0)")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    if args.wrap in ("torch", "dlpack"):
        import torch
        torch.set_num_threads(1)
        wrap = torch.from_numpy if args.wrap == "torch" else torch.from_dlpack
    else:
        wrap = np.asarray
    loader = strider.Loader(args.data, comm=comm, batch_size=args.batch_size, seed=args.seed)
    for epoch in range(args.warmup_epochs):
        for batch in loader.epoch(epoch):
            samples = wrap(batch.samples)
            labels = wrap(batch.labels)
    comm.Barrier()
    start = time.perf_counter()
    loader.reset_stats()
    clock = time.perf_counter
    in_next = in_views = in_wrap = 0.0
    for epoch in range(args.warmup_epochs, args.warmup_epochs + args.epochs):
        batches = iter(loader.epoch(epoch))
        while True:
            t0 = clock()
            batch = next(batches, None)
            t1 = clock()
            in_next += t1 - t0
            if batch is None:
                break
            x, y = batch.samples, batch.labels
            t2 = clock()
            samples = wrap(x)
            labels = wrap(y)
            in_wrap += clock() - t2
            in_views += t2 - t1
    wall = time.perf_counter() - start
    stats = loader.stats()
    del batch, samples, labels, x, y
    per_batch = 1e6 / max(1, stats["batches"])
    account = dict(next_outside_wait=per_batch * (in_next - stats["stall_seconds"]), views=per_batch * in_views,
                   wrap=per_batch * in_wrap, loop=per_batch * (wall - in_next - in_views - in_wrap))
    loader.close()
    mine = dict(rank=comm.rank, samples=stats["samples"], batches=stats["batches"], useful_bytes=stats["useful_bytes"],
                wall_s=wall, stall_s=stats["stall_seconds"], io_seconds=stats["io_seconds"],
                time_to_first_batch_s=max(0.0, stats["time_to_first_batch_seconds"]),
                python_us_per_batch=1e6 * (wall - stats["stall_seconds"]) / max(1, stats["batches"]),
                account_us_per_batch=account,
                peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    ranks = comm.gather(mine, root=0)
    if comm.rank != 0:
        return
    slowest = max(r["wall_s"] for r in ranks)
    samples = sum(r["samples"] for r in ranks)
    result = dict(data=args.data, world=comm.size, batch_size=args.batch_size, epochs=args.epochs, warmup_epochs=args.warmup_epochs, wrap=args.wrap,
                  samples_per_s=samples / slowest, bytes_per_s=sum(r["useful_bytes"] for r in ranks) / slowest,
                  stall_fraction=sum(r["stall_s"] for r in ranks) / sum(r["wall_s"] for r in ranks),
                  time_to_first_batch_s=max(r["time_to_first_batch_s"] for r in ranks),
                  python_us_per_batch=max(r["python_us_per_batch"] for r in ranks),
                  account_us_per_batch=max(ranks, key=lambda r: r["python_us_per_batch"])["account_us_per_batch"],
                  peak_rss_bytes=max(r["peak_rss_bytes"] for r in ranks), wall_s=slowest,
                  ranks=[dict(r, samples_per_s=r["samples"] / r["wall_s"]) for r in ranks])
    print(f"python loop ({args.wrap}) ranks={comm.size}: {result['samples_per_s']:12.0f} samples/s "
          f"{result['bytes_per_s'] / 1e9:7.3f} GB/s, stall {100 * result['stall_fraction']:.1f}%, "
          f"{result['python_us_per_batch']:.1f} us per batch outside the wait ("
          + ", ".join(f"{k} {v:.1f}" for k, v in result["account_us_per_batch"].items()) + ")", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
