#!/usr/bin/env bash
# strider-train at 2 ranks on generated data: learning, minority recall by sampler, exact evaluation,
# checkpoints, preemption by signal with a trace-identical resume, and resume at another world size.
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
train=$STRIDER_BIN/strider-train
export STRIDER_LOG_LEVEL=warn

# 1. A balanced features set is learned.
mpirun_n 2 "$gen" --kind features --classes 4 --samples 4000 --dim 16 --seed 1 --out "$work/balanced.h5" --no-progress >/dev/null
mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 3 --batch-size 32 --seed 3 --json "$work/balanced.json" >"$work/balanced.out"
expect_at_least "balanced features: evaluation accuracy" "$(json_number "$work/balanced.json" eval_accuracy)" 0.9
expect_equal "evaluation counts every sample once" "$(json_number "$work/balanced.json" eval_samples)" 4000
grep -q "^strider: epoch 3/3: loss" "$work/balanced.out" && pass "a progress line per epoch" || fail "no progress line"
expect_equal "stats: three epochs" "$(grep -o '"samples_per_s"' "$work/balanced.json" | wc -l | tr -d ' ')" 3
# The in-memory store (2 ranks as 2 nodes: half the rows come from the other node) trains on the
# same batches: the same loss and accuracy every epoch.
STRIDER_NODE_SIZE=1 mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 3 --batch-size 32 --seed 3 \
  --store memory --store-layout partition >"$work/store.out"
losses() { grep '^strider: epoch' "$1" | sed 's/ samples\/s.*//'; }
expect_equal "--store memory: the same loss and accuracy each epoch" "$(losses "$work/store.out")" \
  "$(losses "$work/balanced.out")"
# An evaluation set whose size does not divide by the ranks is still counted exactly.
mpirun_n 2 "$gen" --kind features --classes 4 --samples 1001 --dim 16 --seed 2 --out "$work/eval.h5" --no-progress >/dev/null
mpirun_n 3 "$train" --data "$work/balanced.h5" --eval-data "$work/eval.h5" --epochs 1 --batch-size 32 --seed 3 \
  --eval-batch-size 7 --json "$work/eval.json" >/dev/null
expect_equal "exact evaluation at 3 ranks (1001 samples)" "$(json_number "$work/eval.json" eval_samples)" 1001
# A bad --eval-data fails before the first epoch (no epoch line), not after the last.
mpirun_n 1 "$gen" --kind features --classes 4 --samples 100 --dim 8 --out "$work/eval_dim8.h5" --no-progress >/dev/null
mpirun_n 1 "$gen" --kind features --classes 6 --samples 100 --dim 16 --out "$work/eval_6.h5" --no-progress >/dev/null
mpirun_n 1 "$gen" --kind features --samples 100 --dim 16 --label-key none --out "$work/eval_unlabelled.h5" \
  --no-progress >/dev/null
mpirun_n 1 "$gen" --kind sequences --classes 4 --samples 100 --out "$work/eval_sequences.h5" --no-progress >/dev/null
for bad in "nope.h5|cannot open $work/nope.h5" \
  "eval_dim8.h5|the model expects 16 features per sample, but samples of $work/eval_dim8.h5 have 8" \
  "eval_6.h5|evaluation file $work/eval_6.h5: label 4 of sample [0-9]+ is outside the training classes 0\.\.3" \
  "eval_unlabelled.h5|no labels dataset /labels, which evaluation needs" \
  "eval_sequences.h5|evaluation file $work/eval_sequences.h5 holds token sequences, but the model trained here takes fixed-size samples"; do
  expect_error "--eval-data ${bad%%|*}" "${bad#*|}" 30 \
    mpirun_n 2 "$train" --data "$work/balanced.h5" --eval-data "$work/${bad%%|*}" --epochs 50 --batch-size 32
  expect_equal "--eval-data ${bad%%|*}: refused before training" "$(grep -c '^strider: epoch' "$work/out")" 0
done

