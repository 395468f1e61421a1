"""strider.Loader in one process: views without copies, the ring's limit, resume, the options
table as keywords, errors. Expected values come from strider-inspect dump (the reader, not the
module), from the class blocks strider-gen writes, and from strider.DistributedSampler (checked
against torch in test_samplers_torch.py)."""

import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import strider
from conftest import dump_rows, generate, label_of


def epoch_indices(loader, epoch):
    return [int(i) for batch in loader.epoch(epoch) for i in batch.indices]


def test_batches_are_views_of_the_ring(files):
    with strider.Loader(files["features"], batch_size=8, seed=5, prefetch=4) as loader:
        addresses = set()
        steps = 0
        for batch in loader.epoch(0):
            samples = batch.samples
            assert samples.base is batch  # the array keeps the batch (its ring slot) alive
            assert not samples.flags.owndata and samples.flags.writeable
            assert batch.labels.base is batch and batch.labels.flags.writeable
            # Writable: the slot is this batch's alone; a write shows in every view of the batch.
            samples[0, 0] = -1234.5
            assert batch.samples[0, 0] == np.float32(-1234.5)
            # Each access is a view of the same memory, not a copy.
            assert batch.samples.__array_interface__["data"][0] == samples.__array_interface__["data"][0]
            addresses.add(samples.__array_interface__["data"][0])
            steps += 1
        assert steps == 13  # ceil(100 / 8)
        # Thirteen batches came through four ring buffers: at most four addresses.
        assert 1 <= len(addresses) <= 4


def test_views_hold_the_bytes_the_reader_returns(files):
    with strider.Loader(files["features"], batch_size=16, seed=7) as loader:
        batch = next(iter(loader.epoch(0)))
        indices = [int(i) for i in batch.indices]
        rows = dump_rows(files["features"], indices)
        assert batch.samples.shape == (16, 6) and batch.samples.dtype == np.float32
        for position, index in enumerate(indices):
            label, values = rows[index]
            assert batch.labels[position] == label == label_of(index)
            assert batch.samples[position].tolist() == [float(np.float32(v)) for v in values]


def test_float16_samples_are_float16_views_of_the_files_values(tmp_path):
    # float16 rows stay 2 bytes each (numpy's float16, torch.from_numpy's torch.half); the expected
    # values are the file's own, read by h5py.
    h5py = pytest.importorskip("h5py")
    path = generate(tmp_path / "half.h5", "--kind", "features", "--samples", "50", "--dim", "5", "--dtype", "float16",
                    "--seed", "8")
    with h5py.File(path, "r") as file:
        expected = file["samples"][...]
    assert expected.dtype == np.float16
    with strider.Loader(path, batch_size=7, seed=3) as loader:
        for batch in loader.epoch(0):
            assert batch.samples.dtype == np.float16 and batch.samples.shape == (len(batch.indices), 5)
            assert batch.samples.nbytes == 2 * 5 * len(batch.indices)
            assert np.array_equal(batch.samples, expected[np.asarray(batch.indices)])


def test_sequences_are_tokens_and_offsets(files):
    with strider.Loader(files["sequences"], batch_size=5, seed=2) as loader:
        batch = next(iter(loader.epoch(0)))
        assert batch.samples is None
        offsets = batch.offsets
        assert offsets.dtype == np.int64 and offsets.shape == (6,) and offsets[0] == 0
        assert offsets[-1] == batch.tokens.shape[0]
        assert batch.tokens.base is batch and batch.tokens.flags.writeable
        rows = dump_rows(files["sequences"], [int(i) for i in batch.indices])
        for position, index in enumerate(batch.indices):
            label, tokens = rows[int(index)]
            assert batch.labels[position] == label
            assert batch.tokens[offsets[position]:offsets[position + 1]].tolist() == [int(t) for t in tokens]


