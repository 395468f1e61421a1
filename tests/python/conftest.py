"""Shared fixtures of the Python tests (ctest runs them with python3 -m pytest; see tests/CMakeLists.txt).

Environment from ctest: PYTHONPATH (build/python), STRIDER_BIN (the apps), STRIDER_MPIEXEC, the
MPI-as-root variables, STRIDER_SOURCE_DIR. A session whose every test was skipped (torch missing)
exits 77, which ctest reports as skipped rather than passed.
"""

import json
import os
import subprocess
import sys

import pytest

BIN = os.environ.get("STRIDER_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
MPIEXEC = os.environ.get("STRIDER_MPIEXEC", "mpirun")
SOURCE_DIR = os.environ.get("STRIDER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA_DIR = os.environ.get("STRIDER_TEST_DATA_DIR", os.path.join(SOURCE_DIR, "tests", "data"))
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")

# Class blocks of the features file: rows 0..59 are class 0, 60..84 class 1, 85..99 class 2.
CLASS_COUNTS = (60, 25, 15)


def label_of(index):
    """The label strider-gen writes for row `index` of the features file (labels in class blocks)."""
    first = 0
    for label, count in enumerate(CLASS_COUNTS):
        if index < first + count:
            return label
        first += count
    raise IndexError(index)


def generate(path, *arguments):
    subprocess.run([os.path.join(BIN, "strider-gen"), "--out", str(path), "--no-progress", *arguments], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    return str(path)


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """Small dataset files: features (100 x 6 float32, labels in blocks 60/25/15), sequences (120
    rows, 3 classes), and a compressed one whose reads are slow."""
    folder = tmp_path_factory.mktemp("data")
    counts = ",".join(str(count) for count in CLASS_COUNTS)
    return {
        "features": generate(folder / "features.h5", "--kind", "features", "--class-counts", counts, "--dim", "6",
                             "--seed", "3"),
        "sequences": generate(folder / "sequences.h5", "--kind", "sequences", "--samples", "120", "--classes", "3",
                              "--min-len", "1", "--max-len", "40", "--median-len", "8", "--seed", "4"),
        "unusable": os.path.join(DATA_DIR, "unusable.h5"),
        "folder": str(folder),
    }


def dump_rows(path, indices):
    """Rows as the reader returns them, through strider-inspect dump (not through the module):
    {index: (label, [values...])}."""
    result = subprocess.run([os.path.join(BIN, "strider-inspect"), "dump", path, "--indices",
                             ",".join(str(i) for i in indices)], check=True, capture_output=True, text=True,
                            timeout=120)
    rows = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        rows[int(fields[0])] = (int(fields[1]), fields[2:])
    return rows


def mpirun(ranks, arguments, timeout=120, python_flags=(), results=None):
    """Runs `python3 [flags] arguments...` on `ranks` ranks; returns the CompletedProcess (never raises
    for a non-zero exit; raises subprocess.TimeoutExpired for a hang). `results`: a folder for the
    ranks' own files (mpirun interleaves the ranks' output, even within a line): their results
    (STRIDER_TEST_RESULTS) and their stdout and stderr (see rank_output)."""
    command = [MPIEXEC, "--bind-to", "none", "-np", str(ranks)]
    environment = dict(os.environ)
    if results is not None:
        environment["STRIDER_TEST_RESULTS"] = str(results)
        command += ["-x", "STRIDER_TEST_RESULTS", "--output-filename", os.path.join(str(results), "output")]
    command += [sys.executable, *python_flags, *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)


def rank_output(results, rank, stream="stderr"):
    """What one rank of an mpirun(results=...) run wrote to stderr (or stdout)."""
    text = ""
    for job in os.listdir(os.path.join(str(results), "output")):
        path = os.path.join(str(results), "output", job, f"rank.{rank}", stream)
        if os.path.exists(path):
            with open(path) as output:
                text += output.read()
    return text


def read_results(folder):
    """Every JSON line the ranks wrote into `folder` (rank<r>.jsonl), rank 0's first."""
    lines = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".jsonl")):
        with open(os.path.join(folder, name)) as results:
            lines += [json.loads(line) for line in results]
    return lines


def script(name):
    return os.path.join(SCRIPTS, name)


class _Outcomes:
    passed = failed = skipped = 0


def pytest_runtest_logreport(report):
    if report.failed:
        _Outcomes.failed += 1
    elif report.skipped:
        _Outcomes.skipped += 1
    elif report.passed and report.when == "call":
        _Outcomes.passed += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _Outcomes.passed == 0 and _Outcomes.failed == 0 and _Outcomes.skipped > 0:
        session.exitstatus = 77  # everything skipped: ctest's SKIP_RETURN_CODE
