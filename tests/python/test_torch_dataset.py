"""strider.torch: a Loader as a torch IterableDataset under DataLoader(batch_size=None): the same
batches as loader.epoch(e), tensors that share the ring's memory, resume mid-epoch from
state_dict(), sequences, and a clear refusal in a DataLoader worker. Skipped without torch."""

import subprocess
import sys

import numpy as np
import pytest
import strider

torch = pytest.importorskip("torch")
import strider.torch  # noqa: E402  after the skip: the module imports torch

OPTIONS = {"batch_size": 8, "seed": 11, "engine": "hdf5"}


def reference(path, epoch, **options):
    """(indices, samples, labels) per batch of `epoch`, read through loader.epoch() with copies."""
    with strider.Loader(path, copy=True, **{**OPTIONS, **options}) as loader:
        return [(batch.indices.tolist(), batch.samples, batch.labels) for batch in loader.epoch(epoch)]


def test_a_dataloader_yields_the_loaders_batches_as_tensors(files):
    expected = {epoch: reference(files["features"], epoch) for epoch in (0, 1)}
    with strider.Loader(files["features"], **OPTIONS) as loader:
        dataset = strider.torch.IterableDataset(loader, indices=True)
        batches = torch.utils.data.DataLoader(dataset, batch_size=None)
        assert len(batches) == len(dataset) == len(loader) == len(expected[0]) == 13  # 100 samples / 8
        for epoch in (0, 1):
            dataset.set_epoch(epoch)
            got = []
            for x, y, indices in batches:
                assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.shape[1:] == (6,)
                assert y.dtype == torch.int32 and indices.dtype == torch.int64
                got.append((indices.tolist(), x.numpy().copy(), y.numpy().copy()))
            assert [g[0] for g in got] == [e[0] for e in expected[epoch]]
            for (_, x, y), (_, samples, labels) in zip(got, expected[epoch]):
                assert np.array_equal(x, samples) and np.array_equal(y, labels)
        assert expected[0][0][0] != expected[1][0][0]  # two epochs, two orders
        assert dataset.current_epoch == 2  # an epoch read to its end moves the Loader on


def test_the_tensors_share_the_rings_memory(files):
    with strider.Loader(files["features"], **OPTIONS) as loader:
        batch = next(iter(loader.epoch(0)))
        x, y = strider.torch.as_tensors(batch)
        assert x.data_ptr() == batch.samples.ctypes.data and y.data_ptr() == batch.labels.ctypes.data
        x[0, 0] = 1234.5
        assert batch.samples[0, 0] == 1234.5  # one memory: no copy was made


def test_sequences_yield_tokens_and_offsets(files):
    with strider.Loader(files["sequences"], copy=True, batch_size=8, seed=2) as loader:
        expected = [(batch.tokens, batch.offsets, batch.labels) for batch in loader.epoch(0)]
    with strider.Loader(files["sequences"], batch_size=8, seed=2) as loader:
        got = [(tuple(t.clone() for t in x), y.clone()) for x, y in
               torch.utils.data.DataLoader(strider.torch.IterableDataset(loader), batch_size=None)]
    assert len(got) == len(expected) == 15
    for ((tokens, offsets), labels), (want_tokens, want_offsets, want_labels) in zip(got, expected):
        assert offsets.dtype == torch.int64 and int(offsets[-1]) == tokens.shape[0]
        assert np.array_equal(tokens.numpy(), want_tokens) and np.array_equal(offsets.numpy(), want_offsets)
        assert np.array_equal(labels.numpy(), want_labels)


def test_a_resumed_dataset_yields_the_rest_of_the_epoch_exactly(files):
    whole = [batch[0] for epoch in (0, 1) for batch in reference(files["features"], epoch)]
    with strider.Loader(files["features"], **OPTIONS) as loader:
        dataset = strider.torch.IterableDataset(loader, indices=True)
        dataset.set_epoch(0)
        taken = []
        for step, (_, _, indices) in enumerate(torch.utils.data.DataLoader(dataset, batch_size=None)):
            taken.append(indices.tolist())
            if step == 4:
                break
        state = dataset.state_dict()
    assert state["epoch"] == 0 and state["consumed"] == 5 * 8
    with strider.Loader(files["features"], **OPTIONS) as loader:
        dataset = strider.torch.IterableDataset(loader, indices=True)
        dataset.load_state_dict(state)
        batches = torch.utils.data.DataLoader(dataset, batch_size=None)
        rest = [indices.tolist() for _ in range(2) for _, _, indices in batches]  # the rest of 0, then 1
    assert taken + rest == whole


def test_a_dataloader_worker_is_refused_with_a_clear_error(files):
    with strider.Loader(files["features"], **OPTIONS) as loader:
        batches = torch.utils.data.DataLoader(strider.torch.IterableDataset(loader), batch_size=None, num_workers=1)
        with pytest.raises(Exception, match=r"num_workers=0 \(the Loader reads ahead on threads of its own") as error:
            next(iter(batches))
        assert "DataLoader worker 0 of 1" in str(error.value)
        assert sum(1 for _ in loader.epoch(0)) == 13  # the Loader still works in this process


def test_importing_strider_does_not_import_torch():
    code = "import sys, strider, strider.cli, strider.preemption; print('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stdout + run.stderr