def test_slots_written_by_a_batch_are_read_again_for_the_next(files):
    # Writing into a view changes that batch only: the slot is filled from the file for the next one.
    with strider.Loader(files["features"], batch_size=8, seed=5, prefetch=2) as loader:
        for batch in loader.epoch(0):  # 13 batches through 2 slots
            rows = dump_rows(files["features"], [int(i) for i in batch.indices])
            for position, index in enumerate(batch.indices):
                assert batch.samples[position].tolist() == [float(np.float32(v)) for v in rows[int(index)][1]]
            batch.samples[...] = np.nan
            batch.labels[...] = -1


def test_a_batch_unpacks_into_inputs_and_labels(files):
    with strider.Loader(files["features"], batch_size=8, seed=5) as loader:
        batch = next(iter(loader.epoch(0)))
        x, y = batch
        assert x.__array_interface__["data"][0] == batch.samples.__array_interface__["data"][0]
        assert np.array_equal(y, batch.labels)
    with strider.Loader(files["sequences"], batch_size=5, seed=2) as loader:
        batch = next(iter(loader.epoch(0)))
        (tokens, offsets), labels = batch
        assert np.array_equal(tokens, batch.tokens) and np.array_equal(offsets, batch.offsets)
        assert np.array_equal(labels, batch.labels)


def test_pin_memory_needs_a_gpu_or_pins_the_ring(files):
    # Where a GPU exists the ring is page-locked (test_tensors.py checks the tensors); here, without
    # one, it is refused with the probe's reason. strider's own probe decides which applies.
    script = ("import strider\n"
              "try:\n"
              "    loader = strider.Loader(%r, batch_size=8, seed=1, pin_memory=True)\n"
              "except strider.UsageError as error:\n"
              "    print('refused:', error)\n"
              "else:\n"
              "    batch = next(iter(loader))\n"
              "    print('pinned', len(batch))\n"
              "    loader.close()\n") % files["features"]
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    if "no usable GPU" in result.stdout:
        assert "refused: pin_memory=True page-locks the ring through CUDA" in result.stdout
        assert "leave pin_memory off" in result.stdout
    else:
        assert result.stdout.strip() == "pinned 8", result.stdout


def test_drop_last_warns_once_naming_drop_last_batch(files):
    # In a process of its own: the warning is said once per process.
    script = ("import warnings, strider\n"
              "warnings.simplefilter('always')\n"
              "with warnings.catch_warnings(record=True) as seen:\n"
              "    for _ in range(3):\n"
              "        strider.Loader(%r, batch_size=8, seed=1, drop_last=True).close()\n"
              "    strider.Loader(%r, batch_size=8, seed=1, drop_last_batch=True).close()\n"
              "print(len(seen), seen[0].category.__name__ if seen else '', seen[0].message if seen else '')\n"
              ) % (files["features"], files["features"])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    count, category, message = result.stdout.strip().split(" ", 2)
    assert (count, category) == ("1", "UserWarning")
    assert "DistributedSampler's drop_last" in message and "drop_last_batch=True" in message


def test_copy_gives_arrays_of_their_own(files):
    with strider.Loader(files["features"], batch_size=8, seed=5) as views, \
         strider.Loader(files["features"], batch_size=8, seed=5, copy=True, prefetch=1) as copies:
        held = []
        for view, copy in zip(views.epoch(0), copies.epoch(0)):
            assert copy.samples.flags.owndata and copy.samples.flags.writeable
            assert np.array_equal(view.samples, copy.samples)
            assert np.array_equal(view.labels, copy.labels) and np.array_equal(view.indices, copy.indices)
            held.append(copy)  # more than the ring of one: copies hold no buffer
        assert len(held) == 13


def test_holding_more_batches_than_the_ring_raises_instead_of_waiting(files):
    with strider.Loader(files["features"], batch_size=4, seed=1, prefetch=4) as loader:
        epoch = loader.epoch(0)
        held = [next(epoch) for _ in range(4)]
        with pytest.raises(strider.UsageError, match="holds all 4"):
            next(epoch)
        with pytest.raises(strider.UsageError, match="stopped at an error"):
            next(epoch)  # the epoch ended there; it does not look finished
        samples = held[0].samples  # a view keeps its buffer too
        del held[0]
        epoch = loader.epoch(0)
        with pytest.raises(strider.UsageError, match="holds all 4"):
            next(epoch)
        del samples
        epoch = loader.epoch(0)
        assert len(next(epoch)) == 4  # a buffer came back
        assert loader.current_epoch == 0  # a failed epoch does not move the position on


