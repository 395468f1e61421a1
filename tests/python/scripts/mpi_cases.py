"""Cases that test_mpi.py runs under mpirun at 2 ranks: python3 mpi_cases.py CASE FILE [MORE].

Each rank appends JSON lines to $STRIDER_TEST_RESULTS/rank<world rank>.jsonl for the test to check
(files, not stdout: mpirun may interleave the ranks' lines); the error cases write what they caught,
the 'uncaught' cases end with an exception on purpose.
"""

import json
import os
import sys

import strider


def result(**values):
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
    with open(os.path.join(os.environ["STRIDER_TEST_RESULTS"], f"rank{rank}.jsonl"), "a") as out:
        out.write(json.dumps(values) + "\n")


def indices(loader, epoch):
    return [int(i) for batch in loader.epoch(epoch) for i in batch.indices]


def case_comm(path):
    """mpi4py's COMM_WORLD, a sub-communicator of each rank alone, and one in reversed rank order."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    with strider.Loader(path, comm=world, batch_size=8, seed=3) as loader:
        result(comm="world", rank=loader.rank, size=loader.world_size, indices=indices(loader, 0))
    alone = world.Split(color=world.rank, key=0)
    with strider.Loader(path, comm=alone, batch_size=8, seed=3) as loader:
        result(comm="alone", rank=loader.rank, size=loader.world_size, indices=indices(loader, 0))
    reversed_order = world.Split(color=0, key=world.size - 1 - world.rank)
    with strider.Loader(path, comm=reversed_order, batch_size=8, seed=3) as loader:
        result(comm="reversed", world_rank=world.rank, rank=loader.rank, size=loader.world_size,
               indices=indices(loader, 0))


def case_resume(path):
    """Interrupted at step 2 of epoch 0, resumed from the state: the same batches as without a stop;
    and a sampler's defaults for num_replicas and rank (MPI's world, no torch.distributed)."""
    with strider.Loader(path, batch_size=8, seed=3, engine="hdf5") as loader:
        whole = indices(loader, 0) + indices(loader, 1)
    with strider.Loader(path, batch_size=8, seed=3, engine="hdf5") as loader:
        taken = []
        for step, batch in enumerate(loader):
            taken += [int(i) for i in batch.indices]
            if step == 2:
                break
        state = loader.state_dict()
    with strider.Loader(path, batch_size=8, seed=3, engine="hdf5") as loader:
        loader.load_state_dict(state)
        rest = [int(i) for batch in loader for i in batch.indices]
        rest += [int(i) for batch in loader for i in batch.indices]
    sampler = strider.DistributedSampler(100)  # num_replicas and rank from MPI's world
    result(rank=loader.rank, equal=taken + rest == whole, state=state,
           sampler_world=[sampler.num_replicas, sampler.rank])


def case_bad(path, which):
    """A bad option, keyword or file, on every rank or on one; every rank must raise the same error."""
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.rank
    keywords = {
        "missing": dict(data=path + ".missing"),
        "unusable": dict(data=path, label_key="/labels_short"),
        "value_on_one_rank": dict(data=path, batch_size=-1 if rank == 1 else 8),
        "keyword_on_one_rank": dict(data=path, **({"batch_sizes": 8} if rank == 0 else {"batch_size": 8})),
        "type_on_one_rank": dict(data=path, seed="3" if rank == 1 else 3),
    }[which]
    try:
        strider.Loader(keywords.pop("data"), **keywords)
        result(rank=rank, error=None)
    except strider.Error as error:
        result(rank=rank, error=type(error).__name__, message=str(error), ranks_agreed=error.ranks_agreed,
               failing_rank=error.failing_rank)


def case_uncaught(path, where):
    """Rank 1 raises while rank 0 goes on into a collective: the job must end, not hang."""
    loader = strider.Loader(path, batch_size=8, seed=3, engine="hdf5")
    if where == "with":
        with loader:
            if loader.rank == 1:
                raise RuntimeError("a local failure on rank 1")
            indices(loader, 1)  # collective
    if loader.rank == 1:
        raise RuntimeError("a local failure on rank 1")
    indices(loader, 1)
    loader.close()


def case_agreed_uncaught(path):
    """Every rank raises the same agreed error and nobody catches it: each rank exits by itself."""
    rank = int(strider.world()[1])
    strider.Loader(path, batch_size=-1 if rank == 1 else 8)


def case_left_open(path):
    """Loaders never closed (one mid-epoch): closed at exit, collectively, and MPI finalised."""
    first = strider.Loader(path, batch_size=8, seed=3, engine="hdf5")
    second = strider.Loader(path, batch_size=8, seed=4, engine="hdf5")
    epoch = iter(second)
    batch = next(epoch)
    result(rank=first.rank, held=len(batch))


def case_late(path):
    """Rank 1 builds its Loader only once rank 0, waiting for it at the Loader's construction, has
    warned (STRIDER_COLLECTIVE_WARN_S=0.5): it reads rank 0's stderr as mpirun --output-filename
    writes it, for at most 60 s. Both then go on."""
    import glob
    import time
    os.environ["STRIDER_COLLECTIVE_WARN_S"] = "0.5"
    rank = int(strider.world()[1])
    if rank == 1:
        pattern = os.path.join(os.environ["STRIDER_TEST_RESULTS"], "output", "*", "rank.0", "stderr")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("still waiting" in open(name).read() for name in glob.glob(pattern)):
                break
            time.sleep(0.05)
    with strider.Loader(path, batch_size=8, seed=3) as loader:
        result(rank=loader.rank, steps=len(loader))


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]](*sys.argv[2:])
