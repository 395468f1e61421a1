#!/usr/bin/python3
"""Data-parallel training with PyTorch's DistributedDataParallel, fed by strider.Loader, under MPI:

    mpirun -np 2 python3 -m mpi4py examples/train_torch.py --data train.h5 --epochs 3

Each rank reads only its own samples of the file (strider's distributed sampler: torch's order), and
each batch becomes a tensor without a copy (torch.from_numpy on a read-only view of strider's ring).
DDP averages the gradients: gloo on the CPU, nccl where CUDA GPUs exist (one per rank, by node-local
rank). The process group meets through MPI: rank 0 picks a free port and broadcasts it. One torch
thread per rank (the strider I/O thread has the other core).

--checkpoint PATH saves the model, the optimizer and the loader's state_dict() after every epoch
(rank 0 writes it); --stop-after STEPS saves and stops after that many steps, as a preempted job
would; --resume goes on from the checkpoint, mid-epoch included, with the same batches as a run
that never stopped. Any option of strider.loader_options() can be given as --name value
(--sampler weighted, --batch-size 64, --seed 1, --engine direct, ...).
"""

import argparse
import hashlib
import os
import socket
import warnings

import numpy as np
import strider
import torch
import torch.distributed as dist
from mpi4py import MPI
from torch.nn.parallel import DistributedDataParallel

# The arrays are read-only views of strider's ring; the model only reads them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


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
    arguments, rest = parser.parse_known_args()
    # Everything else: the Loader's options, typed as the library's table says.
    types = {option["keyword"]: option["type"] for option in strider.loader_options()}
    options = {"batch_size": 64, "seed": 0}
    for name, value in zip(rest[::2], rest[1::2]):
        keyword = name.lstrip("-").replace("-", "_")
        if keyword not in types:
            parser.error(f"unknown option {name}")
        options[keyword] = {"int": int, "bool": lambda text: text in ("1", "true", "yes", "on")}.get(types[keyword],
                                                                                                    str)(value)
    if len(rest) % 2:
        parser.error(f"{rest[-1]} needs a value")
    return arguments, options


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


def main():
    arguments, options = parse_arguments()
    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    device = init_process_group(comm)
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
        while loader.current_epoch < arguments.epochs:
            epoch = loader.current_epoch
            totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, samples
            for batch in loader:  # this epoch; current_epoch moves on when it ends
                x = torch.from_numpy(batch.samples).reshape(len(batch), -1).to(device, torch.float32)
                y = torch.from_numpy(batch.labels).to(device, torch.int64)
                optimizer.zero_grad()
                output = model(x)
                loss = torch.nn.functional.cross_entropy(output, y)
                loss.backward()
                optimizer.step()
                step += 1
                totals += torch.tensor([loss.item() * len(batch), (output.argmax(1) == y).sum().item(), len(batch)],
                                       dtype=torch.float64)
                if arguments.stop_after and step == arguments.stop_after:
                    if arguments.checkpoint:
                        save_checkpoint(arguments.checkpoint, model, optimizer, loader, step)
                    if loader.rank == 0:
                        print(f"stopped after step {step}", flush=True)
                    return
            dist.all_reduce(totals)
            if loader.rank == 0:
                print(f"epoch {epoch}: loss {totals[0] / max(1, totals[2]):.4f} "
                      f"accuracy {totals[1] / max(1, totals[2]):.4f} ({int(totals[2])} samples)", flush=True)
            if arguments.checkpoint:
                save_checkpoint(arguments.checkpoint, model, optimizer, loader, step)
        if loader.rank == 0:
            print(f"parameters {parameters_digest(model)} after {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
