"""The torch-style samplers without torch: torch's order from the golden vectors torch 1.13 wrote
(tests/data/torch_distributed_goldens.txt), resume, elastic resume, every mode, the defaults."""

import copy
import os
import pickle

import numpy as np
import pytest
import strider
from conftest import DATA_DIR


def golden_lines(limit=None):
    """(N, R, rank, seed, epoch, shuffle, drop_last, indices) for the golden lines with their lists."""
    lines = []
    with open(os.path.join(DATA_DIR, "torch_distributed_goldens.txt")) as golden:
        for line in golden:
            if line.startswith("#") or line.startswith("randperm"):
                continue
            head, _, tail = line.partition(" : ")
            fields = head.split()
            n, replicas, rank, seed, epoch, shuffle, drop_last, count = (int(f) for f in fields[:8])
            indices = [int(i) for i in tail.split()]
            if len(indices) != count:  # N > 300: only the hash is stored
                continue
            lines.append((n, replicas, rank, seed, epoch, bool(shuffle), bool(drop_last), indices))
    return lines[:limit]


def test_distributed_sampler_gives_torchs_golden_orders():
    lines = golden_lines()
    assert len(lines) > 500
    for n, replicas, rank, seed, epoch, shuffle, drop_last, expected in lines:
        sampler = strider.DistributedSampler(n, replicas, rank, shuffle, seed, drop_last)
        sampler.set_epoch(epoch)
        assert list(sampler) == expected, (n, replicas, rank, seed, epoch, shuffle, drop_last)
        assert len(sampler) == len(expected)


def test_design_golden_and_batches():
    expected = {0: [5, 2, 9, 4], 1: [6, 0, 3, 5], 2: [1, 8, 7, 6]}  # DESIGN.md, torch 1.13
    for rank, indices in expected.items():
        sampler = strider.DistributedSampler(list(range(10)), num_replicas=3, rank=rank, seed=0)
        sampler.set_epoch(1)
        assert list(sampler) == indices
        batches = strider.DistributedSampler(10, 3, rank, seed=0, batch_size=3)
        batches.set_epoch(1)
        assert list(batches) == [indices[:3], indices[3:]] and len(batches) == 2
        dropped = strider.DistributedSampler(10, 3, rank, seed=0, batch_size=3, drop_last_batch=True)
        dropped.set_epoch(1)
        assert list(dropped) == [indices[:3]]


@pytest.mark.parametrize("yielded", [-3, -1, 18, 100, 2.0, True, "3", None])
def test_a_state_whose_yielded_is_outside_the_epoch_is_refused(yielded):
    sampler = strider.DistributedSampler(50, 3, 1, seed=9)  # 17 indices per rank
    sampler.set_epoch(2)
    state = dict(sampler.state_dict(), yielded=yielded)
    resumed = strider.DistributedSampler(50, 3, 1, seed=9)
    with pytest.raises(ValueError, match=r"state\['yielded'\] must be an int from 0 to 17 .*epoch 2"):
        resumed.load_state_dict(state)
    for edge in (0, 16):
        resumed.load_state_dict(dict(state, yielded=np.int64(edge)))
        assert list(resumed) == list(sampler)[edge:]
    resumed.load_state_dict(dict(state, yielded=17))
    assert list(resumed) == []  # the state at the epoch's end: nothing left of it


@pytest.mark.parametrize("batch_size", [None, 4])
def test_state_dict_resume_equals_the_uninterrupted_epoch(batch_size):
    whole = strider.DistributedSampler(50, 3, 1, seed=9, batch_size=batch_size)
    whole.set_epoch(2)
    expected = list(whole)
    for stop in (0, 1, 3, len(expected)):
        sampler = strider.DistributedSampler(50, 3, 1, seed=9, batch_size=batch_size)
        sampler.set_epoch(2)
        iterator = iter(sampler)
        taken = [next(iterator) for _ in range(stop)]
        state = sampler.state_dict()
        resumed = strider.DistributedSampler(50, 3, 1, seed=9, batch_size=batch_size)
        resumed.load_state_dict(state)
        assert resumed.epoch == 2
        assert taken + list(resumed) == expected
        assert list(resumed) == expected  # the next iteration runs the whole epoch again


def test_batch_states_resume_at_another_world_size_with_the_same_global_batch():
    def global_batches(replicas, batch_size, first_step=0, state=None):
        samplers = [strider.DistributedSampler(64, replicas, r, seed=4, batch_size=batch_size) for r in range(replicas)]
        for sampler in samplers:
            sampler.set_epoch(0)
            if state is not None:
                sampler.load_state_dict(state)
        per_rank = [list(sampler) for sampler in samplers]
        return [sorted(i for rank in per_rank for i in rank[step]) for step in range(len(per_rank[0]))][first_step:]

    whole = global_batches(2, 4)  # global batches of 8
    sampler = strider.DistributedSampler(64, 2, 0, seed=4, batch_size=4)
    iterator = iter(sampler)
    for _ in range(3):
        next(iterator)
    state = sampler.state_dict()
    assert global_batches(1, 8, state=state) == whole[3:]
    with pytest.raises(strider.UsageError):  # another global batch
        strider.DistributedSampler(64, 1, 0, seed=4, batch_size=4).load_state_dict(state)
    index_state = strider.DistributedSampler(64, 2, 0, seed=4).state_dict()
    with pytest.raises(strider.UsageError, match="num_replicas"):
        strider.DistributedSampler(64, 1, 0, seed=4).load_state_dict(index_state)


class Labelled:
    """A Dataset with torchvision's `targets`."""

    def __init__(self, labels):
        self.targets = labels

    def __len__(self):
        return len(self.targets)


