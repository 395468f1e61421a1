#!/usr/bin/python3
"""The read limits of the in-memory store's goals, measured with readers of their own (h5py and
plain preads, no strider code), at as many ranks as mpirun starts:

  read_limit.py chunks FILE [--key /samples]
      every rank reads its contiguous, chunk-aligned share of the dataset whole chunk by whole chunk,
      so each chunk is read and decompressed once in the job: the in-order chunk-reading limit;
  read_limit.py sequential FILE [--cold] [--odirect]
      every rank preads its contiguous share of the file in 4 MiB blocks (--cold: the file dropped
      from the page cache first, with posix_fadvise DONTNEED; --odirect: read with O_DIRECT into an
      aligned buffer, past the page cache): the sequential read limit.

Prints one JSON object (rank 0): mode, ranks, rows, bytes, seconds, rows_per_s, bytes_per_s. The
clock runs from a barrier to the barrier after the slowest rank finished."""

import argparse
import json
import mmap
import os
import time

import h5py
import numpy
from mpi4py import MPI


def share(count, unit, ranks, rank):
    """Rank `rank`'s contiguous share of [0, count), cut at multiples of `unit`."""
    def cut(k):
        return min(count, int(round(count * k / ranks / unit)) * unit) if k < ranks else count
    return cut(rank), cut(rank + 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["chunks", "sequential"])
    parser.add_argument("file")
    parser.add_argument("--key", default="/samples")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--odirect", action="store_true")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()

    with h5py.File(args.file, "r") as f:
        data = f[args.key]
        rows = data.shape[0]
        row_bytes = data.dtype.itemsize * (int(numpy.prod(data.shape[1:])) if data.ndim > 1 else 1)
        if args.mode == "chunks":
            chunk = data.chunks[0] if data.chunks else 1
            first, end = share(rows, chunk, ranks, rank)
            buffer = numpy.empty((chunk,) + data.shape[1:], dtype=data.dtype)
            comm.Barrier()
            start = time.perf_counter()
            for at in range(first, end, chunk):
                stop = min(end, at + chunk)
                data.read_direct(buffer, numpy.s_[at:stop], numpy.s_[0:stop - at])
            comm.Barrier()
            seconds = time.perf_counter() - start
            total_bytes = rows * row_bytes
    if args.mode == "sequential":
        size = os.path.getsize(args.file)
        descriptor = os.open(args.file, os.O_RDONLY | (os.O_DIRECT if args.odirect else 0))
        if args.cold and rank == 0:
            os.fdatasync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        block = 4 << 20
        first, end = share(size, block, ranks, rank)
        buffer = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
        comm.Barrier()
        start = time.perf_counter()
        at = first
        while at < end:
            # O_DIRECT reads whole blocks (the file's last one comes back short).
            wanted = block if args.odirect else min(block, end - at)
            got = os.preadv(descriptor, [memoryview(buffer)[:wanted]], at)
            if not got:
                break
            at += got
        comm.Barrier()
        seconds = time.perf_counter() - start
        os.close(descriptor)
        total_bytes = size
    if rank == 0:
        print(json.dumps({"mode": args.mode, "cold": args.cold, "odirect": args.odirect, "ranks": ranks, "rows": rows, "bytes": total_bytes,
                          "seconds": seconds, "rows_per_s": rows / seconds, "bytes_per_s": total_bytes / seconds}))


if __name__ == "__main__":
    main()
