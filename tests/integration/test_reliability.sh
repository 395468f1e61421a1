#!/usr/bin/env bash
# Reliability of strider-train and strider-bench: a bad-input matrix, one failing rank, a killed rank,
# a hung step (watchdog), a file changed during training (appended, truncated, rewritten), a rank
# killed while writing a checkpoint, corrupted and truncated checkpoints; strider-gen's collective
# write failing on one rank.
# Every case: non-zero exit on every rank, the first stderr line 'strider: error: ...' once, in seconds.
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
train=$STRIDER_BIN/strider-train
bench=$STRIDER_BIN/strider-bench
unusable=$STRIDER_TEST_DATA_DIR/unusable.h5  # /samples [4,2], /labels [4], /labels_short [3], /half float16, /names strings, /empty [0,2]
export STRIDER_LOG_LEVEL=warn
mpi2=("$STRIDER_MPIEXEC" --bind-to none -np 2)
mpi4=("$STRIDER_MPIEXEC" --bind-to none -np 4)

mpirun_n 2 "$gen" --kind features --classes 3 --samples 2000 --dim 8 --seed 1 --out "$work/f.h5" --no-progress >/dev/null
mpirun_n 2 "$gen" --kind sequences --classes 2 --samples 300 --min-len 8 --max-len 400 --median-len 50 --seed 1 \
  --out "$work/s.h5" --no-progress >/dev/null
mpirun_n 1 "$gen" --kind features --classes 2 --samples 3 --dim 2 --out "$work/three.h5" --no-progress >/dev/null
echo "not an HDF5 file" >"$work/text.h5"
head -c 3000 "$work/f.h5" >"$work/truncated.h5"

# The bad-input matrix, for both apps that read training data.
for app in train bench; do
  run=("${mpi2[@]}" "$STRIDER_BIN/strider-$app")
  ok=(--data "$work/f.h5" --batch-size 16 --seed 1)
  expect_error "$app: missing file" "cannot open $work/nope.h5" 30 "${run[@]}" --data "$work/nope.h5" --batch-size 16
  expect_error "$app: not HDF5" "not an HDF5 file" 30 "${run[@]}" --data "$work/text.h5" --batch-size 16
  expect_error "$app: truncated file" "truncated.h5" 30 "${run[@]}" --data "$work/truncated.h5" --batch-size 16
  expect_error "$app: missing dataset" "no dataset /nope" 30 "${run[@]}" "${ok[@]}" --data-key /nope
  expect_error "$app: prefetch depth out of range" "--prefetch must be in 0..64" 30 "${run[@]}" "${ok[@]}" --prefetch 65
  expect_error "$app: labels of another length" "labels /labels_short has 3 entries but there are 4 samples" 30 \
    "${run[@]}" --data "$unusable" --label-key /labels_short --batch-size 2
  expect_error "$app: unsupported type" "unsupported type" 30 "${run[@]}" --data "$unusable" --data-key /names --batch-size 2
  expect_error "$app: empty dataset" "/empty is empty" 30 "${run[@]}" --data "$unusable" --data-key /empty --batch-size 2
  expect_error "$app: offsets past the end of the tokens" "past the end of /labels" 30 \
    "${run[@]}" --data "$work/s.h5" --tokens-key /labels --batch-size 4
  expect_error "$app: unknown sampler" "unknown sampler" 30 "${run[@]}" "${ok[@]}" --sampler nope
  expect_error "$app: negative batch size" "batch-size" 30 "${run[@]}" "${ok[@]/16/-4}"
  expect_error "$app: NaN class weight" "weight" 30 "${run[@]}" "${ok[@]}" --sampler weighted --class-weights 1,nan,1
  expect_error "$app: negative class weight" "weight" 30 "${run[@]}" "${ok[@]}" --sampler weighted --class-weights 1,-2,1
  expect_error "$app: stratified batch below the class count" "class" 30 "${run[@]}" "${ok[@]/16/2}" --sampler stratified
  expect_error "$app: token budget below the longest sequence" "max.tokens|longer than" 30 \
    "${run[@]}" --data "$work/s.h5" --sampler bucketed --max-tokens 100
  expect_error "$app: unknown option" "unrecognised|unrecognized" 30 "${run[@]}" "${ok[@]}" --frobnicate