# 2. Rare classes: balanced and stratified (uniform target) raise recall over distributed.
mpirun_n 2 "$gen" --kind features --class-counts 10000,200,50 --dim 16 --noise 3 --seed 1 --out "$work/imbalanced.h5" --no-progress >/dev/null
for mode in distributed balanced stratified; do
  extra=()
  [[ $mode == stratified ]] && extra=(--stratify-target uniform)
  mpirun_n 2 "$train" --data "$work/imbalanced.h5" --epochs 3 --batch-size 32 --seed 3 --lr 0.05 --sampler $mode "${extra[@]}" \
    --json "$work/$mode.json" >/dev/null
  read -r -a recall <<<"$(json_array "$work/$mode.json" per_class_recall)"
  echo "recall with $mode: ${recall[*]}"
  declare "rare1_$mode=${recall[1]}" "rare2_$mode=${recall[2]}"
done
for mode in balanced stratified; do
  for rare in 1 2; do
    base_var=rare${rare}_distributed mode_var=rare${rare}_$mode
    expect_at_least "$mode raises recall of class $rare by 0.2 over distributed (${!base_var})" "${!mode_var}" \
      "$(awk -v b="${!base_var}" 'BEGIN { print b + 0.2 }')"
  done
done

# Preemption helpers. preempted_run NAME SIGNAL WHO STEPS RANKS ARGS...: runs strider-train at RANKS
# ranks with --trace-samples $work/NAME and --checkpoint $work/NAME.ckpt, slowed down, and once STEPS
# steps ran sends SIGNAL to mpirun (WHO=launcher: mpirun forwards USR1) or to every rank itself
# (WHO=ranks: as Slurm does; mpirun does not forward TERM). Sets preempted_status and stopped_at.
preempted_run() {
  local name=$1 signal=$2 who=$3 steps=$4 ranks=$5
  shift 5
  # The launcher itself runs in the background (not a shell function), so that a signal reaches mpirun.
  STRIDER_TEST_STEP_DELAY_US=3000 "$STRIDER_MPIEXEC" --bind-to none -np "$ranks" "$train" "$@" \
    --trace-samples "$work/$name" --checkpoint "$work/$name.ckpt" >"$work/$name.out" 2>"$work/$name.err" &
  local launcher=$!
  for _ in $(seq 1 600); do  # wait until some steps ran
    [[ -f $work/$name.rank0 ]] && (($(wc -l <"$work/$name.rank0") >= steps)) && break
    sleep 0.1
  done
  if [[ $who == ranks ]]; then
    local pids
    pids=$(pgrep -P $launcher -x strider-train | tr '\n' ' ')
    expect_equal "$name: $ranks rank processes found to signal" "$(wc -w <<<"$pids" | tr -d ' ')" "$ranks"
    kill -"$signal" $pids
  else
    kill -"$signal" $launcher
  fi
  wait $launcher
  preempted_status=$?
  stopped_at=$(wc -l <"$work/$name.rank0")
}

# global_steps TRACE...: one line "epoch step id" per sample of the global batches in the traces.
global_steps() { cat "$@" | awk '{ key = $1 " " $2; $1 = $2 = ""; n = split($0, ids, " "); for (i = 1; i <= n; i++) print key, ids[i] }' | sort -k1,1n -k2,2n -k3,3n; }

# expect_same_global_batches NAME FULL RESUMED: from the resumed run's first step on, every global
# batch (epoch, step) of the traces $work/RESUMED.rank* holds the same samples as in $work/FULL.rank*
# (the padded last step of an epoch may differ).
expect_same_global_batches() {
  local name=$1 full=$2 resumed=$3
  global_steps "$work/$full".rank* >"$work/$full.global"
  global_steps "$work/$resumed".rank* >"$work/$resumed.global"
  local last_steps resumed_from
  last_steps=$(awk '{ if ($2 > max[$1]) max[$1] = $2 } END { for (e in max) print e, max[e] }' "$work/$full.global")
  resumed_from=$(head -n 1 "$work/$resumed.global" | cut -d' ' -f1,2)
  tail_from() { grep -v -F -f <(echo "$last_steps" | sed 's/$/ /') "$1" | awk -v from="$resumed_from" 'BEGIN { split(from, f, " ") } ($1 > f[1]) || ($1 == f[1] && $2 >= f[2])'; }
  if [[ $resumed_from == "0 0" ]]; then
    fail "$name: the resumed run started from the beginning, not from the checkpoint"
  elif [[ -s $work/$resumed.global ]] && diff <(tail_from "$work/$full.global") <(tail_from "$work/$resumed.global") >/dev/null; then
    pass "$name: same global batches from epoch/step $resumed_from"
  else
    fail "$name: global batches differ"
  fi
}

