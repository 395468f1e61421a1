"""Preemptible training under Slurm: stop at a step every rank agrees on, checkpoint, exit 75.

    from strider import preemption
    with preemption.StopSignal(comm) as stop:         # handlers for SIGUSR1 and SIGTERM
        for batch in loader:
            train(batch)
            if stop.should_stop():                     # collective: every rank, every step
                save(model, optimizer, loader.state_dict())
                sys.exit(preemption.EXIT_CODE)         # 75: the batch script requeues the job

Slurm signals a job before its time limit or a preemption (`#SBATCH --signal=B:USR1@120`: the
batch script, which forwards USR1 to the ranks through srun or mpirun; SIGTERM at the end). The
signal reaches the ranks at different times, and a rank that stops alone leaves the others waiting
in their next collective: so the handlers only set this process's flag, and should_stop() is a
logical OR over the ranks of `comm`, true on every rank at the same step when any rank was
signalled. EXIT_CODE is strider-train's (EX_TEMPFAIL, "requeue me"), on which the Slurm scripts of
slurm/ requeue the job.
"""

import signal
import threading

from . import _strider

EXIT_CODE = _strider._exit_code_preempted  # 75, EX_TEMPFAIL: checkpointed after a stop signal, requeue
SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class StopSignal:
    """Handlers for `signals` (SIGUSR1 and SIGTERM) that set a flag of this process, and the ranks'
    agreement on it. A context manager: entering installs the handlers (from the main thread, as
    Python's signal module requires), leaving restores the handlers that were there before.

    `comm`: an mpi4py communicator, or None for MPI_COMM_WORLD (started when nothing started it):
    the ranks that stop together, those of the Loader. `requested` is this rank's own flag and
    `signal` the last signal received (None before any); should_stop() is the agreed decision.
    """

    def __init__(self, comm=None, signals=SIGNALS):
        self.comm = comm
        self.signals = tuple(signals)
        self.requested = False
        self.signal = None
        self.agreed = False  # should_stop() returned True
        self._previous = {}

    def _handle(self, number, frame):  # noqa: ARG002  the signature Python's signal module calls
        self.requested = True
        self.signal = signal.Signals(number)

    def install(self):
        """Installs the handlers, keeping the previous ones for restore(). Not collective. Raises
        strider.UsageError outside the main thread or when installed already."""
        if self._previous:
            raise _strider.UsageError("the stop signal handlers are installed already")
        if threading.current_thread() is not threading.main_thread():
            raise _strider.UsageError("StopSignal installs signal handlers, which only the main thread can do")
        for number in self.signals:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def restore(self):
        """Puts back the handlers that install() replaced. Not collective; again: nothing."""
        previous, self._previous = self._previous, {}
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)

    def __enter__(self):
        return self.install()

    def __exit__(self, *exception):
        self.restore()
        return False

    def should_stop(self):
        """Collective over comm: every rank must call, at the same step. True on every rank when any
        rank has received a stop signal (MPI_Allreduce with MPI_LOR, the GIL released while the ranks
        meet); once true, true at every later call without meeting again."""
        if not self.agreed:
            self.agreed = _strider._any_rank(self.requested, self.comm)
        return self.agreed