done
expect_error "train: more ranks than samples" "fewer than the 4 ranks" 30 "${mpi4[@]}" "$train" --data "$work/three.h5" --batch-size 1
expect_error "bench: bad compute mode" "--compute-mode" 30 "${mpi2[@]}" "$bench" --data "$work/f.h5" --compute-mode spin
expect_error "train: a model for the other kind of data names the file" \
  "the bag model needs token sequences, but $work/f.h5 holds fixed-size samples" 30 \
  "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --model bag

# One rank's I/O fails: every rank stops within seconds with that rank's reason.
expect_error "train: I/O error on rank 1 only" "\[rank 1\] pread failed reading step 5: injected" 30 \
  env STRIDER_TEST_FAIL_READ=1:5 "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --seed 1
expect_error "bench: I/O error on rank 0 only" "\[rank 0\] pread failed reading step 3: injected" 30 \
  env STRIDER_TEST_FAIL_READ=0:3 "${mpi2[@]}" "$bench" --data "$work/f.h5" --batch-size 16

# One rank's collective HDF5 write fails in strider-gen (the others are inside that write, where no
# agreement reaches them): the job ends within seconds with that rank's reason.
expect_error "gen: HDF5 write error on rank 1 only" \
  "\[rank 1\] H5Dwrite failed writing /samples rows 1000\.\.2000 \(injected: STRIDER_TEST_FAIL_WRITE\).*aborting the job" \
  30 env STRIDER_TEST_FAIL_WRITE=1:0 "${mpi2[@]}" "$gen" --kind features --classes 3 --samples 2000 --dim 8 --seed 1 \
  --out "$work/failed.h5" --no-progress
expect_error "gen: HDF5 write error on rank 0 only (sequences)" \
  "\[rank 0\] H5Dwrite failed writing /tokens rows 0\.\.[0-9]+ \(injected: STRIDER_TEST_FAIL_WRITE\)" 30 \
  env STRIDER_TEST_FAIL_WRITE=0:0 "${mpi2[@]}" "$gen" --kind sequences --classes 2 --samples 300 --min-len 8 \
  --max-len 400 --median-len 50 --seed 1 --out "$work/failed.h5" --no-progress

# A hung step: the watchdog ends the job, naming the rank and the step.
expect_error "watchdog" "\[rank [01]\] step [0-9]+ of epoch 0 did not finish within 2 s \(--step-timeout-s\)" 40 \
  env STRIDER_TEST_HANG_AT=1:4 "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --step-timeout-s 2

# A rank killed with SIGKILL: the job ends instead of hanging.
STRIDER_TEST_STEP_DELAY_US=20000 "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --epochs 50 \
  --trace-samples "$work/kill" >/dev/null 2>"$work/kill.err" &
launcher=$!
victim=""
find_victim() {
  victim=$(pgrep -f "strider-train --data $work/f.h5" | while read -r pid; do
    [[ $(ps -o comm= -p "$pid") == strider-train ]] && echo "$pid"; done | tail -n 1)
  [[ -n $victim ]]
}
traced_steps() { [[ -f $1 ]] && (($(wc -l <"$1") >= $2)); }
# Killed once both ranks train: rank 1 has traced a few steps.
wait_until 30 find_victim || fail "SIGKILL of one rank: no strider-train process appeared within 30 s"
wait_until 30 traced_steps "$work/kill.rank1" 5 || fail "SIGKILL of one rank: no step was traced within 30 s"
start=$SECONDS
kill -9 "$victim"
( sleep 30; kill -9 $launcher 2>/dev/null ) &
guard=$!
wait $launcher
status=$?
kill $guard 2>/dev/null
if ((status != 0 && SECONDS - start < 25)); then pass "SIGKILL of one rank ended the job in $((SECONDS - start)) s (exit $status)"
else fail "SIGKILL of one rank: exit $status after $((SECONDS - start)) s"; fi

