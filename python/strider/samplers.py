"""Samplers for users who keep their own Dataset: strider's sampling modes as torch samplers.

    sampler = strider.DistributedSampler(dataset, shuffle=True, seed=0)    # torch's arguments
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=64)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader: ...

Without batch_size a sampler yields this rank's indices (DataLoader(sampler=...)); with batch_size=B
it yields lists of indices, the library's batches (DataLoader(batch_sampler=...)), whose union over
the ranks is the same global batch for any number of ranks with the same global batch size (what
resuming at another world size needs). BucketedSampler always yields batches (a token budget makes
them). DistributedSampler gives torch's DistributedSampler's indices in the same order for the same
(len, num_replicas, rank, shuffle, seed, drop_last, epoch), for datasets of fewer than 214,748,364
samples. Seeds are Python ints in [-2**63, 2**64-1], as torch takes them.

num_replicas and rank default as torch's do, from torch.distributed when it is initialised, else from
MPI (MPI_COMM_WORLD; MPI is started when nothing started it). The plans are computed by the library
(no MPI, no file): set_epoch costs what torch's permutation costs.
"""

import numbers
import sys

from . import _strider


def world():
    """(num_replicas, rank) as the samplers default them: torch.distributed's world when it is
    initialised, else MPI_COMM_WORLD's (starting MPI when nothing started it)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    rank, size = _strider._world()
    return size, rank


class Sampler:
    """This rank's share of every epoch in one of strider's sampling modes (`mode`).

    Arguments as torch's DistributedSampler: dataset_or_len (a Dataset, or its length), num_replicas,
    rank, shuffle, seed, drop_last; then, by keyword: mode (for Sampler itself), batch_size (None:
    yield indices; B: yield lists of B indices), drop_last_batch, labels (class-aware modes; default:
    dataset.targets where the dataset has it), lengths (bucketed), and the mode's options under their
    Loader keywords (strider.loader_options(), group 'sampling'), e.g. max_tokens=, block_size=,
    class_weights=, balance=.

    set_epoch(e) chooses the epoch (forgetting it repeats epoch 0's order, as with torch);
    state_dict() says how far the current iteration went and load_state_dict() makes the next
    iteration go on from there. The count is what the iterator handed out: a DataLoader with workers
    takes indices ahead of the batches it delivered. Samplers pickle and copy (copy.deepcopy),
    position included.
    """

    mode = None
    _needs_labels = ("balanced", "weighted", "stratified")

    def __init__(self, dataset_or_len, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False, *,
                 mode=None, batch_size=None, drop_last_batch=False, labels=None, lengths=None, **options):
        if self.mode is None:
            if mode is None:
                raise _strider.UsageError("Sampler needs mode= (or use a mode's class, e.g. DistributedSampler)")
            self.mode = mode
        elif mode is not None and mode != self.mode:
            raise _strider.UsageError(f"{type(self).__name__} is mode '{self.mode}', not '{mode}'")
        if isinstance(dataset_or_len, numbers.Integral):
            size = int(dataset_or_len)
        else:
            size = len(dataset_or_len)
            if labels is None and self.mode in self._needs_labels:
                labels = getattr(dataset_or_len, "targets", None)
        if num_replicas is None or rank is None:
            world_size, world_rank = world()
            num_replicas = world_size if num_replicas is None else num_replicas
            rank = world_rank if rank is None else rank
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise _strider.UsageError(f"batch_size must be None or >= 1, got {batch_size!r}")
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self.batch_size = batch_size
        self.epoch = 0
        self._yields_batches = batch_size is not None or self.mode == "bucketed"
        # What the plan is made from, kept so that a copy or an unpickled sampler can make it again.
        self._plan_arguments = dict(size=size, labels=labels, lengths=lengths, drop_last_batch=drop_last_batch,
                                    options=options)
        self._plan = self._make_plan()
        self._planned_epoch = None
        self._skip = 0  # items the next iteration skips (load_state_dict)
        self._yielded = 0  # items the current iteration handed out

    def _make_plan(self):
        a = self._plan_arguments
        return _strider._Plan(a["size"], self.num_replicas, self.rank, labels=a["labels"], lengths=a["lengths"],
                              sampler=self.mode, batch_size=self.batch_size or 0, no_shuffle=not self.shuffle,
                              drop_last=self.drop_last, drop_last_batch=a["drop_last_batch"], seed=self.seed,
                              **a["options"])

    def __getstate__(self):
        """Pickling (and copy.deepcopy): the arguments and the position, not the library's plan."""
        state = dict(self.__dict__)
        del state["_plan"]
        return state

    def __setstate__(self, state):
        # A fresh plan of the same epoch, with the position skipped, gives the batches a resumed one
        # does (load_state_dict turned the state into this world size's step).
        self.__dict__.update(state)
        self._plan = self._make_plan()
        self._planned_epoch = None

    def set_epoch(self, epoch):
        """The epoch the next iteration runs (torch's set_epoch)."""
        if not isinstance(epoch, numbers.Integral):
            raise TypeError(f"set_epoch takes an int, got {type(epoch).__name__}")
        if epoch < 0:
            raise _strider.UsageError(f"epoch must be >= 0, got {epoch}")
        self.epoch = int(epoch)
        self._skip = self._yielded = 0

    def _planned(self):
        if self._planned_epoch != self.epoch:
            self._plan.set_epoch(self.epoch)
            self._planned_epoch = self.epoch
        return self._plan

    def __iter__(self):
        plan = self._planned()
        skip, self._skip = self._skip, 0
        self._yielded = skip
        if self._yields_batches:
            for step in range(skip, plan.num_steps):
                batch = plan.batch(step).tolist()
                self._yielded = step + 1
                yield batch
        else:
            indices = plan.indices().tolist()
            for position in range(skip, len(indices)):
                self._yielded = position + 1
                yield indices[position]

    def __len__(self):
        """Batches (with batch_size, or bucketed) or indices of this rank in the current epoch."""
        plan = self._planned()
        if self._yields_batches:
            return plan.num_steps
        return sum(len(plan.batch(step)) for step in range(plan.num_steps))

    def state_dict(self):
        """{'epoch', 'yielded', 'strider', 'num_replicas'}: the current iteration's position."""
        plan = self._planned()
        steps_done = self._yielded if self._yields_batches else 0
        return {"epoch": self.epoch, "yielded": self._yielded, "strider": plan.state(steps_done),
                "num_replicas": self.num_replicas}

    def load_state_dict(self, state):
        """The next iteration goes on where state_dict() was taken. Raises UsageError for a state of
        another mode, configuration, seed or global batch (or, for indices rather than batches,
        another num_replicas)."""
        step = self._plan.resume(state["strider"])  # checks mode, configuration and global batch
        self.epoch = self._planned_epoch = self._plan.epoch
        if self._yields_batches:
            self._skip = step
        else:
            if state.get("num_replicas") != self.num_replicas:
                raise _strider.UsageError(f"this state was taken at num_replicas={state.get('num_replicas')}; "
                                          f"a sampler of indices resumes only at the same num_replicas "
                                          f"({self.num_replicas}); use batch_size for elastic resume")
            self._skip = self._checked_yielded(state.get("yielded"))
        self._yielded = self._skip

    def _checked_yielded(self, yielded):
        """state['yielded'] of a sampler of indices: an int from 0 to this rank's indices in the epoch."""
        count = len(self)
        if isinstance(yielded, bool) or not isinstance(yielded, numbers.Integral) or not 0 <= yielded <= count:
            raise _strider.UsageError(f"state['yielded'] must be an int from 0 to {count} (this rank's indices in "
                                      f"epoch {self.epoch}), got {yielded!r}")
        return int(yielded)

    def __repr__(self):
        return (f"<strider.{type(self).__name__} mode={self.mode} rank {self.rank} of {self.num_replicas}, "
                f"epoch {self.epoch}, batch_size={self.batch_size}>")


class DistributedSampler(Sampler):
    """torch.utils.data.distributed.DistributedSampler, exactly: the same indices in the same order."""
    mode = "distributed"


class StreamingSampler(Sampler):
    """The distributed split of a keyed bijection on [0, N): O(1) memory for any N."""
    mode = "streaming"


class BlockSampler(Sampler):
    """Shuffled blocks of block_size contiguous samples, shuffled within windows: near-sequential reads."""
    mode = "block"


class BucketedSampler(Sampler):
    """Length-bucketed batches under a token budget (max_tokens; lengths= one per sample), balanced
    across ranks; yields batches."""
    mode = "bucketed"


class BalancedSampler(Sampler):
    """Class-balanced oversampling (or undersampling) per epoch; labels= or dataset.targets."""
    mode = "balanced"


class WeightedSampler(Sampler):
    """Weighted sampling by class weights (default 1/count), distributed; labels= or dataset.targets."""
    mode = "weighted"


class StratifiedSampler(Sampler):
    """Batches that hold every class in fixed proportions; labels= or dataset.targets."""
    mode = "stratified"
