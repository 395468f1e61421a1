#!/usr/bin/env bash
# ctest-label: plain-only
# bench/scripts/storage.sh end to end on tiny settings (STORAGE_QUICK=1): the files, fio, strider at 1
# and 2 simulated accelerators with O_DIRECT, the peer where torch and h5py are installed (else the
# line that says it was skipped), and the summary. No figure is asserted (they live in the script's
# output); the results' structure and their arithmetic are.
source "$(dirname "$0")/common.sh"
python=/usr/bin/python3
command -v fio >/dev/null || { echo "skipped: fio is not installed (scripts/setup.sh installs it)"; exit 77; }
[[ -x $python ]] || { echo "skipped: $python is not installed (scripts/setup.sh installs it)"; exit 77; }
head -c 8192 /dev/zero >"$work/probe"
dd if="$work/probe" of=/dev/null iflag=direct bs=4096 count=1 status=none 2>/dev/null ||
  { echo "skipped: /tmp refuses O_DIRECT, which the benchmark reads with"; exit 77; }

out=$work/storage/results
if BENCH_DIR=$work/storage STORAGE_QUICK=1 STRIDER_BIN=$STRIDER_BIN bash "$STRIDER_SOURCE_DIR/bench/scripts/storage.sh" \
  >"$work/storage.txt" 2>&1; then
  pass "storage.sh ran: $(grep -o 'done in [0-9]* s' "$work/storage.txt")"
else
  fail "storage.sh: $(tail -n 20 "$work/storage.txt")"
  finish
fi