# The training file changes during an epoch: refused at the next epoch, on size alone and on
# modification time alone. change_during_training NAME CHANGE: trains on $work/NAME.h5 (a copy of
# f.h5 with 4096 bytes appended, which HDF5 ignores, so that truncating them leaves a readable file)
# and runs CHANGE FILE once the first epoch has been traced.
change_during_training() {
  local name=$1 change=$2
  cp "$work/f.h5" "$work/$name.h5"
  head -c 4096 /dev/zero >>"$work/$name.h5"
  STRIDER_TEST_STEP_DELAY_US=2000 "${mpi2[@]}" "$train" --data "$work/$name.h5" --batch-size 16 --seed 1 --epochs 50 \
    --trace-samples "$work/$name" >/dev/null 2>"$work/$name.err" &
  local launcher=$!
  for _ in $(seq 1 300); do  # change the file once the first epoch is under way
    [[ -f $work/$name.rank0 ]] && (($(wc -l <"$work/$name.rank0") >= 10)) && break
    sleep 0.05
  done
  local before_size before_mtime
  before_size=$(stat -c %s "$work/$name.h5")
  before_mtime=$(stat -c %y "$work/$name.h5")
  "$change" "$work/$name.h5"
  local after_size after_mtime
  after_size=$(stat -c %s "$work/$name.h5")
  after_mtime=$(stat -c %y "$work/$name.h5")
  wait $launcher
  local status=$? first epochs
  first=$(head -n 1 "$work/$name.err")
  epochs=$(awk '{ print $1 }' "$work/$name.rank0" | sort -un | wc -l)
  if ((status != 0)) && [[ $first == "strider: error: "*"changed during training"* ]] && ((epochs < 50)); then
    pass "$name (size $before_size -> $after_size, mtime $before_mtime -> $after_mtime): refused after $epochs epochs: $first"
  else
    fail "$name (size $before_size -> $after_size, mtime $before_mtime -> $after_mtime): exit $status after $epochs epochs, '$first'"
  fi
}
# Appended to or truncated with the modification time put back: only the size differs.
append_same_mtime() { touch -r "$1" "$1.stamp" && head -c 512 /dev/zero >>"$1" && touch -r "$1.stamp" "$1"; }
truncate_same_mtime() { touch -r "$1" "$1.stamp" && truncate -s -4096 "$1" && touch -r "$1.stamp" "$1"; }
# Rewritten in place with the same bytes: only the modification time differs.
rewrite_same_size() { sleep 0.01 && dd if="$1" of="$1" bs=4096 count=1 conv=notrunc status=none; }
change_during_training appended append_same_mtime
change_during_training truncated truncate_same_mtime
change_during_training rewritten rewrite_same_size

# Truncated under the mmap engine in the middle of an epoch: the next page read past the new end
# raises SIGBUS; the rank prints one line naming the mapped bytes and dies of the signal (not a bare
# "Bus error"), and the job ends. A truncation that lands just before an epoch's start is found by
# the check of the file's size first ("changed during training"): one line and an error exit too.
cp "$work/f.h5" "$work/mapped.h5"
STRIDER_TEST_READ_DELAY_US=20000 "$STRIDER_MPIEXEC" --bind-to none -np 1 "$bench" --data "$work/mapped.h5" \
  --engine mmap --batch-size 16 --epochs 20 >/dev/null 2>"$work/mapped.err" &
launcher=$!
# Truncated once the rank has mapped the file and is reading through the mapping.
mapped() { pgrep -f "strider-bench --data $work/mapped.h5" | while read -r pid; do
  grep -q "$work/mapped.h5" "/proc/$pid/maps" 2>/dev/null && echo "$pid"; done | grep -q .; }
wait_until 30 mapped || fail "truncated under mmap: the file was not mapped within 30 s"
truncate -s 4096 "$work/mapped.h5"
status=0
timeout 30 tail --pid=$launcher -f /dev/null || status=124
wait $launcher || status=$?
first=$(head -n 1 "$work/mapped.err")
if ((status != 0 && status != 124)) &&
  [[ $first == "strider: error: "*" of $work/mapped.h5 could not be read through its mapping (SIGBUS): "* ||
    $first == "strider: error: "*"$work/mapped.h5 changed during training"* ]]; then
  pass "truncated under mmap (exit $status): $first"
else
  fail "truncated under mmap: exit $status, '$first'"
fi

# A rank killed while it writes a checkpoint (rank 0 writes them): the previous checkpoint stays
# usable, and resuming from it gives the uninterrupted run's samples. Checkpoints every 50 steps
# (63 steps per epoch), the second one (epoch 1, step 37) killed halfway through its temporary file.
checkpointed=(--data "$work/f.h5" --batch-size 16 --seed 1 --epochs 3 --checkpoint-every 50)
mpirun_n 2 "$train" "${checkpointed[@]}" --checkpoint "$work/uncut.ckpt" --trace-samples "$work/uncut" >/dev/null
STRIDER_TEST_KILL_IN_CHECKPOINT=2 timeout -k 5 60 "${mpi2[@]}" "$train" "${checkpointed[@]}" --checkpoint "$work/killed.ckpt" \
  --trace-samples "$work/killed" >/dev/null 2>&1
