#!/usr/bin/env bash
# strider-bench end to end: the JSON contract (job and per-rank keys), sample counts that follow from
# the sampler, the auto prefetch depth, labels read per batch unless the sampler needs them, and the
# three step emulations. No timing is asserted (performance lives in scripts/bench/compare.sh).
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
bench=$STRIDER_BIN/strider-bench
export STRIDER_LOG_LEVEL=warn

# 5,000 rows of 8 float32 (32 bytes), 5 classes; and one whose labels are chunked (held in memory).
mpirun_n 2 "$gen" --kind features --classes 5 --samples 5000 --dim 8 --seed 3 --out "$work/f.h5" --no-progress >/dev/null
mpirun_n 2 "$gen" --kind sequences --classes 2 --samples 400 --min-len 4 --max-len 64 --median-len 16 --seed 3 \
  --out "$work/s.h5" --no-progress >/dev/null

# planned DATA WORLD SAMPLER-OPTIONS...: the samples strider-inspect plans for epoch 0, all ranks.
planned() {
  local data=$1 world=$2 total=0 rank
  shift 2
  for ((rank = 0; rank < world; rank++)); do
    total=$((total + $("$STRIDER_BIN/strider-inspect" plan --data "$data" --world "$world" --rank $rank "$@" 2>/dev/null | wc -w)))
  done
  echo $total
}

# Distributed, 2 ranks, 2 epochs: 2 x 5,000 samples, each rank 2 x 2,500.
mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --epochs 2 --json "$work/d.json" >"$work/d.txt" 2>&1 ||
  fail "distributed run: $(tail -n 3 "$work/d.txt")"
for key in samples_per_s bytes_per_s stall_fraction time_to_first_batch_s read_amplification peak_rss_bytes; do
  expect_equal "job key $key" "$(sed 's/"ranks".*//' "$work/d.json" | grep -o "\"$key\":" | wc -l | tr -d ' ')" 1
  expect_equal "per-rank key $key, 2 ranks" "$(grep -o "\"$key\":" "$work/d.json" | wc -l | tr -d ' ')" 3
done
expect_equal "samples, 2 epochs" "$(json_number "$work/d.json" samples)" 10000
expect_equal "useful bytes" "$(json_number "$work/d.json" useful_bytes)" 320000
expect_equal "ranks listed" "$(grep -o '"rank":[0-9]*' "$work/d.json" | tr '\n' ' ')" '"rank":0 "rank":1 '
expect_equal "per-rank samples" "$(grep -o '"samples":[0-9]*' "$work/d.json" | tail -n 2 | cut -d: -f2 | tr '\n' ' ')" "5000 5000 "
expect_at_least "stall fraction >= 0" "$(json_number "$work/d.json" stall_fraction)" 0
expect_at_most "stall fraction <= 1" "$(json_number "$work/d.json" stall_fraction)" 1
expect_at_least "samples/s > 0" "$(json_number "$work/d.json" samples_per_s)" 1
expect_equal "mmap reads only useful bytes" "$(json_number "$work/d.json" read_amplification)" 1
# 64 rows x 32 bytes = 2 KiB per batch: 16 MiB of them is more than 64, so the cap.
expect_equal "auto prefetch depth" "$(json_number "$work/d.json" prefetch)" 64
expect_equal "distributed reads labels per batch" "$(grep -o '"labels_per_batch":[a-z]*' "$work/d.json")" '"labels_per_batch":true'
grep -q "total .* samples/s" "$work/d.txt" || fail "no total line in the table"

# An explicit depth, and a sampler that needs every label (held in memory).
mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --sampler balanced --prefetch 3 --json "$work/b.json" \
  >"$work/b.txt" 2>&1 || fail "balanced run: $(tail -n 3 "$work/b.txt")"
expect_equal "explicit prefetch depth" "$(json_number "$work/b.json" prefetch)" 3
expect_equal "balanced holds the labels" "$(grep -o '"labels_per_batch":[a-z]*' "$work/b.json")" '"labels_per_batch":false'
expect_equal "balanced: the planned samples" "$(json_number "$work/b.json" samples)" \
  "$(planned "$work/f.h5" 2 --sampler balanced --batch-size 64)"

# Streaming with --steps: exactly steps x batch x ranks samples; a file read without labels.
mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 32 --sampler streaming --steps 10 --label-key /none \
  --json "$work/st.json" >"$work/st.txt" 2>&1 || fail "streaming run: $(tail -n 3 "$work/st.txt")"
expect_equal "streaming, 10 steps" "$(json_number "$work/st.json" samples)" 640
expect_equal "no labels dataset: nothing per batch" "$(grep -o '"labels_per_batch":[a-z]*' "$work/st.json")" \
  '"labels_per_batch":false'

# Sequences, bucketed by tokens: the planned samples (each row once, plus padding to equal step counts).
mpirun_n 2 "$bench" --data "$work/s.h5" --sampler bucketed --max-tokens 512 --json "$work/bu.json" >"$work/bu.txt" 2>&1 ||
  fail "bucketed run: $(tail -n 3 "$work/bu.txt")"
expect_equal "bucketed: the planned samples" "$(json_number "$work/bu.json" samples)" \
  "$(planned "$work/s.h5" 2 --sampler bucketed --max-tokens 512)"
expect_at_least "bucketed: every sequence at least once" "$(json_number "$work/bu.json" samples)" 400

# The three step emulations run and are recorded.
for mode in busy sleep work; do
  mpirun_n 1 "$bench" --data "$work/f.h5" --batch-size 256 --compute-us 100 --compute-mode $mode --json "$work/c-$mode.json" \
    >"$work/c.txt" 2>&1 || fail "compute mode $mode: $(tail -n 3 "$work/c.txt")"
  expect_equal "compute mode $mode recorded" "$(json_number "$work/c-$mode.json" compute_us)" 100
  expect_equal "compute mode $mode: one epoch" "$(json_number "$work/c-$mode.json" samples)" 5000
done
finish
