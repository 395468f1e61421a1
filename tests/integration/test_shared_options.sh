#!/usr/bin/env bash
# ctest-label: plain-only
# The options several apps share come from one table in the library: every app lists them with the
# same help, refuses a bad value with the same line (exit 2), and reads them from --config FILE; and
# strider-inspect read-speed, which reads through the Loader without its I/O thread, keeps its
# output line and counts.
source "$(dirname "$0")/common.sh"
export STRIDER_LOG_LEVEL=warn
inspect=$STRIDER_BIN/strider-inspect bench=$STRIDER_BIN/strider-bench train=$STRIDER_BIN/strider-train

# help_of OPTION HELP_FILE: the option's help text without its default, its spaces removed (Boost
# wraps it at a width that depends on the app's longest option, sometimes inside a word).
help_of() {
  awk -v option="--$1" '
    /^  -/ && $1 == option { on = 1; sub(/^ *--[^ ]+( arg( \(=[^)]*\))?)? */, ""); text = $0; next }
    on && /^          +[^ -]/ { text = text $0; next }
    { on = 0 }
    END { gsub(/ /, "", text); print text }' "$2"
}
"$bench" --help >"$work/bench.help"
"$train" --help >"$work/train.help"
"$inspect" read-speed --help >"$work/read-speed.help"
"$inspect" plan --help >"$work/plan.help"
for option in sampler batch-size no-shuffle class-weights block-window seed data-key engine prefetch copy-threads io-thread; do
  reference=$(help_of $option "$work/bench.help")
  [[ -n $reference ]] || fail "strider-bench --help lists no --$option"
  for app in train read-speed plan; do
    text=$(help_of $option "$work/$app.help")
    [[ -z $text ]] && continue # not every app takes every shared option
    expect_equal "--$option: the same help in $app as in strider-bench" "$text" "$reference"
  done
done
expect_equal "--seed in strider-train: no default" "$(grep -c -- '--seed arg (=' "$work/train.help")" 0
expect_equal "--seed in strider-bench: 0" "$(grep -c -- '--seed arg (=0)' "$work/bench.help")" 1
for app in bench train read-speed plan; do
  expect_equal "--batch-size in $app: 32" "$(grep -c -- '--batch-size arg (=32)' "$work/$app.help")" 1
done

mpirun_n 1 "$STRIDER_BIN/strider-gen" --kind features --classes 3 --samples 600 --dim 8 --seed 2 --out "$work/f.h5" \
  --no-progress >/dev/null

# A bad value: the same line from every app, exit 2.
invalid="the argument \('abc'\) for option '--batch-size' is invalid"
expect_error "bench: --batch-size abc" "$invalid" 30 mpirun_n 1 "$bench" --data "$work/f.h5" --batch-size abc
expect_error "train: --batch-size abc" "$invalid" 30 mpirun_n 1 "$train" --data "$work/f.h5" --batch-size abc
expect_error "plan: --batch-size abc" "$invalid" 30 "$inspect" plan --samples 10 --batch-size abc
expect_error "read-speed: --batch-size abc" "$invalid" 30 mpirun_n 1 "$inspect" read-speed "$work/f.h5" --batch-size abc
for app in bench train; do
  expect_error "strider-$app: --prefetch 65" "--prefetch must be in 0..64 \(0: auto\), got 65" 30 \
    mpirun_n 1 "$STRIDER_BIN/strider-$app" --data "$work/f.h5" --prefetch 65
done
expect_error "strider-bench: --io-thread maybe" "unknown --io-thread value 'maybe' \\(known: auto, yes, no\\)$" 30 \
  mpirun_n 1 "$bench" --data "$work/f.h5" --io-thread maybe
expect_error "read-speed: --copy-threads 0" "--copy-threads must be >= 1, got 0" 30 \
  mpirun_n 2 "$inspect" read-speed "$work/f.h5" --copy-threads 0

