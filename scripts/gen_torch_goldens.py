#!/usr/bin/python3
"""Generate golden test vectors of PyTorch's torch.utils.data.DistributedSampler.

The output lets strider's C++ port of DistributedSampler be checked
bit-for-bit against PyTorch without needing torch in CI.  It was produced
with Debian bookworm's python3-torch 1.13.1+dfsg-4 (whose torch.__version__
string reads "1.13.0a0").

How to run (needs Debian's python3-torch; pyenv's python3 has no torch):

    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch
    /usr/bin/python3 scripts/gen_torch_goldens.py > tests/data/torch_distributed_goldens.txt
    /usr/bin/python3 scripts/gen_torch_goldens.py --large > tests/data/torch_randperm_large_goldens.txt

--large writes randperm orders of N = 250,000,000 (above 214,748,364, where torch >= 2.6 switches
to another loop; torch 1.13 keeps one loop for every N), too long to list: for each seed its first
16 entries and a hash of the whole order (see mix_hash). About 2 GB of memory and half a minute per
seed.

The script is deterministic: configurations are drawn from its own
random.Random(12345) (never torch's RNG), so rerunning it reproduces the
file exactly.

Output (plain text, space separated; lines starting with '#' are comments):

    N R rank seed epoch shuffle drop_last count fnv HEX : i0 i1 ...
    randperm N seed : i0 i1 ...

  * One sampler line per (config, rank), for every rank 0..R-1.
  * seed is the signed int64 seed given to the sampler (decimal);
    shuffle and drop_last are 0/1; count = len(indices).
  * HEX is FNV-1a 64-bit (offset basis 0xcbf29ce484222325, prime
    0x100000001b3) over the indices, each encoded as 8 bytes little-endian
    signed int64, printed as 16 lowercase hex digits.
  * The full index list follows ' : ' only when N <= 300; otherwise the line
    ends with ' :'.  (An empty index list also ends the line with ' :'.)
  * randperm lines: g = torch.Generator(); g.manual_seed(seed);
    torch.randperm(N, generator=g).tolist(), printed in full.

Findings about seeds in torch 1.13.1 (checked with this very build, and
asserted again below in check_seed_semantics()):

  * DistributedSampler.__iter__ does g.manual_seed(self.seed + self.epoch)
    with Python ints, so the sum itself never overflows in Python.
  * Generator.manual_seed accepts any integer in [-2**63, 2**64 - 1].
    Negative values are reinterpreted as uint64 (two's complement):
    manual_seed(-1) gives initial_seed() == 2**64 - 1, and
    manual_seed(-2**63) gives initial_seed() == 2**63.
    Values >= 2**64 or < -2**63 raise
    RuntimeError("Overflow when unpacking long").
  * So for int64 seeds and epochs 0..1000, seed + epoch always lies in
    [-2**63, 2**63 - 1 + 1000], inside the accepted range: torch never raises
    for the configs in this file, including seed = 2**63 - 1 with epoch > 0
    (e.g. manual_seed(2**63 - 1 + 7) is accepted as the uint64 2**63 + 6).
    This equals the C++ definition "(seed + epoch) mod 2**64".
  * The CPU mt19937 is seeded from the low 32 bits only: seeds s and
    s + k * 2**32 give identical randperm output (checked), and reducing a
    seed modulo 2**64 never changes the output where torch accepts both.
  * Should a sum ever fall outside torch's accepted range, this script
    computes that config's indices with seed (seed + epoch) mod 2**64 and
    epoch 0 instead, which by the two points above is the same thing.
"""

import random
import subprocess
import sys

import torch
from torch.utils.data import DistributedSampler

U64 = 1 << 64
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MAX_LISTED_N = 300