def test_views_outlive_close(tmp_path):
    # One batch of 37 MiB: glibc maps a buffer that large with mmap and unmaps it when it is freed
    # (above its largest mmap threshold, 32 MiB), so a view of freed memory would crash here
    # rather than read stale bytes that happen to be intact.
    path = generate(tmp_path / "wide.h5", "--kind", "features", "--samples", "4700", "--dim", "2048", "--seed", "6")
    loader = strider.Loader(path, batch_size=0, seed=5, engine="hdf5", prefetch=1)
    batch = next(iter(loader))
    samples, labels = batch.samples, batch.labels
    assert samples.nbytes > 33 * 2**20
    before = samples.copy()
    del batch
    loader.close()
    assert loader.closed
    assert np.array_equal(samples, before) and labels.shape == (4700,)
    with pytest.raises(strider.UsageError, match="closed"):
        loader.epoch(1)
    loader.close()  # again: nothing


# A parent with a Loader, a running epoch and a batch held forks (as a DataLoader with workers does).
# The child tries the Loader, reports what it caught through a pipe and exits normally, so that its
# atexit and the objects' destructors run there too; the parent then reads on.
FORK_SCRIPT = """
import json, os, select, sys, time
import strider

loader = strider.Loader(sys.argv[1], batch_size=8, seed=1)
expected = [int(i) for batch in loader.epoch(1) for i in batch.indices]
epoch = loader.epoch(0)
held = next(epoch)
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    os.close(read_end)
    calls = {"epoch": lambda: loader.epoch(1), "iter": lambda: iter(loader), "len": lambda: len(loader),
             "next": lambda: next(epoch), "steps": lambda: loader.steps(1)}
    caught = {}
    for name, call in calls.items():
        try:
            call()
            caught[name] = None
        except strider.UsageError as error:
            caught[name] = str(error)
    loader.close()  # nothing here: the parent's to close
    os.write(write_end, json.dumps(caught).encode())
    os.close(write_end)
    sys.exit(0)
os.close(write_end)
start = time.monotonic()
caught = None
if select.select([read_end], [], [], 30)[0]:
    caught = json.loads(os.read(read_end, 65536).decode() or "null")
status = None
while time.monotonic() - start < 30 and status is None:
    done, code = os.waitpid(child, os.WNOHANG)
    status = code if done else None
    time.sleep(0.05)
child_seconds = time.monotonic() - start
if status is None:
    os.kill(child, 9)
    os.waitpid(child, 0)
del held
again = [int(i) for batch in loader.epoch(1) for i in batch.indices]
loader.close()
print(json.dumps({"parent": os.getpid(), "caught": caught, "status": status, "child_seconds": child_seconds,
                  "parent_reads_on": again == expected}))
"""


def test_a_forked_child_gets_a_usage_error_and_exits_while_the_parent_reads_on(files):
    run = subprocess.run([sys.executable, "-c", FORK_SCRIPT, files["features"]], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.splitlines()[-1])
    assert outcome["caught"] is not None, "the child hung before it could report"
    for name, message in outcome["caught"].items():
        assert message is not None, f"{name} ran in the forked child"
        assert f"created in process {outcome['parent']} and cannot be used in a forked child" in message, message
        assert "num_workers=0" in message
    assert outcome["status"] == 0, f"the child did not exit normally within 30 s: {outcome}"
    assert outcome["parent_reads_on"]


def test_epochs_follow_the_distributed_order_and_move_on_by_themselves(files):
    with strider.Loader(files["features"], batch_size=8, seed=11) as loader:
        assert len(loader) == 13 and loader.current_epoch == 0
        first = [int(i) for batch in loader for i in batch.indices]  # no set_epoch: epoch 0
        assert loader.current_epoch == 1
        second = [int(i) for batch in loader for i in batch.indices]  # moved on: epoch 1
        loader.set_epoch(0)
        again = [int(i) for batch in loader for i in batch.indices]
    for epoch, got in ((0, first), (1, second), (0, again)):
        sampler = strider.DistributedSampler(100, 1, 0, seed=11)
        sampler.set_epoch(epoch)
        assert got == list(sampler)
    assert first != second


