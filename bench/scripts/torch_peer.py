#!/usr/bin/python3
"""The PyTorch peer of strider-bench: DataLoader + h5py on the same file, as people write it today.

Started with mpirun (one process per rank); gloo is initialised from the MPI rank and size. Every
configuration (variant x num_workers) times --batches batches after --warmup warm-up batches on every
rank; the figures use the same definitions and JSON keys as strider-bench (samples_per_s and
bytes_per_s for the job are total samples / slowest rank's wall time).

Workloads (--sampler):
  distributed     torch DistributedSampler (same seed as strider's distributed sampler, which
                  reproduces its order), variants:
                    per-row  one __getitem__ (one h5py read) per row, DataLoader(batch_size=B)
                    batched  BatchSampler(DistributedSampler) and one h5py read per batch: sorted
                             unique indices (h5py fancy indexing needs them), then the batch order
                             restored
  weighted        torch WeightedRandomSampler (weights 1/count of the row's class, replacement) -
                  NOT distributed: every rank draws N/R rows on its own (seed + rank), so ranks
                  overlap; variants per-row and batched as above
  length-grouped  sequences: a length-grouped batch sampler written in Python (shuffle, sort windows
                  of 64 batches' worth of tokens by length, pack under a token budget count x longest,
                  shuffle the batches, deal batch k to rank k % R), one __getitem__ per row (a slice
                  of the tokens dataset) and a padding collate
h5py is opened lazily in each worker (the file handle is not picklable and must not be shared
across fork). Labels (and offsets) are read once per worker at that open, which favours the peer.
"""

import argparse
import json
import os
import resource
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, Sampler, WeightedRandomSampler


def mpi_rank_size():
    """The MPI rank and size from the launcher's environment (Open MPI, MPICH, Slurm), else mpi4py."""
    for rank_key, size_key in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                               ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_key in os.environ and size_key in os.environ:
            return int(os.environ[rank_key]), int(os.environ[size_key])
    from mpi4py import MPI  # noqa: imported only when no launcher variables exist
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


class H5Rows(Dataset):
    """Fixed-size rows of /samples; h5py opened lazily, once per worker process."""

    def __init__(self, path, data_key="/samples", label_key="/labels"):
        self.path, self.data_key, self.label_key = path, data_key, label_key
        self.file = None
        import h5py
        with h5py.File(path, "r") as file:
            self.length = file[data_key].shape[0]
            self.row_bytes = int(np.prod(file[data_key].shape[1:])) * file[data_key].dtype.itemsize

    def _open(self):
        import h5py
        self.file = h5py.File(self.path, "r")
        self.data = self.file[self.data_key]
        self.labels = self.file[self.label_key][:]

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.file is None:
            self._open()
        if isinstance(index, (list, tuple, np.ndarray)):  # a whole batch: one sorted h5py read
            indices = np.asarray(index, dtype=np.int64)
            unique, inverse = np.unique(indices, return_inverse=True)  # sorted, unique
            rows = self.data[unique]
            return torch.from_numpy(rows[inverse]), torch.from_numpy(self.labels[indices].astype(np.int64))
        return torch.from_numpy(self.data[index]), int(self.labels[index])


class H5Sequences(Dataset):
    """Variable-length rows tokens[offsets[i]:offsets[i+1]]; h5py opened lazily per worker."""

    def __init__(self, path, tokens_key="/tokens", offsets_key="/offsets", label_key="/labels"):
        self.path, self.tokens_key, self.offsets_key, self.label_key = path, tokens_key, offsets_key, label_key
        self.file = None
        import h5py
        with h5py.File(path, "r") as file:
            offsets = file[offsets_key][:]
            self.lengths = np.diff(offsets)
            self.token_bytes = file[tokens_key].dtype.itemsize

    def _open(self):
        import h5py
        self.file = h5py.File(self.path, "r")
        self.tokens = self.file[self.tokens_key]
        self.offsets = self.file[self.offsets_key][:]
        self.labels = self.file[self.label_key][:]

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, index):
        if self.file is None:
            self._open()
        return torch.from_numpy(self.tokens[self.offsets[index]:self.offsets[index + 1]]), int(self.labels[index])


