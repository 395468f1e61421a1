#!/usr/bin/env bash
# ctest-label: plain-only
# One command line across the apps: --version everywhere, a mistyped name refused with the nearest
# one before any file is opened, --json [PATH] in each of its forms (stdout, '-', a file, before or
# after a positional file), --stats-json as a warned alias, --data or a positional file alike,
# --config in the sim example, defaults shown as written, a divergence that names --normalize auto,
# and the progress line.
source "$(dirname "$0")/common.sh"
export STRIDER_LOG_LEVEL=warn
bin=$STRIDER_BIN
inspect=$bin/strider-inspect bench=$bin/strider-bench train=$bin/strider-train
py=${STRIDER_PYTHON:-/usr/bin/python3}
"$bin/strider-gen" --kind features --samples 2000 --dim 8 --classes 4 --out "$work/f.h5" >/dev/null 2>&1 ||
  fail "strider-gen did not write the test file"

# --version: the app, strider's version and commit, and what it was built with; the sim example,
# which uses the public API only, names the library's CUDA/NCCL, HDF5 and MPI.
for app in strider-gen strider-inspect strider-train strider-bench strider-convert; do
  "$bin/$app" --version >"$work/version" 2>&1
  if grep -qE "^$app \(strider\) [0-9]+\.[0-9]+\.[0-9]+, commit [0-9a-f]+" "$work/version" &&
    grep -qE "^built with CUDA .*, HDF5 [0-9.]+ \((parallel|serial)\), .*MPI [0-9]\.[0-9]\), Boost [0-9.]+" "$work/version"; then
    pass "$app --version: $(tr '\n' ' ' <"$work/version")"
  else
    fail "$app --version: $(cat "$work/version")"
  fi
done
mpirun_n 1 "$bin/strider-sim-example" --version >"$work/version" 2>&1
grep -qE "^strider-sim-example \(strider\) [0-9]+\.[0-9]+" "$work/version" &&
  grep -qE "^built with CUDA .*, HDF5 [0-9.]+ \((parallel|serial)\), .*MPI [0-9]\.[0-9]\)$" "$work/version" &&
  pass "strider-sim-example --version: $(tr '\n' ' ' <"$work/version")" ||
  fail "strider-sim-example --version: $(cat "$work/version")"

# A mistyped name gets the nearest one, before the file (which does not exist) is opened.
missing=$work/missing.h5
expect_error "train --sampler balancd" "unknown sampler 'balancd'; did you mean 'balanced'\? \(known: .*\)$" 30 \
  mpirun_n 2 "$train" --data "$missing" --sampler balancd
expect_error "train --model mpl" "unknown --model 'mpl'; did you mean 'mlp'\?" 30 \
  mpirun_n 2 "$train" --data "$missing" --model mpl
expect_error "train --backend cdua" "unknown --backend 'cdua'; did you mean 'cuda'\?" 30 \
  mpirun_n 1 "$train" --data "$missing" --backend cdua
expect_error "bench --compute-mode bussy" "unknown --compute-mode 'bussy'; did you mean 'busy'\?" 30 \
  mpirun_n 2 "$bench" --data "$missing" --compute-mode bussy
expect_error "bench --engine mmapp" "unknown engine 'mmapp'; did you mean 'mmap'\?" 30 \
  mpirun_n 1 "$bench" --data "$missing" --engine mmapp
expect_error "bench --workload resnet" "unknown workload 'resnet'; did you mean 'resnet50'\?" 30 \
  mpirun_n 1 "$bench" --data "$missing" --workload resnet
expect_error "train --batchsize" "unrecognised option '--batchsize'; did you mean '--batch-size'\? \(see --help\)$" 30 \
  mpirun_n 2 "$train" --data "$missing" --batchsize 8
expect_error "inspect inof" "unknown command 'inof'; did you mean 'info'\?" 30 "$inspect" inof "$work/f.h5"
expect_error "a sampler for a far name: no suggestion" "unknown sampler 'zzz' \(known: " 30 \
  mpirun_n 1 "$inspect" plan --samples 10 --sampler zzz
# User errors carry no source location.
expect_error "a missing file: no source location" "^strider: error: \[rank 0\] [^(]*${missing}[^(]*$" 30 \
  mpirun_n 1 "$inspect" info "$missing"

