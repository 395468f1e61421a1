"""examples/train_torch.py at 2 ranks under mpirun -m mpi4py: DDP (gloo) fed by strider.Loader
trains, and a run stopped mid-epoch (--stop-after, or SIGUSR1 to one rank as Slurm's warning) and
resumed from its checkpoint ends with the same parameters as a run that never stopped. Skipped
without torch or mpi4py."""

import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import MPIEXEC, SOURCE_DIR, generate, mpirun

pytest.importorskip("torch")
pytest.importorskip("mpi4py")

EXAMPLE = os.path.join(SOURCE_DIR, "examples", "train_torch.py")


EPOCHS = 8


def arguments(data, *extra):
    return [EXAMPLE, "--data", data, "--epochs", str(EPOCHS), "--batch-size", "32", "--seed", "5", *extra]


def train(data, *extra):
    run = mpirun(2, arguments(data, *extra), timeout=300, python_flags=("-m", "mpi4py"))
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def rank_processes(launcher_pid):
    """{rank: pid} of the ranks that mpirun (`launcher_pid`) started on this host."""
    with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children") as children:
        pids = [int(pid) for pid in children.read().split()]
    ranks = {}
    for pid in pids:
        with open(f"/proc/{pid}/environ", "rb") as environment:
            variables = dict(item.split(b"=", 1) for item in environment.read().split(b"\0") if b"=" in item)
        if b"OMPI_COMM_WORLD_RANK" in variables:
            ranks[int(variables[b"OMPI_COMM_WORLD_RANK"])] = pid
    return ranks


def train_until_signalled(data, checkpoint):
    """A run that gets SIGUSR1 on rank 1 only once epoch 0 has ended: returns (exit status, output)."""
    command = [MPIEXEC, "--bind-to", "none", "-np", "2", sys.executable, "-m", "mpi4py",
               *arguments(data, "--checkpoint", checkpoint)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as run:
        output = ""
        try:
            for line in run.stdout:
                output += line
                if line.startswith("epoch 0:"):
                    os.kill(rank_processes(run.pid)[1], signal.SIGUSR1)  # as a forwarded --signal would
            return run.wait(timeout=300), output
        finally:
            if run.poll() is None:
                run.kill()


def test_train_torch_trains_and_resumes_to_the_same_parameters(tmp_path):
    # Three Gaussian classes in 8 dimensions (noise 1 around centres ~ N(0, 1)): a linear boundary
    # separates most of them, so a trained model does far better than chance (1/3).
    data = generate(tmp_path / "train.h5", "--kind", "features", "--samples", "3000", "--classes", "3", "--dim", "8",
                    "--seed", "2")
    whole = train(data, "--checkpoint", str(tmp_path / "whole.pt"))
    epochs = re.findall(r"epoch (\d+): loss ([\d.]+) accuracy ([\d.]+) \((\d+) samples\)", whole)
    assert [int(e[0]) for e in epochs] == list(range(EPOCHS)) and all(int(e[3]) == 3000 for e in epochs)
    assert float(epochs[-1][2]) > 0.8 and float(epochs[-1][1]) < float(epochs[0][1])
    digest = re.search(r"parameters (\w+) after (\d+) steps", whole).groups()

    checkpoint = str(tmp_path / "stopped.pt")
    assert "stopped after step 60" in train(data, "--checkpoint", checkpoint, "--stop-after", "60")  # in epoch 1
    resumed = train(data, "--checkpoint", checkpoint, "--resume")
    assert "resumed at epoch 1, step 60" in resumed
    assert re.search(r"parameters (\w+) after (\d+) steps", resumed).groups() == digest

    # Slurm's warning to one rank: every rank stops at the same step (DDP would wait forever
    # otherwise), the checkpoint is saved, and the job exits 75 (requeue); resumed, it trains the rest.
    checkpoint = str(tmp_path / "preempted.pt")
    status, output = train_until_signalled(data, checkpoint)
    assert status == 75, output
    step = int(re.search(r"preempted: checkpoint saved after step (\d+)", output).group(1))
    assert 47 <= step < 47 * EPOCHS and os.path.exists(checkpoint), output  # after epoch 0, before the end
    resumed = train(data, "--checkpoint", checkpoint, "--resume")
    assert re.search(rf"resumed at epoch \d+, step {step}\n", resumed)
    assert re.search(r"parameters (\w+) after (\d+) steps", resumed).groups() == digest