# Ranks given different command lines (an MPMD launch): refused by strider-bench and strider-gen as by
# strider-train (test_train.sh), one line naming the first rank that differs from rank 0 and both
# command lines, before anything is read or written.
expect_error "strider-bench: ranks given different options" \
  "the command line is '--data $work/f.h5 --batch-size 16' on rank 2 but '--data $work/f.h5 --batch-size 8' on rank 0: every rank must be given the same options" \
  30 "$STRIDER_MPIEXEC" --bind-to none -np 2 "$bench" --data "$work/f.h5" --batch-size 8 : \
  -np 1 "$bench" --data "$work/f.h5" --batch-size 16
expect_error "strider-gen: ranks given different options" \
  "the command line is '--kind features --samples 200 --out $work/g.h5' on rank 1 but '--kind features --samples 100 --out $work/g.h5' on rank 0" \
  30 "$STRIDER_MPIEXEC" --bind-to none -np 1 "$STRIDER_BIN/strider-gen" --kind features --samples 100 --out "$work/g.h5" : \
  -np 1 "$STRIDER_BIN/strider-gen" --kind features --samples 200 --out "$work/g.h5"
[[ -e $work/g.h5 ]] && fail "strider-gen refused but wrote $work/g.h5" || pass "strider-gen refused before writing"

# --batch-size: 32 unless given; the whole epoch as one batch only when asked for by name.
mpirun_n 1 "$train" --data "$work/f.h5" --seed 1 --json "$work/default.json" >/dev/null 2>&1
expect_equal "train without --batch-size: batches of 32 (600 rows: 19 steps)" "$(json_number "$work/default.json" steps)" 19
mpirun_n 1 "$train" --data "$work/f.h5" --seed 1 --batch-size all --json "$work/all.json" >/dev/null 2>&1
expect_equal "train --batch-size all: one step" "$(json_number "$work/all.json" steps)" 1
expect_error "train: --batch-size 0" "--batch-size must be >= 1, or 'all' for one batch of the whole epoch; got 0" 30 \
  mpirun_n 1 "$train" --data "$work/f.h5" --batch-size 0
expect_equal "plan --batch-size all: one batch" \
  "$("$inspect" plan --samples 40 --batch-size all --json | grep -o '"batches":\[\[[^]]*\]\]' | grep -c '\],\[')" 0

# --config FILE sets shared options as the command line does (which wins).
printf 'batch-size = 7\nseed = 5\nsampler = streaming\n' >"$work/plan.cfg"
expect_equal "plan --config" "$("$inspect" plan --samples 40 --config "$work/plan.cfg" --json)" \
  "$("$inspect" plan --samples 40 --batch-size 7 --seed 5 --sampler streaming --json)"
expect_equal "plan: the command line wins over --config" \
  "$("$inspect" plan --samples 40 --config "$work/plan.cfg" --seed 6 --json)" \
  "$("$inspect" plan --samples 40 --batch-size 7 --seed 6 --sampler streaming --json)"

# read-speed: its line, and counts that follow from the plan (2 ranks x 5 steps x 32 samples).
pattern='^strider: read-speed (mmap|direct per-row): 2 ranks, 320 samples in [0-9.]+ s = [0-9]+ samples/s, [0-9.]+ MB/s '
pattern+='useful, read/useful 1\.00, [0-9.]+ read calls per batch, [0-9]+ samples per CPU-second$'
for engine in "mmap" "direct --per-row"; do
  line=$(mpirun_n 2 "$inspect" read-speed "$work/f.h5" --batch-size 32 --steps 5 --engine $engine)
  [[ $line =~ $pattern ]] && pass "read-speed --engine $engine: $line" || fail "read-speed --engine $engine: '$line'"
done
# One read per row: as many read calls per batch as rows.
expect_equal "read-speed --per-row: a read call per row" "$(sed -E 's/.* ([0-9.]+) read calls per batch.*/\1/' <<<"$line")" 32.0
line=$(mpirun_n 1 "$inspect" read-speed "$work/f.h5" --batch-size 50 --steps 0)
expect_equal "read-speed --steps 0: nothing read" "$(sed -E 's/.*: 1 ranks, ([0-9]+) samples in.*/\1/' <<<"$line")" 0
finish