# expect_resume_equal NAME FULL CUT ARGS...: resumes run CUT (same ranks) and compares its traces
# with the uninterrupted run FULL, rank by rank.
expect_resume_equal() {
  local name=$1 full=$2 cut=$3
  shift 3
  mpirun_n 2 "$train" "$@" --trace-samples "$work/$cut" --checkpoint "$work/$cut.ckpt" --resume >"$work/$cut.resume.out"
  for rank in 0 1; do
    if cmp -s "$work/$full.rank$rank" "$work/$cut.rank$rank"; then
      pass "$name: rank $rank: resumed trace equals the uninterrupted one (stopped after $stopped_at steps)"
    else
      fail "$name: rank $rank: resumed trace differs"; diff "$work/$full.rank$rank" "$work/$cut.rank$rank" | head -5
    fi
  done
  [[ $stopped_at -lt $(wc -l <"$work/$full.rank0") ]] && pass "$name: the stop was mid-run" || fail "$name: the signal came after the run ended"
}

# 3. Preemption: SIGUSR1 to mpirun, or SIGTERM to the ranks themselves (Slurm signals every task;
#    mpirun does not forward TERM) mid-run -> checkpoint at an agreed step, exit 75; --resume
#    finishes with the same sample trace.
args=(--data "$work/imbalanced.h5" --epochs 2 --batch-size 16 --seed 5 --sampler balanced)
args_at_4=(--data "$work/imbalanced.h5" --epochs 2 --batch-size 8 --seed 5 --sampler balanced)
mpirun_n 2 "$train" "${args[@]}" --trace-samples "$work/full" >/dev/null
preempted_run cut USR1 launcher 20 2 "${args[@]}"
expect_equal "SIGUSR1: exit status 75" "$preempted_status" 75
[[ -f $work/cut.ckpt ]] && pass "checkpoint written on preemption" || fail "no checkpoint after preemption"
expect_resume_equal "SIGUSR1" full cut "${args[@]}"
preempted_run term TERM ranks 20 2 "${args[@]}"
expect_equal "SIGTERM to every rank: exit status 75" "$preempted_status" 75
grep -q "stopped by a signal; checkpoint written" "$work/term.out" && pass "SIGTERM: checkpoint written" ||
  fail "SIGTERM: no checkpoint line"
expect_resume_equal "SIGTERM" full term "${args[@]}"
# Preempted twice within epoch 0: a checkpoint taken by a resumed run, resumed again; the three runs'
# traces together are the uninterrupted one.
preempted_run twice USR1 launcher 20 2 "${args[@]}"
first_stop=$stopped_at first_status=$preempted_status
preempted_run twice USR1 launcher $((first_stop + 20)) 2 "${args[@]}" --resume
expect_equal "preempted twice: both runs stopped with exit status 75" "$first_status $preempted_status" "75 75"
epoch0_steps=$(awk '$1 == 0' "$work/full.rank0" | wc -l)
((first_stop < stopped_at && stopped_at < epoch0_steps)) &&
  pass "preempted twice within epoch 0 (after $first_stop and $stopped_at of its $epoch0_steps steps)" ||
  fail "preempted twice: stops after $first_stop and $stopped_at steps, not both within epoch 0 ($epoch0_steps steps)"
expect_resume_equal "preempted twice in one epoch" full twice "${args[@]}"