@pytest.mark.parametrize("cls, keywords", [
    (strider.StreamingSampler, {}),
    (strider.BlockSampler, dict(block_size=5)),
    (strider.BalancedSampler, {}),
    (strider.WeightedSampler, {}),
    (strider.StratifiedSampler, dict(batch_size=6)),
])
def test_every_mode_splits_the_epoch_between_ranks(cls, keywords):
    labels = [0] * 30 + [1] * 10 + [2] * 5
    per_rank = []
    for rank in range(3):
        sampler = cls(Labelled(labels), num_replicas=3, rank=rank, seed=2, **keywords)
        sampler.set_epoch(1)
        per_rank.append(list(sampler))
    batched = isinstance(per_rank[0][0], list)
    counts = {len(rank) for rank in per_rank}
    assert len(counts) == 1  # every rank the same number of steps (or indices)
    flat = [i for rank in per_rank for i in (sum(rank, []) if batched else rank)]
    assert all(0 <= i < len(labels) for i in flat)
    if cls in (strider.StreamingSampler, strider.BlockSampler):  # exact coverage, as distributed
        assert sorted(flat) == list(range(len(labels)))
    if cls is strider.BalancedSampler:  # every class oversampled to the largest
        assert [sum(1 for i in flat if labels[i] == c) for c in range(3)] == [30, 30, 30]


def test_bucketed_batches_stay_under_the_token_budget():
    lengths = [(i * 7) % 23 + 1 for i in range(200)]
    sampler = strider.BucketedSampler(200, 2, 0, seed=1, lengths=lengths, max_tokens=64)
    sampler.set_epoch(0)
    batches = list(sampler)
    assert batches and len(batches) == len(sampler)
    assert all(len(batch) * max(lengths[i] for i in batch) <= 64 for batch in batches)


@pytest.mark.parametrize("labels, dtype", [([0.5, 1, 1.9, 0], "float64"),
                                           (np.array([0, 1, 1, 0], np.float32), "float32"),
                                           ([True, False, True, False], "bool")])
def test_labels_and_lengths_that_are_not_integers_are_refused_rather_than_truncated(labels, dtype):
    with pytest.raises(TypeError, match=f"labels must hold integers, got dtype {dtype}"):
        strider.BalancedSampler(4, 1, 0, labels=labels)
    with pytest.raises(TypeError, match=f"lengths must hold integers, got dtype {dtype}"):
        strider.BucketedSampler(4, 1, 0, lengths=labels, max_tokens=8)


def test_labels_of_any_integer_type_are_taken():
    expected = list(strider.BalancedSampler(6, 1, 0, labels=[0, 1, 1, 0, 2, 2], seed=4))
    for labels in ((0, 1, 1, 0, 2, 2), np.array([0, 1, 1, 0, 2, 2], np.uint8), np.array([0, 1, 1, 0, 2, 2], np.int32)):
        assert list(strider.BalancedSampler(6, 1, 0, labels=labels, seed=4)) == expected
    assert list(strider.BalancedSampler(0, 1, 0, labels=[], seed=4)) == []


def test_defaults_and_bad_arguments():
    sampler = strider.DistributedSampler(10)  # num_replicas, rank: MPI's world (one process here)
    assert (sampler.num_replicas, sampler.rank) == strider.world() == (1, 0)
    assert list(strider.DistributedSampler(4, 1, 0, shuffle=False)) == [0, 1, 2, 3]
    with pytest.raises(ValueError):  # torch raises ValueError for a rank outside the world
        strider.DistributedSampler(10, 2, 2)
    with pytest.raises(strider.UsageError, match="seed must be in"):
        strider.DistributedSampler(10, 1, 0, seed=2**64)
    same = [strider.DistributedSampler(10, 1, 0, seed=s) for s in (2**64 - 1, -1)]
    assert list(same[0]) == list(same[1])
    with pytest.raises(strider.UsageError, match="unknown keyword 'prefetch'"):
        strider.DistributedSampler(10, 1, 0, prefetch=4)  # not a sampling option
    with pytest.raises(strider.UsageError, match="mode="):
        strider.Sampler(10, 1, 0)
    with pytest.raises(TypeError, match="set_epoch takes an int, got str"):
        strider.DistributedSampler(10, 1, 0).set_epoch("1")
    assert list(strider.Sampler(10, 1, 0, mode="distributed", seed=3)) == \
        list(strider.DistributedSampler(10, 1, 0, seed=3))


def test_samplers_pickle_and_copy_with_their_position():
    labels = [i % 3 for i in range(90)]
    fresh = strider.BalancedSampler(90, 2, 1, seed=4, labels=labels, batch_size=5)
    fresh.set_epoch(2)
    started = strider.DistributedSampler(100, 2, 1, seed=3, batch_size=4)
    started.set_epoch(1)
    iterator = iter(started)
    next(iterator)
    state = started.state_dict()
    # Resumed at another world size: the remaining samples are split again, and a copy keeps that.
    resumed = strider.DistributedSampler(100, 4, 1, seed=3, batch_size=2)
    resumed.load_state_dict(state)
    for sampler in (fresh, started, resumed):
        clone, deep = pickle.loads(pickle.dumps(sampler)), copy.deepcopy(sampler)
        expected = list(sampler)
        assert expected and list(clone) == expected and list(deep) == expected
        assert clone.epoch == sampler.epoch
    # The unpickled copy is a sampler of its own: it goes on to other epochs like the original.
    clone = pickle.loads(pickle.dumps(started))
    clone.set_epoch(5)
    started.set_epoch(5)
    assert list(clone) == list(started)