# --json [PATH]: no value or '-' prints the JSON alone on stdout (the table moves to stderr).
json_ok() { "$py" -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
for form in "--json" "--json -"; do
  # shellcheck disable=SC2086 # the form is two words
  mpirun_n 2 "$bench" --data "$work/f.h5" --steps 4 $form >"$work/bench.out" 2>"$work/bench.err" ||
    fail "bench $form: $(tail -n 3 "$work/bench.err")"
  json_ok "$work/bench.out" && grep -q "samples/s" "$work/bench.err" &&
    pass "bench $form: JSON alone on stdout, the table on stderr" ||
    fail "bench $form: stdout '$(head -c 200 "$work/bench.out")'"
done
mpirun_n 2 "$bench" --data "$work/f.h5" --steps 4 --json "$work/bench.json" >"$work/bench.out" 2>&1
json_ok "$work/bench.json" && grep -q "samples/s" "$work/bench.out" && pass "bench --json PATH: a file, the table on stdout" ||
  fail "bench --json PATH: $(cat "$work/bench.out")"
# The positional file and --json: the bare token after --json is the file when the command needs it.
"$inspect" info --json "$work/f.h5" >"$work/info1.json" 2>/dev/null
json_ok "$work/info1.json" && pass "info --json f.h5: JSON of f.h5 on stdout" || fail "info --json f.h5: $(head -c 200 "$work/info1.json")"
"$inspect" info "$work/f.h5" --json "$work/info2.json" >"$work/info2.out" 2>/dev/null
json_ok "$work/info2.json" && [[ ! -s $work/info2.out ]] && pass "info f.h5 --json out.json: the file" ||
  fail "info f.h5 --json out.json: stdout '$(head -c 200 "$work/info2.out")'"
"$inspect" info --data "$work/f.h5" --json "$work/info3.json" >/dev/null 2>&1
cmp -s "$work/info2.json" "$work/info3.json" && pass "info --data f.h5 --json PATH: the same JSON" ||
  fail "info --data differs from the positional file"
"$inspect" info "$work/f.h5" >"$work/info.txt" 2>/dev/null
"$inspect" info --data "$work/f.h5" >"$work/info-data.txt" 2>/dev/null
[[ -s $work/info.txt ]] && cmp -s "$work/info.txt" "$work/info-data.txt" && pass "info: --data and the positional file alike" ||
  fail "info --data: $(diff "$work/info.txt" "$work/info-data.txt" | head -n 4)"
"$inspect" plan --samples 12 --seed 4 --json >"$work/plan1.json"
"$inspect" plan --samples 12 --seed 4 --json "$work/plan2.json"
json_ok "$work/plan1.json" && cmp -s "$work/plan1.json" "$work/plan2.json" && pass "plan --json and --json PATH: the same plan" ||
  fail "plan --json PATH differs"

# strider-train: --json to stdout moves the epoch lines to stderr; --stats-json warns once and writes.
mpirun_n 2 "$train" --data "$work/f.h5" --epochs 1 --seed 1 --json >"$work/train.out" 2>"$work/train.err" ||
  fail "train --json: $(tail -n 3 "$work/train.err")"
json_ok "$work/train.out" && grep -q "^strider: epoch 1/1" "$work/train.err" && pass "train --json: JSON alone on stdout" ||
  fail "train --json: stdout '$(head -c 200 "$work/train.out")'"
mpirun_n 2 "$train" --data "$work/f.h5" --epochs 1 --seed 1 --stats-json "$work/stats.json" >"$work/train.out" 2>&1
expect_equal "--stats-json: one warning" "$(grep -c -- '--stats-json is the older name of --json' "$work/train.out")" 1
json_ok "$work/stats.json" && pass "--stats-json PATH still writes PATH" || fail "--stats-json wrote no JSON"
expect_error "inspect read-speed --steps -1" "--steps must be >= 0, got -1" 30 \
  mpirun_n 1 "$inspect" read-speed "$work/f.h5" --steps -1
expect_error "--json and --stats-json" "--json and --stats-json name the same output: give --json" 30 \
  mpirun_n 2 "$train" --data "$work/f.h5" --json "$work/a.json" --stats-json "$work/b.json"

# Defaults as written.
"$train" --help >"$work/train.help"
grep -qE -- "--lr arg \(=0\.1\) " "$work/train.help" && grep -qE -- "--momentum arg \(=0\.9\) " "$work/train.help" &&
  pass "--lr and --momentum defaults as written" || fail "defaults: $(grep -E -- '--lr|--momentum' "$work/train.help")"
"$bench" --help >"$work/bench.help"
for group in Input Sampling Pipeline Store Output Diagnostics; do
  grep -qE "^$group( and [a-z ]+)?:" "$work/train.help" || fail "train --help has no $group group"
  grep -qE "^$group:" "$work/bench.help" || fail "bench --help has no $group group"
done
pass "train and bench --help: grouped"
# Every option of every strider-inspect subcommand sits in one of the named groups; no app lists an
# option outside a group heading.
grouped() { # grouped FILE ALLOWED-HEADINGS-REGEX: prints the first option line outside them
  awk -v allowed="$2" '/^[A-Z][^:]*:$/ { heading = substr($0, 1, length($0) - 1); next }
    /^  -/ && heading !~ "^(" allowed ")$" { print heading ": " $0; exit }' "$1"
}
six='Input|Sampling|Pipeline|Store|Output|Diagnostics|General'
for command in plan info dump read-speed stats workloads; do
  "$inspect" "$command" --help >"$work/inspect.help" || fail "inspect $command --help exited non-zero"
  outside=$(grouped "$work/inspect.help" "$six")
  [ -z "$outside" ] && grep -qE "^(Input|Output):" "$work/inspect.help" ||
    fail "inspect $command --help: an option outside the groups: ${outside:-no Input or Output group}"
done
mpirun_n 1 "$bin/strider-sim-example" --help >"$work/sim.help" 2>&1
for help in "$bin/strider-gen" "$bin/strider-convert"; do "$help" --help; done >"$work/apps.help"
for file in "$work/train.help" "$work/bench.help" "$work/sim.help" "$work/apps.help"; do
  outside=$(grouped "$file" '[A-Z][A-Za-z ,]*')
  [ -z "$outside" ] || fail "$(basename "$file"): an option outside any group: $outside"
done
pass "inspect's subcommands, gen, convert and the sim example: every option in a named group"

# The sim example: --config FILE, the command line winning; a bad value from the file refused.
printf 'steps = 40\ntrain-every = 4\n' >"$work/sim.cfg"
mpirun_n 2 "$bin/strider-sim-example" --data "$work/f.h5" --config "$work/sim.cfg" --steps 8 >"$work/sim.out" 2>&1 ||
  fail "sim --config: $(tail -n 3 "$work/sim.out")"
grep -q "^done: 8 simulation steps, 128 samples trained" "$work/sim.out" && pass "sim --config: the file's --train-every, the command line's --steps" ||
  fail "sim --config: $(tail -n 3 "$work/sim.out")"
printf 'train-every = 0\n' >"$work/bad.cfg"
expect_error "sim --config with a bad value" "--train-every must be >= 1" 30 \
  mpirun_n 2 "$bin/strider-sim-example" --data "$work/f.h5" --config "$work/bad.cfg"

# Progress: a line every interval with --progress SECONDS; none when stderr is not a terminal.
mpirun_n 2 "$bench" --data "$work/f.h5" --epochs 2 --compute-us 10000 --compute-mode sleep --progress 0.2 \
  >"$work/bench.out" 2>"$work/progress.err" || fail "bench --progress: $(tail -n 3 "$work/progress.err")"
grep -qE "^strider: progress: epoch [12]/2, step [0-9]+/32 \([0-9]+%\), [0-9]+ samples/s, stall [0-9.]+%, ETA [0-9]+s$" \
  "$work/progress.err" && pass "bench --progress 0.2: $(grep -m1 progress "$work/progress.err")" ||
  fail "bench --progress: $(cat "$work/progress.err")"
mpirun_n 2 "$bench" --data "$work/f.h5" --epochs 2 --compute-us 2000 --compute-mode sleep >/dev/null 2>"$work/quiet.err"
expect_equal "no progress line when stderr is a file" "$(grep -c progress "$work/quiet.err")" 0
STRIDER_TEST_STEP_DELAY_US=10000 mpirun_n 2 "$train" --data "$work/f.h5" --epochs 2 --seed 1 --progress 0.2 \
  >/dev/null 2>"$work/progress.err"
grep -qE "^strider: progress: epoch [12]/2, step [0-9]+/32 " "$work/progress.err" && pass "train --progress 0.2" ||
  fail "train --progress: $(cat "$work/progress.err")"
expect_error "--progress with --no-progress" "--progress and --no-progress: give one or the other" 30 \
  mpirun_n 1 "$train" --data "$missing" --progress 1 --no-progress
expect_error "--progress 0" "--progress takes a positive number of seconds" 30 \
  mpirun_n 1 "$bench" --data "$missing" --progress 0

# Inputs of large magnitude that diverge: the error names --normalize auto.
"$py" - "$work/big.h5" <<'PY'
import sys, h5py, numpy as np
rng = np.random.default_rng(5)
labels = np.arange(1024) % 4
x = 30000 + 500 * labels[:, None] + rng.normal(0, 200, size=(1024, 16))
with h5py.File(sys.argv[1], "w") as f:
    f["samples"] = np.clip(np.rint(x), -32768, 32767).astype(np.int16)
    f["labels"] = labels.astype(np.int64)
PY
STRIDER_LOG_LEVEL=error expect_error "a divergence on unnormalized inputs" "training diverged on inputs that are not normalized \(try --normalize auto, or a lower --lr\)" 30 \
  mpirun_n 2 "$train" --data "$work/big.h5" --model softmax --lr 1e30 --seed 3
mpirun_n 2 "$train" --data "$work/big.h5" --epochs 2 --seed 3 >/dev/null 2>"$work/big.err"
expect_equal "a loss far above chance on unnormalized inputs: one warning naming --normalize auto" \
  "$(grep -c 'training diverges on inputs that are not normalized; try --normalize auto' "$work/big.err")" 1
mpirun_n 2 "$train" --data "$work/big.h5" --epochs 2 --seed 3 --normalize auto --json "$work/big.json" >/dev/null 2>&1
expect_at_least "the same file with --normalize auto trains" "$(json_number "$work/big.json" eval_accuracy)" 0.9
finish