class RangeDataset:
    """A dataset-like object of length n (only __len__ is used)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def fnv1a64(indices):
    h = FNV_OFFSET
    for i in indices:
        for b in int(i).to_bytes(8, "little", signed=True):
            h ^= b
            h = (h * FNV_PRIME) % U64
    return h


LARGE_N = 250_000_000
LARGE_SEEDS = (0, 45, 2**40 + 7)  # seed + epoch; torch keeps the low 32 bits
LARGE_PREFIX = 16
MASK = 0xFFFFFFFFFFFFFFFF


def mix64(x):
    """strider::mix64 (include/strider/core/hash.hpp: SplitMix64's step) on uint64: numpy arrays (in
    place, wrapping) or a Python int."""
    if isinstance(x, int):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & MASK
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & MASK
        return x ^ (x >> 31)
    import numpy as np
    x += np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def mix_hash(order):
    """sum over positions i of mix64(mix64(i) ^ order[i]), modulo 2**64: every entry and its
    position count, cheap in C++ and in numpy (tests/unit/test_distributed_sampler.cpp computes it
    with strider::mix64)."""
    import numpy as np
    values = order.view(np.uint64) if order.dtype == np.int64 else order.astype(np.uint64)
    total = 0
    step = 1 << 24
    for start in range(0, len(values), step):
        positions = np.arange(start, min(start + step, len(values)), dtype=np.uint64)
        keys = mix64(positions)
        keys ^= values[start:start + len(positions)]
        total = (total + int(mix64(keys).sum(dtype=np.uint64))) & MASK
    return total


def write_large(out):
    assert torch.__version__.startswith("1.13"), torch.__version__
    out.write("# torch.randperm goldens above N = 214,748,364, generated by "
              "scripts/gen_torch_goldens.py --large\n")
    out.write("# torch.__version__ = %s, Debian python3-torch %s\n"
              % (torch.__version__, torch_package_version()))
    out.write("# line: N seed hash HEX : first %d entries\n" % LARGE_PREFIX)
    out.write("#   (torch.Generator().manual_seed(seed); torch.randperm(N)); seed is seed + epoch\n")
    out.write("#   HEX: sum over i of mix64(mix64(i) ^ order[i]) mod 2**64, mix64 = strider::mix64 (SplitMix64)\n")
    for seed in LARGE_SEEDS:
        g = torch.Generator()
        g.manual_seed(seed)
        order = torch.randperm(LARGE_N, generator=g).numpy()
        out.write("%d %d hash %016x :%s\n" % (
            LARGE_N, seed, mix_hash(order),
            "".join(" %d" % i for i in order[:LARGE_PREFIX])))
        out.flush()
        del order


def randperm(n, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randperm(n, generator=g).tolist()


def sampler_indices(n, r, rank, seed, epoch, shuffle, drop_last):
    s = DistributedSampler(RangeDataset(n), num_replicas=r, rank=rank,
                           shuffle=shuffle, seed=seed, drop_last=drop_last)
    s.set_epoch(epoch)
    try:
        return list(iter(s))
    except RuntimeError:
        # seed + epoch outside [-2**63, 2**64 - 1]: use the equivalent
        # reduced seed (see header).  Not reached for the configs below.
        s = DistributedSampler(RangeDataset(n), num_replicas=r, rank=rank,
                               shuffle=shuffle, seed=(seed + epoch) % U64,
                               drop_last=drop_last)
        s.set_epoch(0)
        return list(iter(s))


def check_seed_semantics():
    assert torch.__version__.startswith("1.13"), torch.__version__
    # Accepted range and uint64 reinterpretation.
    for seed, expect in [(-1, U64 - 1), (-2**63, 2**63), (2**63 - 1, 2**63 - 1),
                         (2**63 - 1 + 7, 2**63 + 6), (U64 - 1, U64 - 1)]:
        g = torch.Generator()
        g.manual_seed(seed)
        assert g.initial_seed() == expect, (seed, g.initial_seed())
    for bad in [U64, -2**63 - 1]:
        g = torch.Generator()
        try:
            g.manual_seed(bad)
        except RuntimeError:
            pass
        else:
            raise AssertionError("manual_seed(%d) unexpectedly accepted" % bad)
    # Reducing modulo 2**64 / changing the high 32 bits leaves output alone.
    for a, b in [(-7, U64 - 7), (-2**63 + 3, 2**63 + 3),
                 (2**63 - 1 + 7, (2**63 - 1 + 7) % U64), (-1, U64 - 1),
                 (5, 5 + 2**32), (123, 123 + 2**40)]:
        assert randperm(1000, a) == randperm(1000, b), (a, b)
    # Same check at the sampler level: seed+epoch vs its mod-2**64 reduction.
    for n, r, seed, epoch in [(100, 3, 2**63 - 1, 7), (57, 4, -2**63, 1),
                              (1000, 5, -7, 2)]:
        for rank in range(r):
            direct = sampler_indices(n, r, rank, seed, epoch, True, False)
            s = DistributedSampler(RangeDataset(n), num_replicas=r, rank=rank,
                                   shuffle=True, seed=(seed + epoch) % U64)
            assert direct == list(iter(s)), (n, r, seed, epoch, rank)
    # Known values.
    assert randperm(10, 0) == [4, 1, 7, 5, 3, 9, 0, 8, 6, 2]
    expect = [[5, 2, 9, 4], [6, 0, 3, 5], [1, 8, 7, 6]]
    for rank in range(3):
        got = sampler_indices(10, 3, rank, 0, 1, True, False)
        assert got == expect[rank], (rank, got)


def make_configs():
    rng = random.Random(12345)
    special_seeds = [0, 1, 42, -1, -7, -2**31, 2**31 - 1, 2**32 + 5,
                     2**63 - 1, -2**63]
    edge_ns = [1, 2, 3, 7, 10, 13, 64, 100, 4999, 5000]
    base_epochs = [0, 1, 2, 7]

    def rand_seed():
        if rng.random() < 0.5:
            return rng.choice(special_seeds)
        return rng.randint(-2**63, 2**63 - 1)

    def rand_epoch():
        if rng.random() < 0.6:
            return rng.choice(base_epochs)
        return rng.randint(0, 1000)

    def rand_n():
        x = rng.random()
        if x < 0.2:
            return rng.choice(edge_ns)
        if x < 0.6:
            return rng.randint(1, MAX_LISTED_N)
        return rng.randint(1, 5000)

    def rb():
        return rng.random() < 0.5

    configs = [(10, 3, 0, 1, True, False)]
    # Every edge N with every world size at least once across the sweep.
    for n in edge_ns:
        for r in (1, 2, 3, 7, 13):
            configs.append((n, r, rand_seed(), rand_epoch(), rb(), rb()))
    # Every special seed, shuffled, with epochs > 0 (overflow territory).
    for seed in special_seeds:
        for epoch in (1, 7, rng.randint(2, 1000)):
            n = rng.choice([rng.randint(1, MAX_LISTED_N), rng.randint(1, 5000)])
            configs.append((n, rng.randint(1, 13), seed, epoch, True, rb()))
    while len(configs) < 400:
        configs.append((rand_n(), rng.randint(1, 13), rand_seed(),
                        rand_epoch(), rb(), rb()))
    return configs


def torch_package_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}",
                              "python3-torch"], capture_output=True,
                             text=True, check=True).stdout.strip()
        return out or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    if sys.argv[1:] == ["--large"]:
        write_large(sys.stdout)
        return
    check_seed_semantics()
    out = sys.stdout
    out.write("# PyTorch DistributedSampler golden vectors, generated by "
              "scripts/gen_torch_goldens.py\n")
    out.write("# torch.__version__ = %s, Debian python3-torch %s\n"
              % (torch.__version__, torch_package_version()))
    out.write("# sampler line: N R rank seed epoch shuffle drop_last count "
              "fnv HEX : i0 i1 ...\n")
    out.write("#   seed: signed int64 as given to the sampler; shuffle/"
              "drop_last: 0/1; count: number of indices\n")
    out.write("#   HEX: FNV-1a 64 (basis cbf29ce484222325, prime "
              "100000001b3) over indices as 8-byte LE int64\n")
    out.write("#   indices listed after ' :' only when N <= %d\n"
              % MAX_LISTED_N)
    out.write("#   torch seeds its generator with seed+epoch, accepted as "
              "uint64 (i.e. mod 2**64)\n")
    out.write("# randperm line: randperm N seed : i0 i1 ...  "
              "(torch.Generator().manual_seed(seed); torch.randperm(N))\n")

    for n in (1, 2, 3, 10, 100, 1000):
        for seed in (0, 1, 42, 2**32 + 5):
            out.write("randperm %d %d :%s\n" % (
                n, seed, "".join(" %d" % i for i in randperm(n, seed))))

    for (n, r, seed, epoch, shuffle, drop_last) in make_configs():
        for rank in range(r):
            idx = sampler_indices(n, r, rank, seed, epoch, shuffle, drop_last)
            tail = "".join(" %d" % i for i in idx) if n <= MAX_LISTED_N else ""
            out.write("%d %d %d %d %d %d %d %d fnv %016x :%s\n" % (
                n, r, rank, seed, epoch, int(shuffle), int(drop_last),
                len(idx), fnv1a64(idx), tail))


if __name__ == "__main__":
    main()
