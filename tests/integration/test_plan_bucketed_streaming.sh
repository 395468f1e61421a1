#!/usr/bin/env bash
# strider-inspect plan for the bucketed, streaming and block samplers: stats, huge N, bad options.
source "$(dirname "$0")/common.sh"
inspect=$STRIDER_BIN/strider-inspect
lognormal=lognormal:median=128,min=8,max=2048

# Bucketed: the documented figures on the fixed seed (deterministic numbers, not timings).
stats=$($inspect plan --sampler bucketed --max-tokens 16384 --megabatch 64 --world 4 --samples 100000 \
  --lengths "$lognormal" --stats)
expect_equal "stats keys" "$(grep -o '"padding_efficiency":[0-9.]*,"step_imbalance":[0-9.]*' <<<"$stats" | wc -l)" "1"
value() { grep -o "\"$1\":[0-9.e+-]*" <<<"$stats" | cut -d: -f2; }
expect_equal "padding efficiency >= 0.9" "$(awk -v x="$(value padding_efficiency)" 'BEGIN{print (x >= 0.9)}')" "1"
expect_equal "step imbalance <= 1.1" "$(awk -v x="$(value step_imbalance)" 'BEGIN{print (x <= 1.1)}')" "1"
expect_equal "random batches <= 0.5" "$(awk -v x="$(value random_padding_efficiency)" 'BEGIN{print (x <= 0.5)}')" "1"
# Lengths from a sequence dataset (--data: the reader's offsets).
"$STRIDER_BIN/strider-gen" --kind sequences --samples 2000 --min-len 8 --max-len 512 --out "$work/seq.h5" >/dev/null
stats=$($inspect plan --data "$work/seq.h5" --sampler bucketed --max-tokens 4096 --world 4 --stats 2>/dev/null)
expect_equal "--data lengths: padding efficiency >= 0.9" "$(awk -v x="$(value padding_efficiency)" 'BEGIN{print (x >= 0.9)}')" "1"
expect_equal "--data lengths: 2000 samples" "$($inspect plan --data "$work/seq.h5" --sampler bucketed --max-tokens 4096 \
  --world 1 2>/dev/null | tr ' ' '\n' | sort -n | uniq | wc -l)" "2000"
# Every rank runs the same number of steps; all ranks together cover every sample.
plan=$($inspect plan --sampler bucketed --max-tokens 2048 --samples 500 --lengths "$lognormal" --world 3 --all-ranks --seed 4)
expect_equal "bucketed covers every sample" "$(cut -d: -f2 <<<"$plan" | tr ' ' '\n' | grep -v '^$' | sort -n | uniq | wc -l)" "500"
steps=$(for rank in 0 1 2; do
  $inspect plan --sampler bucketed --max-tokens 2048 --samples 500 --lengths "$lognormal" --world 3 --rank $rank --seed 4 --json |
    grep -o '\],\[' | wc -l
done | sort -u | wc -l)
expect_equal "bucketed equal steps" "$steps" "1"

# Streaming: 10 billion samples answer at once, with little memory.
start=$(date +%s%N)
out=$(/usr/bin/time -f "%M" -o "$work/rss" $inspect plan --sampler streaming --samples 10000000000 --rank 3 --world 8 \
  --batch-size 4 --first-step 1000000 --steps 3 --json)
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
expect_equal "streaming 1e10: 3 batches of 4" "$(grep -o '"batches":\[\[[0-9,]*\],\[[0-9,]*\],\[[0-9,]*\]\]' <<<"$out" | tr -cd ',' | wc -c)" "11"
# The time bound holds for a normal build; a sanitizer build (STRIDER_SANITIZE, set by ctest) runs
# several times slower, so there the bound is skipped (the memory bound below still holds).
if [[ -n ${STRIDER_SANITIZE:-} ]]; then
  echo "skipped: streaming 1e10 under 2 s: a time bound, not asserted with STRIDER_SANITIZE=$STRIDER_SANITIZE (took ${elapsed_ms} ms)"
else
  expect_equal "streaming 1e10 under 2 s" "$((elapsed_ms < 2000))" "1"
fi
expect_equal "streaming 1e10 under 100 MB" "$(($(cat "$work/rss") < 100000))" "1"
# Streaming covers [0, N) exactly (padded by wrapping) and is deterministic.
all=$($inspect plan --sampler streaming --samples 1000 --world 3 --all-ranks --seed 9 --epoch 2 | cut -d: -f2 | tr ' ' '\n' | grep -v '^$')
expect_equal "streaming coverage" "$(sort -n <<<"$all" | uniq | wc -l) $(wc -l <<<"$all")" "1000 1002"
expect_equal "streaming deterministic" "$($inspect plan --sampler streaming --samples 1000 --rank 1 --world 3 --seed 9)" \
  "$($inspect plan --sampler streaming --samples 1000 --rank 1 --world 3 --seed 9)"
expect_equal "streaming no-shuffle is the distributed order" \
  "$($inspect plan --sampler streaming --samples 10 --world 3 --rank 1 --no-shuffle)" "1 4 7 0"

# Block: whole blocks per rank, exact coverage; no shuffle gives contiguous ranges.
all=$($inspect plan --sampler block --block-size 4 --block-window 2 --samples 30 --world 2 --all-ranks --seed 1 | cut -d: -f2 |
  tr ' ' '\n' | grep -v '^$')
expect_equal "block coverage" "$(sort -n <<<"$all" | uniq | wc -l) $(wc -l <<<"$all")" "30 30"
expect_equal "block no shuffle" "$($inspect plan --sampler block --block-size 4 --samples 10 --world 2 --rank 1 --no-shuffle)" "5 6 7 8 9"
expect_equal "block 1e12 answers" "$($inspect plan --sampler block --block-size 4096 --samples 1000000000000 --world 8 --rank 7 \
  --batch-size 2 --first-step 10000000 --steps 1 --json | grep -c '"batches":\[\[[0-9]*,[0-9]*\]\]')" "1"
expect_error "block without block size" "block_size must be >= 1" 10 $inspect plan --sampler block --samples 10

expect_error "bucketed without lengths" "needs per-sample lengths" 10 $inspect plan --sampler bucketed --max-tokens 100 --samples 10
expect_error "bucketed without max tokens" "max_tokens must be > 0" 10 \
  $inspect plan --sampler bucketed --samples 10 --lengths "$lognormal"
expect_error "sample longer than max tokens" "sample [0-9]+ has length [0-9]+, longer than max_tokens 100" 10 \
  $inspect plan --sampler bucketed --max-tokens 100 --samples 1000 --lengths "$lognormal"
expect_error "multiple too large" "batch_size_multiple 64" 10 \
  $inspect plan --sampler bucketed --max-tokens 4096 --batch-size-multiple 64 --samples 1000 --lengths "$lognormal"
expect_error "bad lengths spec" "unknown distribution 'gamma'" 10 \
  $inspect plan --sampler bucketed --max-tokens 4096 --samples 10 --lengths gamma:min=1,max=2
expect_error "lengths spec missing max" "missing max=" 10 \
  $inspect plan --sampler bucketed --max-tokens 4096 --samples 10 --lengths lognormal:median=5,min=1
expect_error "stats without lengths" "--stats needs per-sample lengths" 10 $inspect plan --samples 10 --stats
expect_error "max tokens not a number" "max-tokens" 10 $inspect plan --sampler bucketed --max-tokens lots --samples 10
finish