status=$?
partial=$(ls "$work"/killed.ckpt.tmp.* 2>/dev/null | head -n 1)
if ((status != 0 && status != 75 && status != 124)) && [[ -f $work/killed.ckpt && -n $partial ]] &&
  (($(stat -c %s "$partial") < $(stat -c %s "$work/killed.ckpt"))); then
  pass "rank 0 killed mid-checkpoint (exit $status): $(stat -c %s "$partial") of $(stat -c %s "$work/killed.ckpt") bytes written"
else
  fail "killed mid-checkpoint: exit $status, checkpoint $(ls "$work"/killed.ckpt* 2>/dev/null | tr '\n' ' ')"
fi
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" "${checkpointed[@]}" --checkpoint "$work/killed.ckpt" --resume \
  --trace-samples "$work/killed" >"$work/killed.out" 2>&1
expect_equal "resumed from the previous checkpoint" "$(grep -o 'resumed from .* at epoch [0-9]* step [0-9]*' "$work/killed.out" | grep -o 'epoch.*')" "epoch 0 step 50"
for rank in 0 1; do
  cmp -s "$work/uncut.rank$rank" "$work/killed.rank$rank" && pass "rank $rank: resumed trace equals the uninterrupted one" ||
    fail "rank $rank: trace after the resume differs from the uninterrupted run"
done

# Re-weighting, then a crash after the epoch-end checkpoint: that checkpoint holds the new class
# weights and resumes at the next epoch's first step, so the resumed run re-weights once, exactly as
# the uninterrupted run did (resuming at the epoch's end would evaluate and re-weight a second time).
reweighted=(--data "$work/f.h5" --batch-size 16 --seed 1 --epochs 3 --sampler weighted --reweight-every 1)
mpirun_n 2 "$train" "${reweighted[@]}" --checkpoint "$work/rw-uncut.ckpt" --trace-samples "$work/rw-uncut" >/dev/null
STRIDER_TEST_KILL_IN_CHECKPOINT=2 timeout -k 5 60 "${mpi2[@]}" "$train" "${reweighted[@]}" --checkpoint "$work/rw.ckpt" \
  --trace-samples "$work/rw" >/dev/null 2>&1
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" "${reweighted[@]}" --checkpoint "$work/rw.ckpt" --resume \
  --trace-samples "$work/rw" >"$work/rw.out" 2>&1
expect_equal "re-weighted run resumed at the next epoch's start" \
  "$(grep -o 'resumed from .* at epoch [0-9]* step [0-9]*' "$work/rw.out" | grep -o 'epoch.*')" "epoch 1 step 0"
for rank in 0 1; do
  cmp -s "$work/rw-uncut.rank$rank" "$work/rw.rank$rank" && pass "rank $rank: re-weighted resumed trace equals the uninterrupted one" ||
    fail "rank $rank: re-weighted trace after the resume differs from the uninterrupted run"
done

# Checkpoints: a corrupted or truncated one is refused with one line, the good one still resumes.
mpirun_n 2 "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --epochs 1 --checkpoint "$work/good.ckpt" >/dev/null
size=$(stat -c %s "$work/good.ckpt")
cp "$work/good.ckpt" "$work/flipped.ckpt"
printf '\xff' | dd of="$work/flipped.ckpt" bs=1 seek=$((size / 2)) conv=notrunc status=none
head -c $((size - 100)) "$work/good.ckpt" >"$work/short.ckpt"
expect_error "corrupted checkpoint" "corrupted \(checksum mismatch\)" 30 \
  "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --epochs 2 --checkpoint "$work/flipped.ckpt" --resume
expect_error "truncated checkpoint" "truncated" 30 \
  "${mpi2[@]}" "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --epochs 2 --checkpoint "$work/short.ckpt" --resume
mpirun_n 2 "$train" --data "$work/f.h5" --batch-size 16 --seed 1 --epochs 2 --checkpoint "$work/good.ckpt" --resume >/dev/null
expect_equal "the intact checkpoint still resumes" "$?" 0
finish