EVERY_MODE = [
    ("distributed", "features", dict(batch_size=7)),
    ("streaming", "features", dict(batch_size=7)),
    ("block", "features", dict(batch_size=7, block_size=5)),
    ("balanced", "features", dict(batch_size=6)),
    ("weighted", "features", dict(batch_size=6)),
    ("stratified", "features", dict(batch_size=6)),
    ("bucketed", "sequences", dict(max_tokens=100, megabatch=1)),
]


@pytest.mark.parametrize("mode, kind, options", EVERY_MODE)
@pytest.mark.parametrize("seed", [3, None])
def test_state_dict_resume_equals_the_uninterrupted_epochs(files, mode, kind, options, seed):
    path = files[kind]
    with strider.Loader(path, sampler=mode, seed=seed, **options) as loader:
        used_seed = loader.seed
        whole = [epoch_indices(loader, 0), epoch_indices(loader, 1)]
    steps = len(whole[0])
    assert steps > 0
    for stop in (0, 3, -1):  # after no batch, mid-epoch, after the whole epoch
        with strider.Loader(path, sampler=mode, seed=used_seed, **options) as loader:
            taken = []
            for batch in loader:
                taken.extend(int(i) for i in batch.indices)
                if stop >= 0 and len(taken) >= stop * max(1, len(batch)):
                    break
            if stop == 0:
                taken = []
                loader.set_epoch(0)
            state = json.loads(json.dumps(loader.state_dict()))  # a checkpoint survives JSON
        with strider.Loader(path, sampler=mode, seed=seed, **options) as resumed:
            resumed.load_state_dict(state)
            rest = [int(i) for batch in resumed for i in batch.indices]
            following = [int(i) for batch in resumed for i in batch.indices]
        if stop == -1:  # the state of a finished epoch is the start of the next
            assert state["epoch"] == 1 and state["consumed"] == 0
            assert rest == whole[1]
        else:
            assert taken + rest == whole[0]
            assert following == whole[1]


@pytest.mark.parametrize("mode, kind, options", EVERY_MODE)
def test_a_state_taken_after_a_resume_resumes_again_to_the_uninterrupted_epochs(files, mode, kind, options):
    # Preempted twice within epoch 0: after 2 batches, then 3 more batches after the resume.
    path = files[kind]
    with strider.Loader(path, sampler=mode, seed=3, **options) as loader:
        whole = [epoch_indices(loader, 0), epoch_indices(loader, 1)]
    taken, state = [], None
    for stop in (2, 3):
        with strider.Loader(path, sampler=mode, seed=3, **options) as loader:
            if state is not None:
                loader.load_state_dict(state)
            for step, batch in enumerate(loader):
                taken.extend(int(i) for i in batch.indices)
                if step + 1 == stop:
                    break
            state = json.loads(json.dumps(loader.state_dict()))
    assert state["epoch"] == 0 and 0 < len(taken) < len(whole[0])  # both stops within epoch 0
    with strider.Loader(path, sampler=mode, seed=3, **options) as resumed:
        resumed.load_state_dict(state)
        rest = [int(i) for batch in resumed for i in batch.indices]
        following = [int(i) for batch in resumed for i in batch.indices]
    assert taken + rest == whole[0]
    assert following == whole[1]


def test_a_state_of_another_configuration_is_refused(files):
    with strider.Loader(files["features"], batch_size=8, seed=1) as loader:
        state = loader.state_dict()
    with strider.Loader(files["features"], batch_size=8, seed=2) as other:
        with pytest.raises(strider.UsageError):
            other.load_state_dict(state)
    with strider.Loader(files["features"], batch_size=8, seed=1) as other:
        with pytest.raises(strider.UsageError, match="state"):
            other.load_state_dict({"epoch": 0})
        with pytest.raises(strider.DataError):
            other.load_state_dict({"strider": "not a state"})