def pad_collate(rows):
    tokens = torch.nn.utils.rnn.pad_sequence([row[0] for row in rows], batch_first=True)
    lengths = torch.tensor([len(row[0]) for row in rows])
    return tokens, lengths, torch.tensor([row[1] for row in rows])


class LengthGroupedBatchSampler(Sampler):
    """Token-budget batches of similar lengths, the way it is usually written in a training script."""

    def __init__(self, lengths, max_tokens, num_replicas, rank, seed=0, megabatch=64):
        self.lengths = [int(length) for length in lengths]
        self.max_tokens, self.num_replicas, self.rank, self.seed = max_tokens, num_replicas, rank, seed
        mean = max(1, sum(self.lengths) // max(1, len(self.lengths)))
        self.window = max(1, megabatch * max_tokens // mean)  # samples per sort window
        self.epoch = 0
        self._batches = None

    def set_epoch(self, epoch):
        self.epoch = epoch
        self._batches = None

    def _make(self):
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        batches = []
        for start in range(0, len(order), self.window):
            window = sorted(order[start:start + self.window], key=lambda i: self.lengths[i])
            batch, longest = [], 0
            for index in window:
                length = self.lengths[index]
                if batch and (len(batch) + 1) * max(longest, length) > self.max_tokens:
                    batches.append(batch)
                    batch, longest = [], 0
                batch.append(index)
                longest = max(longest, length)
            if batch:
                batches.append(batch)
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in permutation]
        while len(batches) % self.num_replicas:  # every rank the same number of steps
            batches.append(batches[len(batches) % self.num_replicas])
        return batches[self.rank::self.num_replicas]

    def __iter__(self):
        if self._batches is None:
            self._batches = self._make()
        return iter(self._batches)

    def __len__(self):
        if self._batches is None:
            self._batches = self._make()
        return len(self._batches)


def batch_samples_and_bytes(batch, args, dataset):
    if args.sampler == "length-grouped":
        lengths = batch[1]
        return int(lengths.numel()), int(lengths.sum()) * dataset.token_bytes
    count = int(batch[0].shape[0])
    return count, count * dataset.row_bytes


def make_loader(args, dataset, variant, workers, rank, size):
    cuda = torch.cuda.is_available()
    common = dict(num_workers=workers, pin_memory=cuda, persistent_workers=workers > 0)
    if args.sampler == "length-grouped":
        sampler = LengthGroupedBatchSampler(dataset.lengths, args.max_tokens, size, rank, seed=args.seed)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=pad_collate, **common), sampler
    if args.sampler == "distributed":
        sampler = DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True, seed=args.seed)
    else:  # weighted: not distributed, every rank draws N/R rows on its own
        with __import__("h5py").File(args.data, "r") as file:
            labels = file[args.label_key][:]
        counts = np.bincount(labels)
        weights = torch.from_numpy(1.0 / counts[labels])
        generator = torch.Generator()
        generator.manual_seed(args.seed + rank)
        sampler = WeightedRandomSampler(weights, num_samples=len(dataset) // size, replacement=True, generator=generator)
    if variant == "per-row":
        return DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, **common), sampler
    batches = BatchSampler(sampler, args.batch_size, drop_last=False)
    return DataLoader(dataset, sampler=batches, batch_size=None, **common), sampler


def peak_rss_bytes():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * 1024


def run_configuration(args, dataset, variant, workers, rank, size):
    loader, sampler = make_loader(args, dataset, variant, workers, rank, size)
    epoch = 0
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    dist.barrier()
    created = time.perf_counter()
    iterator = iter(loader)
    first_batch = None
    samples = useful = 0
    wait = 0.0
    start = None
    for step in range(args.warmup + args.batches):
        if step == args.warmup:
            start = time.perf_counter()
            wait = 0.0
        asked = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:  # wrap into the next epoch, as a training loop does
            epoch += 1
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
            iterator = iter(loader)
            batch = next(iterator)
        now = time.perf_counter()
        wait += now - asked
        if first_batch is None:
            first_batch = now - created
        if step >= args.warmup:
            count, nbytes = batch_samples_and_bytes(batch, args, dataset)
            samples += count
            useful += nbytes
    wall = time.perf_counter() - start
    del iterator, loader
    return dict(rank=rank, samples=samples, useful_bytes=useful, wall_s=wall, stall_s=wait,
                time_to_first_batch_s=first_batch, peak_rss_bytes=peak_rss_bytes())


