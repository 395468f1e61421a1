"""strider.DistributedSampler against torch's own, for a few hundred random configurations, as a
sampler and as a batch sampler, in a DataLoader, and the defaults taken from torch.distributed.
Skipped where torch is not installed (Debian: python3-torch)."""

import random

import pytest
import strider
from conftest import generate

torch = pytest.importorskip("torch")
from torch.utils.data import BatchSampler, DataLoader  # noqa: E402
from torch.utils.data.distributed import DistributedSampler as TorchDistributedSampler  # noqa: E402


def random_configuration(rng):
    n = rng.choice([1, 2, 3, 7, 10, 64, 100, 997, rng.randrange(1, 3000)])
    replicas = rng.randint(1, 8)
    epoch = rng.randrange(0, 5)
    seed = rng.choice([0, 1, 12345, -1, -2**63, 2**63 - 1, 2**64 - 1 - epoch, rng.randrange(-2**63, 2**64 - 8)])
    return dict(n=n, replicas=replicas, rank=rng.randrange(replicas), shuffle=rng.random() < 0.8, seed=seed,
                drop_last=rng.random() < 0.5, epoch=epoch, batch_size=rng.randint(1, 9),
                drop_last_batch=rng.random() < 0.5)


def test_distributed_sampler_equals_torchs_for_random_configurations():
    rng = random.Random(20240611)
    for _ in range(300):
        c = random_configuration(rng)
        arguments = (c["replicas"], c["rank"], c["shuffle"], c["seed"], c["drop_last"])
        theirs = TorchDistributedSampler(range(c["n"]), *arguments)
        ours = strider.DistributedSampler(c["n"], *arguments)
        theirs.set_epoch(c["epoch"])
        ours.set_epoch(c["epoch"])
        assert list(ours) == list(theirs), c
        assert len(ours) == len(theirs), c
        their_batches = BatchSampler(theirs, c["batch_size"], c["drop_last_batch"])
        our_batches = strider.DistributedSampler(c["n"], *arguments, batch_size=c["batch_size"],
                                                 drop_last_batch=c["drop_last_batch"])
        our_batches.set_epoch(c["epoch"])
        assert list(our_batches) == list(their_batches), c
        assert len(our_batches) == len(their_batches), c


def test_a_dataloader_takes_it_as_sampler_and_as_batch_sampler():
    dataset = torch.arange(100, dtype=torch.float32) * 2
    theirs = TorchDistributedSampler(dataset, num_replicas=2, rank=1, seed=7)
    ours = strider.DistributedSampler(dataset, num_replicas=2, rank=1, seed=7)
    batched = strider.DistributedSampler(dataset, num_replicas=2, rank=1, seed=7, batch_size=8)
    for epoch in (0, 3):
        for sampler in (theirs, ours, batched):
            sampler.set_epoch(epoch)
        expected = [b.tolist() for b in DataLoader(dataset, sampler=theirs, batch_size=8)]
        assert [b.tolist() for b in DataLoader(dataset, sampler=ours, batch_size=8)] == expected
        assert [b.tolist() for b in DataLoader(dataset, batch_sampler=batched)] == expected


def test_num_replicas_and_rank_default_from_torch_distributed(monkeypatch):
    import torch.distributed as dist
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 5)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 3)
    sampler = strider.DistributedSampler(100, seed=1)
    assert (sampler.num_replicas, sampler.rank) == (5, 3)
    sampler.set_epoch(2)
    theirs = TorchDistributedSampler(range(100), num_replicas=5, rank=3, seed=1)
    theirs.set_epoch(2)
    assert list(sampler) == list(theirs)


def wrap(array):
    """torch.from_numpy of a read-only view (torch warns once that it is read-only)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.from_numpy(array)


def assert_same_memory(tensor, array, dtype):
    assert tensor.data_ptr() == array.__array_interface__["data"][0]  # no copy
    assert tensor.dtype == dtype and tuple(tensor.shape) == array.shape
    assert tensor.tolist() == array.tolist()


@pytest.mark.parametrize("kind", ["features", "images", "sequences"])
def test_batches_wrap_into_tensors_without_a_copy(files, tmp_path, kind):
    # Every element type strider-gen writes: float32 features, uint8 images, int32 tokens with
    # int64 offsets; int32 labels and int64 indices in all three.
    if kind == "images":
        path = generate(tmp_path / "images.h5", "--kind", "images", "--samples", "20", "--classes", "2", "--channels",
                        "1", "--height", "4", "--width", "3", "--seed", "1")
    else:
        path = files[kind]
    with strider.Loader(path, batch_size=8, seed=1) as loader:
        batch = next(iter(loader))
        if kind == "sequences":
            assert_same_memory(wrap(batch.tokens), batch.tokens, torch.int32)
            assert_same_memory(wrap(batch.offsets), batch.offsets, torch.int64)
        else:
            expected = {"features": (torch.float32, (8, 6)), "images": (torch.uint8, (8, 1, 4, 3))}[kind]
            samples = wrap(batch.samples)
            assert_same_memory(samples, batch.samples, expected[0])
            assert tuple(samples.shape) == expected[1]
        assert_same_memory(wrap(batch.labels), batch.labels, torch.int32)
        assert_same_memory(wrap(batch.indices), batch.indices, torch.int64)