# 4. Resume at another world size with the same global batch (2 x 16 = 4 x 8), for a sampler that
#    holds the epoch's order (balanced) and for streaming (a keyed bijection, O(1) memory).
preempted_run w2 USR1 launcher 30 2 "${args[@]}"
expect_equal "preempted at 2 ranks" "$preempted_status" 75
mpirun_n 4 "$train" "${args_at_4[@]}" --trace-samples "$work/w4" --checkpoint "$work/w2.ckpt" --resume >/dev/null
expect_same_global_batches "balanced: resumed at 4 ranks from a 2-rank checkpoint" full w4
streaming=(--data "$work/imbalanced.h5" --epochs 2 --batch-size 16 --seed 5 --sampler streaming)
streaming_at_4=(--data "$work/imbalanced.h5" --epochs 2 --batch-size 8 --seed 5 --sampler streaming)
mpirun_n 2 "$train" "${streaming[@]}" --trace-samples "$work/sfull" >/dev/null
preempted_run s2 USR1 launcher 30 2 "${streaming[@]}"
expect_equal "streaming: preempted at 2 ranks" "$preempted_status" 75
mpirun_n 4 "$train" "${streaming_at_4[@]}" --trace-samples "$work/s4" --checkpoint "$work/s2.ckpt" --resume >/dev/null
expect_same_global_batches "streaming: resumed at 4 ranks from a 2-rank checkpoint" sfull s4

# 5. Sequences: token-budget batches waste little on padding where fixed-size batches waste most.
mpirun_n 2 "$gen" --kind sequences --classes 4 --samples 3000 --min-len 8 --max-len 2048 --median-len 128 --seed 1 \
  --out "$work/sequences.h5" --no-progress >/dev/null
# (The bag of embeddings averages ~100 tokens per row, so each embedding's gradient is small: lr 2.)
mpirun_n 2 "$train" --data "$work/sequences.h5" --sampler bucketed --max-tokens 16384 --epochs 2 --seed 2 --lr 2 \
  --json "$work/bucketed.json" >/dev/null
mpirun_n 2 "$train" --data "$work/sequences.h5" --batch-size 32 --epochs 2 --seed 2 --lr 2 --json "$work/fixed.json" >/dev/null
expect_at_least "bucketed: padding efficiency" "$(json_number "$work/bucketed.json" padding_efficiency)" 0.85
expect_at_most "fixed batches of 32: padding efficiency" "$(json_number "$work/fixed.json" padding_efficiency)" 0.5
expect_at_least "bucketed: the bag-of-embeddings model learns" "$(json_number "$work/bucketed.json" eval_accuracy)" 0.9
expect_at_least "fixed batches: the bag-of-embeddings model learns" "$(json_number "$work/fixed.json" eval_accuracy)" 0.9

# 6. Weighted sampling re-weighted from per-class recall every epoch: weights change, are recorded,
#    and a run resumed after a re-weighting continues with the same samples.
weighted=(--data "$work/imbalanced.h5" --sampler weighted --epochs 3 --batch-size 32 --seed 4 --reweight-every 1 --lr 0.05)
mpirun_n 2 "$train" "${weighted[@]}" --json "$work/weighted.json" --trace-samples "$work/wfull" >"$work/weighted.out"
weights=$(grep -o '"class_weights":\[[^]]*\]' "$work/weighted.json" | sort -u | wc -l | tr -d ' ')
expect_at_least "class weights changed between epochs (distinct weight vectors)" "$weights" 2
grep -q "class weights now" "$work/weighted.out" && pass "re-weighting announced" || fail "no re-weighting line"
steps_per_epoch=$(awk '$1 == 0' "$work/wfull.rank0" | wc -l)
preempted_run wcut USR1 launcher $((steps_per_epoch + 10)) 2 "${weighted[@]}"  # in the second epoch, after a re-weighting
expect_equal "weighted run preempted after a re-weighting" "$preempted_status" 75
expect_resume_equal "re-weighted run" wfull wcut "${weighted[@]}"

# 7. Bad input ends every rank with one line.
expect_error "missing data file" "no-such.h5" 30 mpirun_n 2 "$train" --data "$work/no-such.h5"
expect_error "resume with a checkpoint of another dataset" "another dataset" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 1 --batch-size 16 --seed 5 --checkpoint "$work/cut.ckpt" --resume
expect_error "resume with another sampler" "sampler" 30 \
  mpirun_n 2 "$train" --data "$work/imbalanced.h5" --epochs 2 --batch-size 16 --seed 5 --sampler distributed \
  --checkpoint "$work/cut.ckpt" --resume
expect_error "no epochs" "--epochs must be >= 1, got 0" 30 mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 0
expect_error "resume without a checkpoint path" "--resume and --checkpoint-every need --checkpoint PATH" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --resume
# Settings that would run and learn nothing, or fail hours in, end every rank at start.
expect_error "batches too large for any step" \
  "epoch 0 has no step: 4000 samples, 2 ranks, batches of 3000 per rank, --drop-last-batch \(sampler distributed\)" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --batch-size 3000 --drop-last-batch
