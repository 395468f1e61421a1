#!/usr/bin/python3
"""Data-parallel training with PyTorch's DistributedDataParallel, fed by strider.Loader, under MPI:

    mpirun -np 2 python3 -m mpi4py examples/train_torch.py --data train.h5 --epochs 3

Each rank reads only its own samples of the file (strider's distributed sampler: torch's order), and
each batch becomes a tensor without a copy (torch.from_dlpack on a view of strider's ring).
DDP averages the gradients: gloo on the CPU, nccl where CUDA GPUs exist (one per rank, by node-local
rank). The process group meets through MPI: rank 0 picks a free port and broadcasts it. One torch
thread per rank (the strider I/O thread has the other core).

--checkpoint PATH saves the model, the optimizer and the loader's state_dict() after every epoch
(rank 0 writes it); --stop-after STEPS saves and stops after that many steps; --resume goes on from
the checkpoint, mid-epoch included, with the same batches as a run that never stopped. SIGUSR1 or
SIGTERM to any rank (Slurm's warning before the time limit, forwarded by srun or mpirun; see
slurm/train-torch.sbatch) stops every rank at the same step: the checkpoint is saved and the job
exits 75, on which the batch script requeues it. Every Loader option is an argument ("Loader
options" in --help: --sampler weighted, --batch-size 64, --seed 1, --engine direct, ...).
"""

import argparse
import hashlib
import os
import socket
import sys

import numpy as np
import strider
import torch
import torch.distributed as dist
from mpi4py import MPI
from strider import cli, preemption
from torch.nn.parallel import DistributedDataParallel


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the training file (HDF5)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=64, help="units of the hidden layer")
    parser.add_argument("--checkpoint", help="save model, optimizer and loader state here after every epoch")
    parser.add_argument("--resume", action="store_true", help="go on from --checkpoint when it exists")
    parser.add_argument("--stop-after", type=int, default=0, help="save the checkpoint and stop after this many steps")
    cli.add_loader_arguments(parser, defaults={"batch_size": 64, "seed": 0})
    arguments = parser.parse_args()
    return arguments, cli.loader_arguments(arguments)


def init_process_group(comm):
    """torch.distributed over the MPI job: the rendezvous address comes from rank 0 through MPI."""
    address = None
    if comm.rank == 0:
        host = os.environ.get("MASTER_ADDR", socket.gethostname() if comm.size > 1 else "127.0.0.1")
        with socket.socket() as probe:
            probe.bind(("", 0))
            address = (host, probe.getsockname()[1])
    host, port = comm.bcast(address, root=0)
    cuda = torch.cuda.is_available()
    if cuda:
        local_rank = comm.Split_type(MPI.COMM_TYPE_SHARED).rank
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://{host}:{port}", rank=comm.rank,
                            world_size=comm.size)
    return torch.device("cuda") if cuda else torch.device("cpu")


def parameters_digest(model):
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def save_checkpoint(path, model, optimizer, loader, step):
    """Rank 0 writes a temporary file and renames it, so that a checkpoint is whole or absent."""
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
             "loader": loader.state_dict(), "step": step}  # the loader's state is the same on every rank
    if dist.get_rank() == 0:
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()


def train(arguments, options, comm, device):
    """The training loop; returns the exit status: 0, or preemption.EXIT_CODE after a stop signal."""
    with strider.Loader(arguments.data, comm=comm, **options) as loader:
        features = int(np.prod(loader.dataset["sample_shape"]))
        classes = int(loader.labels().max()) + 1
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(features, arguments.hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(arguments.hidden, classes)).to(device)
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr, momentum=arguments.momentum)
        step = 0
        if arguments.resume and arguments.checkpoint and os.path.exists(arguments.checkpoint):
            saved = torch.load(arguments.checkpoint, map_location=device)
            model.module.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            loader.load_state_dict(saved["loader"])  # the next batch is the one after the saved step
            step = saved["step"]
            if loader.rank == 0:
                print(f"resumed at epoch {loader.current_epoch}, step {step}", flush=True)
        with preemption.StopSignal(comm) as stop:  # SIGUSR1, SIGTERM: every rank stops at the same step
            while loader.current_epoch < arguments.epochs:
                epoch = loader.current_epoch
                totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, samples
                for batch in loader:  # this epoch; current_epoch moves on when it ends
                    x, y = batch  # numpy views of the ring: torch.from_dlpack shares their memory
                    x = torch.from_dlpack(x).reshape(len(batch), -1).to(device, torch.float32)
                    y = torch.from_dlpack(y).to(device, torch.int64)
                    optimizer.zero_grad()
                    output = model(x)
                    loss = torch.nn.functional.cross_entropy(output, y)
                    loss.backward()
                    optimizer.step()
                    step += 1
                    totals += torch.tensor([loss.item() * len(batch), (output.argmax(1) == y).sum().item(),
                                            len(batch)], dtype=torch.float64)
                    preempted = stop.should_stop()  # collective: the same answer on every rank
                    if preempted or (arguments.stop_after and step == arguments.stop_after):
                        if arguments.checkpoint:
                            save_checkpoint(arguments.checkpoint, model, optimizer, loader, step)
                        if loader.rank == 0:
                            print(f"{'preempted: checkpoint saved' if preempted else 'stopped'} after step {step}",
                                  flush=True)
                        return preemption.EXIT_CODE if preempted else 0
                dist.all_reduce(totals)
                if loader.rank == 0:
                    print(f"epoch {epoch}: loss {totals[0] / max(1, totals[2]):.4f} "
                          f"accuracy {totals[1] / max(1, totals[2]):.4f} ({int(totals[2])} samples)", flush=True)
                if arguments.checkpoint:
                    save_checkpoint(arguments.checkpoint, model, optimizer, loader, step)
        if loader.rank == 0:
            print(f"parameters {parameters_digest(model)} after {step} steps", flush=True)
    return 0


def main():
    arguments, options = parse_arguments()
    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    device = init_process_group(comm)
    status = train(arguments, options, comm, device)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