def test_every_option_of_the_table_is_a_keyword_with_its_default(files):
    table = strider.loader_options()
    assert {"data", "batch_size", "seed", "sampler", "prefetch", "engine"} <= {o["keyword"] for o in table}
    signature = inspect.signature(strider.Loader)
    for option in table:
        keyword = option["keyword"]
        assert keyword == option["name"].replace("-", "_")
        assert option["help"] in strider.Loader.__doc__
        if keyword == "data":  # positional, required
            continue
        assert signature.parameters[keyword].default == option["default"]
        value = option["default"]
        keywords = {"seed": 1, keyword: value}
        with strider.Loader(files["features"], **keywords) as loader:
            in_force = loader.options()
            assert set(in_force) == {o["keyword"] for o in table}
            if value is not None:
                assert in_force[keyword] == value, keyword


def test_keywords_take_values_and_refuse_bad_ones_with_the_apps_words(files):
    path = files["features"]
    with strider.Loader(path, batch_size=np.int64(8), seed=1, no_shuffle=True, class_weights=[1, 0.5, 2.0],
                        sampler="weighted") as loader:
        assert loader.options()["class_weights"] == "1,0.5,2"
        assert loader.options()["no_shuffle"] is True
    cases = [
        (dict(batch_size=-1), strider.UsageError, "--batch-size must be >= 1, or 'all' for one batch of the whole epoch; got -1"),
        (dict(batch_sizes=4), strider.UsageError, "unknown keyword 'batch_sizes'"),
        (dict(batch_size="4"), strider.UsageError, "batch_size takes an int, got str"),
        (dict(no_shuffle=1), strider.UsageError, "no_shuffle takes True or False"),
        (dict(sampler="nope"), strider.UsageError, "unknown sampler 'nope'"),
        (dict(prefetch=65), strider.UsageError, "--prefetch must be in 0..64"),
        (dict(seed=2**64), strider.UsageError, r"seed must be in \[-2\*\*63, 2\*\*64-1\]"),
        (dict(seed=-2**63 - 1), strider.UsageError, "seed must be in"),
        (dict(label_key="/labels\x00/x"), strider.UsageError, "label_key has an embedded null character"),
        (dict(batch_size=2**41), strider.UsageError, "--batch-size must be at most 1099511627776"),
    ]
    for keywords, error, words in cases:
        with pytest.raises(error, match=words) as raised:
            strider.Loader(path, **keywords)
        assert raised.value.ranks_agreed == 1 and raised.value.kind == "usage"
        assert isinstance(raised.value, ValueError)  # usage errors are ValueErrors too


def test_a_path_is_taken_as_given(files, tmp_path):
    # A NUL would cut the path short where C reads it: refused, as open() refuses it.
    with pytest.raises(strider.UsageError, match="embedded null character"):
        strider.Loader(files["features"] + "\x00junk")
    # A file whose name has a comma or glob characters is that file, not a list or a pattern.
    for name in ("a,b.h5", "star[1].h5"):
        shutil.copy(files["features"], tmp_path / name)
        with strider.Loader(str(tmp_path / name), batch_size=8) as loader:
            assert loader.dataset["num_samples"] == 100


def test_files_that_cannot_be_read_raise_with_the_readers_message(files, tmp_path):
    with pytest.raises(strider.Error, match="missing.h5") as raised:
        strider.Loader(str(tmp_path / "missing.h5"))
    assert raised.value.ranks_agreed == 1
    with pytest.raises(strider.DataError, match="labels_short") as raised:
        strider.Loader(files["unusable"], label_key="/labels_short")
    assert raised.value.kind == "data"
    # A labels name of one's own must exist; "none" reads the file without its labels.
    with pytest.raises(strider.DataError, match="no labels dataset /lables"):
        strider.Loader(files["features"], label_key="/lables")
    with strider.Loader(files["features"], batch_size=8, label_key="none") as loader:
        assert loader.dataset["has_labels"] is False