expect_error "a batch size past any memory" "--batch-size must be at most 1099511627776, got 4611686018427387904" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --sampler balanced --batch-size 4611686018427387904
expect_error "no evaluation batch" "--eval-batch-size must be in 1\.\.1099511627776, got 0" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --eval-batch-size 0
expect_error "a checkpoint in a missing directory" "--checkpoint $work/no/dir/a.ckpt: the directory $work/no/dir does not exist" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --checkpoint "$work/no/dir/a.ckpt"
mkdir -p "$work/a-directory"
expect_error "a checkpoint that is a directory" "--checkpoint $work/a-directory is a directory" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --checkpoint "$work/a-directory"
expect_error "statistics into a missing directory" "--json $work/no/s.json: the directory $work/no does not exist" 30 \
  mpirun_n 2 "$train" --data "$work/balanced.h5" --json "$work/no/s.json"
expect_error "ranks started with different options" \
  "the command line is '--data $work/balanced.h5 --epochs 2' on rank 1 but '--data $work/balanced.h5 --epochs 1' on rank 0" 30 \
  "$STRIDER_MPIEXEC" --bind-to none -np 1 "$train" --data "$work/balanced.h5" --epochs 1 : \
  -np 1 "$train" --data "$work/balanced.h5" --epochs 2
"${STRIDER_PYTHON:-/usr/bin/python3}" - "$work/huge-label.h5" <<'PY' || fail "h5py could not write the labels"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["samples"] = np.zeros((100, 4), dtype=np.float32)
    f["labels"] = np.where(np.arange(100) == 7, 2**31 - 1, np.arange(100) % 2).astype(np.int32)
PY
expect_error "a label far above the others" \
  "the labels of $work/huge-label.h5 run to 2147483647, above the most classes the trainer takes \(16777216\)" 30 \
  mpirun_n 2 "$train" --data "$work/huge-label.h5"
expect_error "a label far above the others, class-aware sampling" \
  "label 2147483647 of sample 7 is above the most classes class-aware sampling takes \(16777216\)" 30 \
  mpirun_n 2 "$STRIDER_BIN/strider-bench" --data "$work/huge-label.h5" --sampler balanced

# Resumes: without --seed (the checkpoint's is taken), and from a checkpoint at or past --epochs
# (evaluated and left as it is: rewriting it would move it back to an earlier position).
mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 1 --checkpoint "$work/noseed.ckpt" >/dev/null 2>&1
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 2 --checkpoint "$work/noseed.ckpt" \
  --resume >"$work/noseed.out" 2>&1 && grep -q "^strider: epoch 2/2: loss" "$work/noseed.out" &&
  pass "a run without --seed resumes (the checkpoint's seed)" || fail "a run without --seed did not resume: $(grep error "$work/noseed.out")"
cp "$work/noseed.ckpt" "$work/noseed-before.ckpt"
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" --data "$work/balanced.h5" --epochs 1 --checkpoint "$work/noseed.ckpt" \
  --resume >"$work/past.out" 2>&1 || fail "resume past --epochs failed"
grep -q "at or past the end of --epochs 1: nothing to train" "$work/past.out" &&
  cmp -s "$work/noseed.ckpt" "$work/noseed-before.ckpt" &&
  pass "a checkpoint past --epochs is left as it is" || fail "a checkpoint past --epochs was rewritten or not announced"

# Images as h5py writes them: uint8 [2000, 16, 16, 3] (channels last), int64 labels; pixels about
# 200, each class shifting one channel by 6 (the last all three by -6), noise 3. Without
# normalization one warning says what to pass; with --normalize auto (per-channel statistics
# computed at start) they train to at least twice chance.
"${STRIDER_PYTHON:-/usr/bin/python3}" - "$work/images.h5" <<'PY' || fail "h5py could not write the images (scripts/setup.sh installs python3-h5py)"
import sys, h5py, numpy as np
rng = np.random.default_rng(7)
labels = np.arange(2000) % 4
rng.shuffle(labels)
shift = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [-1, -1, -1]], dtype=np.float64) * 6
x = 200 + shift[labels][:, None, None, :] + rng.normal(0, 3, size=(2000, 16, 16, 3))
with h5py.File(sys.argv[1], "w") as f:
    f["samples"] = np.clip(np.rint(x), 0, 255).astype(np.uint8)
    f["labels"] = labels.astype(np.int64)
