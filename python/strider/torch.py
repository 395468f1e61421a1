"""A Loader as a torch IterableDataset, for code written around torch.utils.data.DataLoader:

    import strider.torch
    loader = strider.Loader("train.h5", batch_size=256, seed=0)        # collective
    dataset = strider.torch.IterableDataset(loader)
    batches = torch.utils.data.DataLoader(dataset, batch_size=None)   # the Loader batches; no workers
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        for x, y in batches: ...                                       # torch tensors, no copy
        torch.save({"data": dataset.state_dict(), ...}, path)          # mid-epoch too

The tensors are made with torch.from_dlpack from the batch's arrays: they share the ring buffer's
memory, and the buffer returns to the ring when every tensor of the batch is gone (keeping more
batches than loader.prefetch_depth raises strider.UsageError instead of waiting). Each iteration is
one epoch of the Loader (collective: every rank iterates). The DataLoader needs batch_size=None (the
Loader batches) and num_workers=0: the Loader reads ahead on threads of its own, and a worker process
raises strider.UsageError. Importing this module imports torch; `import strider` does not.
"""

import torch
import torch.utils.data

from . import _strider


def as_tensors(batch, indices=False):
    """A Batch's arrays as torch tensors of the same memory (torch.from_dlpack, no copy): (x, y) as
    `x, y = batch` gives them, x a tensor for fixed-size samples and (tokens, offsets) for sequences,
    y None for a file without labels; with indices=True, (x, y, indices) with the samples' global
    indices (int64). Not collective. Raises TypeError for dtypes torch lacks (uint16/32/64)."""
    inputs, labels = batch
    if isinstance(inputs, tuple):
        x = tuple(torch.from_dlpack(part) for part in inputs)
    else:
        x = torch.from_dlpack(inputs)
    y = None if labels is None else torch.from_dlpack(labels)
    if indices:
        return x, y, torch.from_dlpack(batch.indices)
    return x, y


class IterableDataset(torch.utils.data.IterableDataset):
    """The batches of `loader` (a strider.Loader) as a torch IterableDataset: iterating runs the
    Loader's current epoch (collective over the Loader's communicator: every rank iterates) and
    yields as_tensors(batch, indices) per batch. set_epoch, len(), state_dict and load_state_dict are
    the Loader's: a dataset that loads a state_dict() taken mid-epoch yields the rest of that epoch,
    the batches a run that never stopped would have yielded. Use it as DataLoader(dataset,
    batch_size=None) with num_workers=0.
    """

    def __init__(self, loader, indices=False):
        super().__init__()
        self.loader = loader
        self.indices = bool(indices)

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        if worker is not None:
            raise _strider.UsageError(
                f"strider.torch.IterableDataset runs in DataLoader worker {worker.id} of {worker.num_workers}: use "
                "num_workers=0 (the Loader reads ahead on threads of its own, and a worker process cannot use it)")
        for batch in iter(self.loader):  # the current epoch; current_epoch moves on when it ends
            yield as_tensors(batch, self.indices)

    def __len__(self):
        """Steps of the Loader's current epoch on this rank."""
        return len(self.loader)

    def set_epoch(self, epoch):
        """The epoch the next iteration runs (the Loader's set_epoch)."""
        self.loader.set_epoch(epoch)

    @property
    def current_epoch(self):
        """The epoch the next iteration runs: moves on by one after an epoch is read to its end."""
        return self.loader.current_epoch

    def state_dict(self):
        """The Loader's state_dict(): the position after the batches yielded so far."""
        return self.loader.state_dict()

    def load_state_dict(self, state):
        """The Loader's load_state_dict(): the next iteration starts where `state` was taken."""
        self.loader.load_state_dict(state)