# Every workload: its setup, fio at 1 job (both patterns), strider at 1 accelerator (and at 2 where 1
# held), each run's AU keys consistent; the table names it.
peer_ready=0
$python -c "import torch, h5py" 2>/dev/null && peer_ready=1
check=$($python - "$out" "$peer_ready" <<'PY'
import glob, json, os, sys
out, peer_ready = sys.argv[1], sys.argv[2] == "1"
problems = []
summary = json.load(open(os.path.join(out, "storage.json")))
names = [w["workload"] for w in summary["workloads"]]
if names != ["unet3d", "resnet50", "cosmoflow"]:
    problems.append(f"workloads {names}")
fio = [json.loads(line) for line in open(os.path.join(out, "fio.jsonl"))]
for workload in summary["workloads"]:
    name = workload["workload"]
    if workload["slowdown"] != 1 or workload["steps_per_epoch"] != 2:
        problems.append(f"{name}: quick settings {workload['slowdown']}, {workload['steps_per_epoch']}")
    ones = [f for f in fio if f["workload"] == name and f["jobs"] == 1]
    if not ones or ones[0]["random_bytes_per_s"] <= 0 or ones[0]["sequential_bytes_per_s"] <= 0:
        problems.append(f"{name}: no fio figures at 1 job")
    for who, runs in (("strider", workload["strider"]), ("peer", workload["peer"])):
        counts = [r["accelerators"] for r in runs]
        expected = [1, 2] if runs and runs[0]["passed"] else [1]
        if (who == "strider" or peer_ready) and counts != expected:
            problems.append(f"{name}: {who} ran at {counts}, expected {expected}")
        if who == "peer" and not peer_ready and counts:
            problems.append(f"{name}: the peer ran without torch")
    for path in glob.glob(os.path.join(out, f"*-{name}-*.json")):
        run = json.load(open(path))
        per_rank = [r["au"] for r in run["ranks"]]
        # Every sample of a run has the file's size, so the window's bytes are its samples times that.
        steady, steady_bytes = run["steady_samples_per_s"], run["steady_bytes_per_s"]
        if (abs(sum(per_rank) / len(per_rank) - run["au"]) > 1e-9 or abs(min(per_rank) - run["au_min"]) > 1e-9
                or run["passed"] != (run["au"] >= run["au_threshold"]) or not 0 <= run["au"] <= 1
                or steady <= 0 or abs(steady * run["sample_bytes"] - steady_bytes) > 1e-6 * steady_bytes
                or len(per_rank) != run["world"]):
            problems.append(f"{os.path.basename(path)}: AU keys inconsistent")
        if os.path.basename(path).startswith(("strider", "refine")) and not run["odirect"]:
            problems.append(f"{os.path.basename(path)}: not read with O_DIRECT")
    # The refinement (REFINE_STEPS 1 in quick mode) at the largest count that held: the step asking
    # for fio's rate (tiny records: far more than the grid's step asks), and one bisection where that
    # did not hold; the refined step is the held run with the largest demand, else the grid's.
    held = [r["accelerators"] for r in workload["strider"] if r["passed"]]
    refined = workload["strider_refined"]
    if not held:
        if refined is not None:
            problems.append(f"{name}: refined with no count held")
        continue
    n = held[-1]
    files = sorted(os.path.basename(path) for path in glob.glob(os.path.join(out, f"refine-{name}-*.json")))
    first = os.path.join(out, f"refine-{name}-{n}-0.json")
    expected = [f"refine-{name}-{n}-0.json"]
    if os.path.exists(first) and not json.load(open(first))["passed"]:
        expected.append(f"refine-{name}-{n}-1.json")
    if files != expected:
        problems.append(f"{name}: refinement runs {files}, expected {expected}")
    limit = [f["random_bytes_per_s"] for f in fio if f["workload"] == name and f["jobs"] == n * workload["copy_threads"]]
    if os.path.exists(first):
        # fio's rate with the step as measured: the nominal step is shorter by the grid run's
        # overshoot, down to a tenth of the period at most.
        run = json.load(open(first))
        asked = n * run["batch_size"] * run["sample_bytes"] / (run["compute_us"] / 1e6)
        if run["world"] != n or not limit or not 0.999 * limit[0] <= asked <= 10.01 * limit[0]:
            problems.append(f"{name}: the first refinement run does not ask for fio's rate at {n} ({run['world']} ranks)")
    if refined is None:
        problems.append(f"{name}: no strider_refined")
        continue
    runs_held = [a for a in refined["attempts"] if a["passed"]]
    best_held = max(runs_held, key=lambda a: a["demand_bytes_per_s"]) if runs_held else None
    if any("attempt" not in a for a in refined["attempts"]):
        problems.append(f"{name}: an attempt lost its number")
    if (refined["accelerators"] != n or not refined["bytes_per_s"] > 0 or not 0 <= refined["au"] <= 1
            or not refined["samples_per_s"] > 0 or refined["slowdown"] > workload["slowdown"]
            or abs(refined["h100_equivalents"] - n / refined["slowdown"]) > 1e-9
            or refined["source"] != ("refinement" if best_held else "grid")
            or (best_held and refined["slowdown"] != best_held["slowdown"])
            or abs(refined["fraction_of_fio"] - refined["bytes_per_s"] / limit[0]) > 1e-9
            or len(refined["attempts"]) != len(expected)):
        problems.append(f"{name}: strider_refined not sane: {refined}")
table = open(os.path.join(out, "storage.md")).read()
for name in ("unet3d", "resnet50", "cosmoflow"):
    if f"| {name} |" not in table or f"- {name}: at " not in table:
        problems.append(f"the table has no row or refinement line for {name}")
if "| refined H100s |" not in table:
    problems.append("the table has no refined columns")
print("; ".join(problems) if problems else "ok")
PY
)
expect_equal "results: every workload, fio, strider's counts and refinement, consistent AU keys, the table" "$check" ok
# The peer computes the AU as strider does: the unit test's job of two ranks (test_storage_workload.cpp;
# rank 1's trace is one that has the windows that test gives rank 1): AU 0.675, lowest 0.6, 9.4
# samples/s and 940 bytes/s (the ranks' rates summed per epoch, averaged over epochs).
expect_equal "the peer's AU arithmetic on the fixed traces" "$(cd "$STRIDER_SOURCE_DIR/bench/scripts" && $python -c "
from storage_peer import epoch_windows, summarize_utilization
rank0 = [(0, 0.0, 1.0, 2.0, 7, 700), (0, 2.0, 2.5, 3.5, 7, 700), (0, 3.5, 3.5, 4.5, 7, 700),
       (1, 5.0, 7.0, 8.0, 9, 900), (1, 8.0, 8.0, 8.5, 3, 300), (1, 8.5, 10.0, 10.5, 5, 500)]
rank1 = [(0, 0.0, 1.5, 2.5, 5, 500), (0, 2.5, 2.5, 5.0, 10, 1000), (1, 6.0, 7.0, 8.0, 2, 200),
       (1, 8.0, 8.5, 9.0, 6, 600)]
print(' '.join(f'{v:.9g}' for v in summarize_utilization([epoch_windows(rank0), epoch_windows(rank1)])))")" \
  "0.675 0.6 9.4 940"
if ((!peer_ready)); then
  grep -q "^peer skipped: python3-torch and python3-h5py-mpi are needed" "$work/storage.txt" &&
    pass "no torch here: the peer is skipped, and the output says so" || fail "no line saying the peer was skipped"
fi
# (Quick, and no workload to run, should the check be lost.)
refuse=$(REFINE_STEPS=two STORAGE_QUICK=1 WORKLOADS=none BENCH_DIR=$work/refuse STRIDER_BIN=$STRIDER_BIN bash "$STRIDER_SOURCE_DIR/bench/scripts/storage.sh" 2>&1) &&
  fail "REFINE_STEPS=two was accepted" ||
  expect_equal "REFINE_STEPS=two: one line" "$refuse" "storage: REFINE_STEPS must be a whole number >= 0, got 'two'"
grep -q "STORAGE_QUICK=1: no goals" "$work/storage.txt" && pass "quick mode claims no goals" || fail "quick mode printed goals"
finish
