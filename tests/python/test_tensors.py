"""Batches as torch tensors: torch.from_dlpack and torch.from_numpy take the ring's memory without a
copy and without a warning, the tensor keeps its ring slot as the numpy views do, and pin_memory
gives page-locked tensors where a GPU exists. Needs torch (the file is skipped without it)."""

import warnings

import numpy as np
import pytest
import strider

torch = pytest.importorskip("torch")


def address(array):
    return array.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_from_dlpack_is_the_ring_slot_without_a_copy(files):
    with strider.Loader(files["features"], batch_size=8, seed=5) as loader:
        for batch in loader.epoch(0):
            x, y = batch
            samples = torch.from_dlpack(x)
            labels = torch.from_dlpack(batch.labels)
            indices = torch.from_dlpack(batch.indices)
            assert samples.data_ptr() == address(batch.samples)
            assert labels.data_ptr() == address(batch.labels)
            assert indices.data_ptr() == address(batch.indices)
            assert samples.dtype == torch.float32 and tuple(samples.shape) == batch.samples.shape
            assert labels.dtype == torch.int32 and indices.dtype == torch.int64
            assert torch.equal(samples, torch.from_numpy(batch.samples))
            assert np.array_equal(labels.numpy(), batch.labels)


def test_sequences_export_tokens_and_offsets(files):
    with strider.Loader(files["sequences"], batch_size=5, seed=2) as loader:
        batch = next(iter(loader.epoch(0)))
        (tokens, offsets), _ = batch
        assert torch.from_dlpack(tokens).data_ptr() == address(batch.tokens)
        assert torch.from_dlpack(offsets).tolist() == batch.offsets.tolist()


def test_a_tensor_keeps_its_ring_slot(files):
    # A ring of 2: two batches held as tensors only (their Batch and arrays dropped) still hold both
    # slots, so a third raises the ring's UsageError; with one tensor dropped, a new epoch goes on.
    with strider.Loader(files["features"], batch_size=8, seed=5, prefetch=2) as loader:
        epoch = loader.epoch(0)
        held = [torch.from_dlpack(next(epoch).samples) for _ in range(2)]
        first = held[0].clone()
        with pytest.raises(strider.UsageError, match="holds all 2"):
            next(epoch)
        assert torch.equal(held[0], first)  # its slot was not refilled
        del held[0]
        assert len(next(iter(loader.epoch(0)))) == 8


def test_pinned_tensors_where_a_gpu_exists(files):
    if not torch.cuda.is_available():
        with pytest.raises(strider.UsageError, match="no usable GPU"):
            strider.Loader(files["features"], batch_size=8, seed=5, pin_memory=True)
        return
    with strider.Loader(files["features"], batch_size=8, seed=5, pin_memory=True) as loader:
        for batch in loader.epoch(0):
            x = torch.from_dlpack(batch.samples)
            assert x.is_pinned()
            on_gpu = x.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
            assert torch.equal(on_gpu.cpu(), x)