def figures(samples, useful, wall, stall, first, rss):
    return dict(samples_per_s=samples / wall if wall > 0 else 0.0, bytes_per_s=useful / wall if wall > 0 else 0.0,
                stall_fraction=stall / wall if wall > 0 else 0.0, time_to_first_batch_s=first,
                read_amplification=1.0, peak_rss_bytes=rss)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--sampler", choices=["distributed", "weighted", "length-grouped"], default="distributed")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=16384, help="length-grouped: count x longest per batch")
    parser.add_argument("--variants", default="per-row,batched")
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label-key", default="/labels")
    parser.add_argument("--json", help="write every configuration and the best as JSON")
    args = parser.parse_args()

    rank, size = mpi_rank_size()
    if "MASTER_ADDR" not in os.environ:  # one host: rank 0's port reaches the others through a file
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ.setdefault("MASTER_PORT", str(29500 + (os.getppid() % 20000)))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)

    dataset = H5Sequences(args.data) if args.sampler == "length-grouped" else H5Rows(args.data, label_key=args.label_key)
    variants = ["per-row"] if args.sampler == "length-grouped" else args.variants.split(",")
    configurations = []
    for variant in variants:
        for workers in [int(w) for w in args.workers.split(",")]:
            mine = run_configuration(args, dataset, variant, workers, rank, size)
            ranks = [None] * size
            dist.all_gather_object(ranks, mine)
            wall = max(r["wall_s"] for r in ranks)
            job = figures(sum(r["samples"] for r in ranks), sum(r["useful_bytes"] for r in ranks), wall,
                          sum(r["stall_s"] for r in ranks) / sum(r["wall_s"] for r in ranks) * wall,
                          max(r["time_to_first_batch_s"] for r in ranks), max(r["peak_rss_bytes"] for r in ranks))
            job.update(variant=variant, num_workers=workers, wall_s=wall,
                       ranks=[dict(rank=r["rank"], samples=r["samples"], **figures(r["samples"], r["useful_bytes"], r["wall_s"],
                                                                                  r["stall_s"], r["time_to_first_batch_s"],
                                                                                  r["peak_rss_bytes"])) for r in ranks])
            configurations.append(job)
            if rank == 0:
                print(f"peer {args.sampler} {variant:8s} workers={workers} ranks={size}: "
                      f"{job['samples_per_s']:12.0f} samples/s {job['bytes_per_s'] / 1e9:7.3f} GB/s "
                      f"first batch {job['time_to_first_batch_s']:.3f} s", flush=True)
    if rank == 0:
        result = dict(data=args.data, world=size, sampler=args.sampler, batch_size=args.batch_size,
                      batches_timed=args.batches, warmup_batches=args.warmup, pin_memory=torch.cuda.is_available(),
                      torch=torch.__version__, configurations=configurations, best={})
        if args.sampler == "weighted":
            result["note"] = ("WeightedRandomSampler is not distributed: every rank draws N/R rows independently "
                              "(seed + rank); the ranks' draws overlap")
        if args.sampler == "length-grouped":
            result["note"] = "length-grouped batch sampler in Python; only the per-row variant (slices of /tokens)"
        for variant in variants:
            best = max((c for c in configurations if c["variant"] == variant), key=lambda c: c["samples_per_s"])
            result["best"][variant] = best
        overall = max(configurations, key=lambda c: c["samples_per_s"])
        result.update({k: overall[k] for k in ("samples_per_s", "bytes_per_s", "stall_fraction", "time_to_first_batch_s",
                                                "read_amplification", "peak_rss_bytes", "ranks", "variant", "num_workers")})
        if args.json:
            with open(args.json, "w") as out:
                json.dump(result, out, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
