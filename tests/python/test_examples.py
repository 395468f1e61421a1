"""examples/train_torch.py at 2 ranks under mpirun -m mpi4py: DDP (gloo) fed by strider.Loader
trains, and a run stopped mid-epoch and resumed from its checkpoint ends with the same parameters as
a run that never stopped. Skipped without torch or mpi4py."""

import os
import re

import pytest
from conftest import SOURCE_DIR, generate, mpirun

pytest.importorskip("torch")
pytest.importorskip("mpi4py")

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "train_torch.py")


def train(data, *extra):
    run = mpirun(2, [EXAMPLE, "--data", data, "--epochs", "3", "--batch-size", "32", "--seed", "5", *extra],
                 timeout=300, python_flags=("-m", "mpi4py"))
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_train_torch_trains_and_resumes_to_the_same_parameters(tmp_path):
    # Three Gaussian classes in 8 dimensions (noise 1 around centres ~ N(0, 1)): a linear boundary
    # separates most of them, so a trained model does far better than chance (1/3).
    data = generate(tmp_path / "train.h5", "--kind", "features", "--samples", "3000", "--classes", "3", "--dim", "8",
                    "--seed", "2")
    whole = train(data, "--checkpoint", str(tmp_path / "whole.pt"))
    epochs = re.findall(r"epoch (\d+): loss ([\d.]+) accuracy ([\d.]+) \((\d+) samples\)", whole)
    assert [int(e[0]) for e in epochs] == [0, 1, 2] and all(int(e[3]) == 3000 for e in epochs)
    assert float(epochs[-1][2]) > 0.8 and float(epochs[-1][1]) < float(epochs[0][1])
    digest = re.search(r"parameters (\w+) after (\d+) steps", whole).groups()

    checkpoint = str(tmp_path / "stopped.pt")
    assert "stopped after step 60" in train(data, "--checkpoint", checkpoint, "--stop-after", "60")  # in epoch 1
    resumed = train(data, "--checkpoint", checkpoint, "--resume")
    assert "resumed at epoch 1, step 60" in resumed
    assert re.search(r"parameters (\w+) after (\d+) steps", resumed).groups() == digest
