"""strider for Python: the MPI data pipeline's Loader, and torch-style samplers for your own Dataset.

    import strider, torch
    with strider.Loader("train.h5", batch_size=256, seed=0) as loader:   # collective
        for epoch in range(epochs):
            for x, y in loader.epoch(epoch):        # numpy views of the ring: no copy
                x = torch.from_dlpack(x)              # a tensor of the same memory
                y = torch.from_dlpack(y)

For a Dataset of your own: strider.DistributedSampler (torch's order, exactly) and the other modes,
as a DataLoader's sampler or batch_sampler. Also: strider.torch (IterableDataset for
DataLoader(ds, batch_size=None), as_tensors), strider.preemption (stop every rank at one step on
SIGUSR1/SIGTERM, exit 75), strider.cli (the Loader's options for argparse).

MPI: a Loader uses the communicator it is given (comm=MPI.COMM_WORLD or any mpi4py sub-communicator)
or MPI_COMM_WORLD. When nothing started MPI, strider starts it (MPI_THREAD_MULTIPLE) and finalises it
at exit, after closing the loaders still open. In a job of several ranks, an exception that ends one
rank's program ends the job (MPI_Abort) instead of leaving the other ranks waiting, unless every rank
raised it (a strider error agreed over the whole job). numpy is required; torch is optional.
"""

import atexit as _atexit
import inspect as _inspect
import sys as _sys

import numpy as _numpy  # noqa: F401  batches are numpy arrays

from . import _strider
from ._strider import Batch, DataError, Epoch, Error, Loader, UsageError, loader_options
from . import cli, preemption
from .cli import add_loader_arguments, loader_arguments
from .samplers import (BalancedSampler, BlockSampler, BucketedSampler, DistributedSampler, Sampler, StratifiedSampler,
                       StreamingSampler, WeightedSampler, world)

__version__ = _strider.__version__  # the C++ library's version, which pip's metadata also carries

__all__ = ["__version__", "Loader", "Epoch", "Batch", "Error", "UsageError", "DataError", "loader_options", "Sampler",
           "DistributedSampler", "StreamingSampler", "BlockSampler", "BucketedSampler", "BalancedSampler",
           "WeightedSampler", "StratifiedSampler", "world", "cli", "preemption", "add_loader_arguments",
           "loader_arguments"]


def _loader_signature():
    """Loader's keywords as inspect.signature shows them: one per option of the library's table."""
    keyword = _inspect.Parameter.KEYWORD_ONLY
    parameters = [_inspect.Parameter("data", _inspect.Parameter.POSITIONAL_OR_KEYWORD),
                  _inspect.Parameter("comm", keyword, default=None),
                  _inspect.Parameter("copy", keyword, default=False),
                  _inspect.Parameter("split", keyword, default="sampler"),
                  _inspect.Parameter("pin_memory", keyword, default=False)]
    for option in loader_options():
        if option["keyword"] != "data":
            parameters.append(_inspect.Parameter(option["keyword"], keyword, default=option["default"]))
    return _inspect.Signature(parameters)


Loader.__signature__ = _loader_signature()


def _ends_the_job_on_uncaught(previous):
    """An excepthook that, after `previous` printed the traceback, ends an MPI job of several ranks:
    the other ranks would otherwise wait for this one in their next collective. An error that every
    rank of the job raised (agreed over MPI_COMM_WORLD's size) lets every rank exit by itself."""

    def hook(kind, value, traceback):
        previous(kind, value, traceback)
        initialized, finalized, _ = _strider._mpi_state()
        if not initialized or finalized:
            return
        if isinstance(value, Error) and value.ranks_agreed == _strider._world()[1]:
            return
        for stream in (_sys.stdout, _sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001  a closed stream must not keep the job alive
                pass
        _strider._abort_job(1)

    return hook


_sys.excepthook = _ends_the_job_on_uncaught(_sys.excepthook)
_atexit.register(_strider._at_exit)