def test_seeds_are_torch_ints_modulo_two_to_the_64(files):
    with strider.Loader(files["features"], batch_size=8, seed=2**64 - 1) as big, \
         strider.Loader(files["features"], batch_size=8, seed=-1) as negative:
        assert big.seed == negative.seed == -1
        assert epoch_indices(big, 0) == epoch_indices(negative, 0)


def test_stats_dataset_labels_and_the_exact_split(files):
    with strider.Loader(files["features"], batch_size=8, seed=1) as loader:
        steps = sum(1 for _ in loader.epoch(0))
        stats = loader.stats()
        assert stats["batches"] == steps == 13 and stats["samples"] == 100
        assert 0.0 <= stats["stall_fraction"] <= 1.0
        dataset = loader.dataset
        assert dataset["num_samples"] == 100 and dataset["sample_shape"] == (6,)
        assert dataset["dtype"] == np.float32 and dataset["has_labels"] and not dataset["variable_length"]
        assert not dataset["compressed"] and dataset["compression"] == ""
        assert loader.labels().tolist() == [label_of(i) for i in range(100)]
    with strider.Loader(files["features"], batch_size=8, split="exact") as loader:
        assert epoch_indices(loader, 0) == list(range(100))


CTRL_C_SCRIPT = """
import sys, time
import strider
loader = strider.Loader(sys.argv[1], batch_size=8, seed=0, io_thread="yes", prefetch=1)
print("waiting", flush=True)
start = time.monotonic()
batches = iter(loader)  # kept: dropping a running epoch waits for its read in progress
try:
    next(batches)
    print("batch", time.monotonic() - start, flush=True)
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - start, flush=True)
    raise
"""


def test_ctrl_c_interrupts_the_wait_for_a_batch(files):
    # Every read takes 4 s (a slow disk): the signal, 0.3 s into the wait, raises long before it ends.
    environment = dict(os.environ, STRIDER_TEST_READ_DELAY_US="4000000", STRIDER_LOG_LEVEL="warn")
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, files["features"]], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=environment)
    assert child.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        raise
    assert "batch" not in out and out.startswith("interrupted"), out
    assert float(out.split()[1]) < 2.0, out  # 0.3 s and a wait slice, not the 4 s read
    assert "KeyboardInterrupt" in err and child.returncode != 0


def test_the_gil_is_released_while_waiting_for_a_batch(tmp_path):
    # A compressed file in 4-row chunks read by the hdf5 engine: a batch of 4000 rows takes tens of
    # milliseconds to read, and next() waits for it.
    path = generate(tmp_path / "slow.h5", "--kind", "features", "--samples", "8000", "--dim", "64", "--compress",
                    "9", "--chunk-rows", "4")
    windows, ticks = [], []
    stop = threading.Event()

    def tick():
        last = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now - last > 0.0005:
                ticks.append(now)
                last = now

    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # a thread that asks for the GIL gets it within half a millisecond
    try:
        with strider.Loader(path, batch_size=4000, seed=1, engine="hdf5", prefetch=1) as loader:
            assert loader.dataset["compression"].startswith("deflate, inflated by strider with ")
            epoch = loader.epoch(0)
            ticker = threading.Thread(target=tick)
            ticker.start()
            try:
                for _ in range(2):
                    start = time.monotonic()
                    batch = next(epoch)
                    windows.append((start, time.monotonic()))
                    del batch  # the ring of one buffer: the next batch is read only now
            finally:
                stop.set()
                ticker.join()
    finally:
        sys.setswitchinterval(switch)
    long_waits = [(start, end) for start, end in windows if end - start > 0.02]
    if not long_waits:  # reads this fast leave no window to see the other thread in: nothing shown
        pytest.skip("both batches were read in under 20 ms: too fast to see another thread run meanwhile")
    # Had next() kept the GIL, the other thread could have run only just before next() was entered
    # and just after it returned (a switch interval or two at either end); it ran in the middle.
    assert any(start + (end - start) / 4 < at < end - (end - start) / 4 for start, end in long_waits for at in ticks)
