"""The run test_preemption.py starts under mpirun at 2 ranks:
python3 preemption_case.py FILE CHECKPOINT [SIGNAL_RANK SIGNAL_STEP].

Two epochs of a Loader, with strider.preemption.StopSignal asked at every step. With SIGNAL_RANK and
SIGNAL_STEP, that rank (only) sends itself SIGUSR1 after that step; whichever step the ranks agree
to stop at, they save loader.state_dict() to CHECKPOINT (rank 0) and exit 75. Without them, a run
resumes from CHECKPOINT when it exists. Each rank appends JSON lines to
$STRIDER_TEST_RESULTS/rank<rank>.jsonl: the indices it trained, where it stopped, and the handler of
SIGUSR1 after the `with` block.
"""

import json
import os
import signal
import sys

import strider
from strider import preemption


def result(**values):
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
    with open(os.path.join(os.environ["STRIDER_TEST_RESULTS"], f"rank{rank}.jsonl"), "a") as out:
        out.write(json.dumps(values) + "\n")


def main(path, checkpoint, signal_rank=None, signal_step=None):
    with strider.Loader(path, batch_size=4, seed=6, engine="hdf5") as loader:
        if signal_rank is None and os.path.exists(checkpoint):
            with open(checkpoint) as saved:
                loader.load_state_dict(json.load(saved))
        trained, stopped = [], None
        with preemption.StopSignal() as stop:
            step = 0
            while loader.current_epoch < 2 and stopped is None:
                for batch in loader:
                    trained.append([int(i) for i in batch.indices])
                    step += 1
                    if loader.rank == signal_rank and step == signal_step:
                        os.kill(os.getpid(), signal.SIGUSR1)
                    if stop.should_stop():
                        stopped = {"step": step, "requested": stop.requested,
                                   "signal": stop.signal.name if stop.signal else None}
                        break
        result(rank=loader.rank, trained=trained, stopped=stopped,
               handler_restored=signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL)
        if stopped is not None:
            state = loader.state_dict()
            if loader.rank == 0:
                with open(checkpoint + ".tmp", "w") as saved:
                    json.dump(state, saved)
                os.replace(checkpoint + ".tmp", checkpoint)
    if stopped is not None:
        sys.exit(preemption.EXIT_CODE)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(value) for value in sys.argv[3:]))
