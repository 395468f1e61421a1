"""strider.preemption at 2 ranks under mpirun: SIGUSR1 to one rank mid-epoch stops both ranks at the
same step, the loader's state is saved and the job exits 75 (strider-train's code, on which the
Slurm scripts requeue); the run resumed from that state trains exactly the batches of a run that
never stopped. In one process: the handlers, the flag and the restore of the previous handlers."""

import json
import os
import signal

import pytest
import strider
from conftest import mpirun, read_results, script
from strider import preemption

TIMEOUT = 120


def run(files, folder, checkpoint, *signal_at):
    folder.mkdir()
    completed = mpirun(2, [script("preemption_case.py"), files["features"], str(checkpoint),
                           *(str(value) for value in signal_at)], TIMEOUT, results=folder)
    return completed, {r["rank"]: r for r in read_results(folder)}


def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step_and_resumes_exactly(files, tmp_path):
    checkpoint = tmp_path / "checkpoint.json"
    whole, whole_results = run(files, tmp_path / "whole", tmp_path / "unused.json")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert all(r["stopped"] is None for r in whole_results.values()) and sorted(whole_results) == [0, 1]
    assert len(whole_results[0]["trained"]) == 2 * 13  # 2 epochs of 50 samples per rank / 4

    stopped, stopped_results = run(files, tmp_path / "stopped", checkpoint, 1, 17)  # rank 1, in epoch 1
    assert stopped.returncode == preemption.EXIT_CODE == 75, stopped.stdout + stopped.stderr
    assert sorted(stopped_results) == [0, 1]
    steps = {rank: r["stopped"]["step"] for rank, r in stopped_results.items()}
    assert steps[0] == steps[1] and 17 <= steps[0] < 26, steps
    assert stopped_results[1]["stopped"]["requested"] and stopped_results[1]["stopped"]["signal"] == "SIGUSR1"
    assert not stopped_results[0]["stopped"]["requested"]  # rank 0 got no signal: it stopped by agreement
    assert all(r["handler_restored"] for r in stopped_results.values())
    with open(checkpoint) as saved:
        state = json.load(saved)
    assert state["epoch"] == 1 and state["consumed"] == (steps[0] - 13) * 4 * 2  # global samples

    resumed, resumed_results = run(files, tmp_path / "resumed", checkpoint)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for rank in (0, 1):
        assert len(stopped_results[rank]["trained"]) == steps[0]
        trained = stopped_results[rank]["trained"] + resumed_results[rank]["trained"]
        assert trained == whole_results[rank]["trained"], rank


def test_the_flag_the_agreement_and_the_restored_handlers():
    def previous_handler(number, frame):
        pass

    old = signal.signal(signal.SIGUSR1, previous_handler)
    try:
        stop = preemption.StopSignal()
        assert not stop.should_stop()  # one rank here: MPI_COMM_WORLD of this process
        with stop:
            assert signal.getsignal(signal.SIGTERM) == stop._handle
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested and stop.signal == signal.SIGTERM
            assert stop.should_stop() and stop.should_stop()
            with pytest.raises(strider.UsageError, match="installed already"):
                stop.install()
        assert signal.getsignal(signal.SIGUSR1) is previous_handler
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert preemption.EXIT_CODE == 75 and preemption.SIGNALS == (signal.SIGUSR1, signal.SIGTERM)


def test_a_communicator_that_is_not_one_is_refused():
    with pytest.raises(strider.UsageError, match="comm must be an mpi4py communicator"):
        preemption.StopSignal(comm="world").should_stop()