PY
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" --data "$work/images.h5" --epochs 1 --model softmax --seed 3 \
  --json "$work/raw.json" >"$work/raw.out" 2>&1
expect_equal "unnormalized uint8 images: one warning naming --normalize auto" \
  "$(grep -c 'not normalized; pass --normalize auto' "$work/raw.out")" 1
STRIDER_LOG_LEVEL=info mpirun_n 2 "$train" --data "$work/images.h5" --epochs 2 --model softmax --seed 3 \
  --normalize auto --checkpoint "$work/norm.ckpt" --json "$work/norm.json" >"$work/norm.out" 2>&1
grep -q "normalizing the inputs: channels-last, 3 means" "$work/norm.out" && pass "--normalize auto: per channel" ||
  fail "normalize log: $(cat "$work/norm.out")"
expect_at_least "uint8 images with --normalize auto: at least twice chance (0.5 for 4 classes)" \
  "$(json_number "$work/norm.json" eval_accuracy)" 0.5
expect_equal "--normalize auto: no warning" "$(grep -c 'not normalized' "$work/norm.out")" 0
# A resume uses the recorded statistics; one that asks for unnormalized inputs is refused.
mpirun_n 4 "$train" --data "$work/images.h5" --epochs 3 --model softmax --seed 3 --normalize auto --batch-size 16 \
  --checkpoint "$work/norm.ckpt" --resume --json "$work/resumed.json" >/dev/null 2>&1
expect_at_least "resumed at 4 ranks with the recorded statistics: still learns" \
  "$(json_number "$work/resumed.json" eval_accuracy)" 0.5
expect_error "resume without the normalization it was trained with" \
  "the checkpoint was trained on normalized inputs, this run asks for unnormalized ones" 30 \
  env STRIDER_LOG_LEVEL=error "$STRIDER_MPIEXEC" --bind-to none -np 2 "$train" --data "$work/images.h5" --epochs 4 \
  --model softmax --seed 3 --checkpoint "$work/norm.ckpt" --resume
expect_error "--normalize of another kind" "--normalize must be none, auto or a FILE.json of strider-inspect stats, got 'yes'" 30 \
  mpirun_n 2 "$train" --data "$work/images.h5" --normalize yes
# Statistics from a file strider-inspect stats wrote: the same training; a file for another shape is refused.
mpirun_n 2 "$STRIDER_BIN/strider-inspect" stats "$work/images.h5" --json >"$work/images.stats.json" 2>/dev/null
mpirun_n 2 "$train" --data "$work/images.h5" --epochs 2 --model softmax --seed 3 --normalize "$work/images.stats.json" \
  --json "$work/file.json" >/dev/null 2>&1
expect_at_least "--normalize FILE.json: at least twice chance" "$(json_number "$work/file.json" eval_accuracy)" 0.5
mpirun_n 2 "$STRIDER_BIN/strider-inspect" stats "$work/balanced.h5" --json >"$work/balanced.stats.json" 2>/dev/null
expect_error "--normalize with a stats file for another shape" \
  "statistics file $work/balanced.stats.json is for samples of shape \[16\], but $work/images.h5 has \[16, 16, 3\]" 30 \
  mpirun_n 2 "$train" --data "$work/images.h5" --normalize "$work/balanced.stats.json"
printf '{"layout": "channels-last", "sample_shape": [16, 16, 3], "rows": 5, "mean": [1, 2], "std": [1, 1]}\n' \
  >"$work/short.stats.json"
expect_error "--normalize with too few means" "has 2 means and 2 standard deviations; channels-last statistics of samples of 768 elements need 3 of each" 30 \
  mpirun_n 2 "$train" --data "$work/images.h5" --normalize "$work/short.stats.json"
expect_error "--normalize auto on sequences" "--normalize auto needs fixed-size samples" 30 \
  mpirun_n 2 "$train" --data "$work/sequences.h5" --normalize auto
finish
