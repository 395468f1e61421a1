#!/usr/bin/env bash
# Records what the apps print for fixed inputs, so that a refactor can be shown to change no
# behaviour: sampler plans, training traces and logs, stats JSON keys, checkpoint bytes, bench JSON
# keys, file dumps, and the exit status and first stderr line of bad inputs. Timing values
# (samples/s, seconds, stall fractions, RSS) are replaced by '_'; their keys are kept. Every run
# uses a fixed seed, so two runs of the same binaries give identical folders.
#
#   scripts/dev/snapshot-behaviour.sh OUT_DIR          # apps from $STRIDER_BIN (default build/bin)
#   STRIDER_BIN=/other/build/bin scripts/dev/snapshot-behaviour.sh /tmp/before
#   diff -r /tmp/before OUT_DIR                        # empty: same behaviour
set -uo pipefail
source "$(dirname "$0")/../common.sh"

if (($# != 1)); then
  echo "usage: $0 OUT_DIR   (apps from \$STRIDER_BIN, default $build_dir/bin)" >&2
  exit 2
fi
out=$1
bin=$(cd "${STRIDER_BIN:-$build_dir/bin}" && pwd) || exit 2
for app in strider-gen strider-inspect strider-train strider-bench strider-sim-example; do
  [[ -x $bin/$app ]] || { echo "snapshot: $bin/$app is missing" >&2; exit 2; }
done
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/strider-snapshot.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
export STRIDER_LOG_LEVEL=info

# "$mpirun N COMMAND...": COMMAND at N ranks (word-split on purpose; timeout cannot run functions).
mpirun="mpirun --bind-to none -np"

# Timing figures in text and JSON become '_' (keys and surrounding words stay); the source location
# an error names, "(src/io/x.cpp:29)", becomes "(SOURCE)": moving code moves it, behaviour stays;
# mpirun's job ids become JOB.
timing_keys='samples_per_s|bytes_per_s|seconds|stall_fraction|stall_seconds|io_seconds|wall_seconds|wall_s'
timing_keys+='|time_to_first_batch_s|peak_rss_bytes|read_time_imbalance|io_imbalance|[a-z_]*_us|[a-z_]*_ms'
normalise() {
  sed -E -e "s#$work#WORK#g" -e 's/\((src|apps)\/[^ ()]*:[0-9]+\)/(SOURCE)/g' -e 's/\[\[[0-9]+,/[[JOB,/g' \
    -e "s/\"($timing_keys)\": ?[-0-9.eE+naifNI]+/\"\1\":_/g" \
    -e 's/samples\/s [0-9.]+[KMG]?/samples\/s _/g' -e 's/[0-9.]+ samples(\/s| per CPU-second)/_ samples\1/g' \
    -e 's/imbalance [0-9.]+/imbalance _/g' -e 's/^( +[0-9]+) .*/\1 _/' \
    -e 's/stall [0-9.]+%/stall _%/g' \
    -e 's/[0-9]+(\.[0-9]+)? ?(s|ms|us|GB\/s|MB\/s|MiB|GiB|KiB)\b/_ \2/g'
}

# record NAME COMMAND...: stdout, stderr (normalised) and the exit status of COMMAND.
record() {
  local name=$1
  shift
  local status=0
  timeout -k 5 120 "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
  normalise <"$work/stdout" >"$out/$name.out"
  # Ranks write their log lines concurrently: keep the lines, not their interleaving.
  normalise <"$work/stderr" | sort >"$out/$name.err"
  echo "$status" >"$out/$name.rc"
}

# bad NAME COMMAND...: the exit status, the first stderr line and the first error line (logs at
# warn level: the first line is the error where the app reports one).
bad() {
  local name=$1
  shift
  local status=0
  STRIDER_LOG_LEVEL=warn timeout -k 5 60 "$@" >/dev/null 2>"$work/stderr" || status=$?
  {
    echo "exit $status"
    head -n 1 "$work/stderr" | normalise
    grep -m 1 '^strider: error:' "$work/stderr" | normalise
  } >"$out/bad.$name"
}

# Keeps a file (trace, checkpoint, stats JSON) of a run, normalised.
keep() { normalise <"$1" >"$out/$2"; }

gen=$bin/strider-gen inspect=$bin/strider-inspect train=$bin/strider-train bench=$bin/strider-bench
sim=$bin/strider-sim-example

# ---- datasets (strider-gen is itself part of the snapshot: its files are dumped below) ----
record gen.imbalanced $mpirun 2 "$gen" --kind features --class-counts 600,120,30 --dim 8 --noise 2 --seed 1 --out imb.h5 --no-progress
record gen.balanced $mpirun 1 "$gen" --kind features --classes 4 --samples 800 --dim 8 --seed 2 --out bal.h5 --no-progress
record gen.sequences $mpirun 2 "$gen" --kind sequences --classes 3 --samples 400 --min-len 4 --max-len 256 --median-len 32 \
  --seed 3 --out seq.h5 --no-progress
record gen.images $mpirun 1 "$gen" --kind images --classes 3 --samples 240 --channels 1 --height 4 --width 4 --seed 4 \
  --out img.h5 --no-progress
record gen.chunked $mpirun 1 "$gen" --kind features --classes 3 --samples 300 --dim 8 --seed 5 --layout chunked \
  --compress 1 --out chunked.h5 --no-progress
record gen.keys $mpirun 1 "$gen" --kind features --classes 2 --samples 100 --dim 4 --seed 6 --data-key /x --label-key /y \
  --out keys.h5 --no-progress
echo "not an HDF5 file" >text.h5

# ---- strider-inspect info and dump ----
for file in imb bal seq img chunked; do
  record "info.$file" $mpirun 1 "$inspect" info $file.h5
  record "info.$file.json" $mpirun 1 "$inspect" info $file.h5 --json
  for engine in auto hdf5 direct mmap; do
    record "dump.$file.$engine" $mpirun 1 "$inspect" dump $file.h5 --indices 0,5,9,199,7,7 --engine $engine
  done
done
record dump.keys $mpirun 2 "$inspect" dump keys.h5 --indices 3,1,99 --data-key /x --label-key /y

# ---- strider-inspect plan: every mode, several seeds, epochs and world sizes ----
declare -A mode_options=(
  [distributed]="--samples 103"
  [distributed_noshuffle]="--sampler distributed --samples 103 --no-shuffle"
  [distributed_droplast]="--sampler distributed --samples 103 --drop-last --drop-last-batch"
  [streaming]="--sampler streaming --samples 103"
  [streaming_droplast]="--sampler streaming --samples 103 --drop-last"
  [block]="--sampler block --samples 103 --block-size 8 --block-window 2"
  [balanced]="--sampler balanced --class-counts 50,20,7"
  [balanced_min]="--sampler balanced --class-counts 50,20,7 --balance min"
  [balanced_count]="--sampler balanced --class-counts 50,20,7 --balance 40"
  [weighted]="--sampler weighted --class-counts 50,20,7"
  [weighted_weights]="--sampler weighted --class-counts 50,20,7 --class-weights 1,2,0.5 --num-samples 60"
  [stratified]="--sampler stratified --class-counts 50,20,7"
  [stratified_uniform]="--sampler stratified --class-counts 50,20,7 --stratify-target uniform"
  [stratified_weights]="--sampler stratified --class-counts 50,20,7 --stratify-target 1,2,3 --num-samples 90"
  [bucketed]="--sampler bucketed --samples 120 --lengths lognormal:median=32,min=4,max=256 --max-tokens 512"
  [bucketed_options]="--sampler bucketed --samples 120 --lengths uniform:min=4,max=128 --max-tokens 512 --megabatch 4
                      --max-batch-size 8 --batch-size-multiple 2 --most-expensive-first --step-group 4"
)
for name in $(printf '%s\n' "${!mode_options[@]}" | sort); do
  read -r -a options <<<"${mode_options[$name]}"
  for seed in 0 7; do
    for epoch in 0 1; do
      for world in 1 3; do
        record "plan.$name.s$seed.e$epoch.w$world" "$inspect" plan "${options[@]}" --seed $seed --epoch $epoch --world $world \
          --batch-size 4 --all-ranks --json
      done
    done
  done
  record "plan.$name.text" "$inspect" plan "${options[@]}" --seed 3 --world 2 --rank 1 --batch-size 5
  record "plan.$name.steps" "$inspect" plan "${options[@]}" --seed 3 --world 2 --rank 1 --batch-size 5 --first-step 2 \
    --steps 3 --json
  record "plan.$name.all-text" "$inspect" plan "${options[@]}" --seed 3 --world 3 --batch-size 5 --all-ranks --first-step 1
  [[ $name == balanced* || $name == weighted* || $name == stratified* ]] &&
    record "plan.$name.histogram" "$inspect" plan "${options[@]}" --seed 3 --world 3 --batch-size 4 --histogram
  [[ $name == bucketed* ]] && record "plan.$name.stats" "$inspect" plan "${options[@]}" --seed 3 --world 4 --stats
done
record plan.data.distributed $mpirun 2 "$inspect" plan --data imb.h5 --seed 1 --world 2 --batch-size 8 --all-ranks --json
record plan.data.balanced $mpirun 2 "$inspect" plan --data imb.h5 --sampler balanced --seed 1 --world 4 --batch-size 8 \
  --all-ranks --json
record plan.data.histogram $mpirun 1 "$inspect" plan --data imb.h5 --sampler stratified --seed 1 --world 3 --batch-size 8 \
  --histogram
record plan.data.bucketed $mpirun 2 "$inspect" plan --data seq.h5 --sampler bucketed --max-tokens 1024 --seed 2 --world 2 \
  --all-ranks --json
record plan.data.bucketed-stats $mpirun 1 "$inspect" plan --data seq.h5 --sampler bucketed --max-tokens 1024 --seed 2 \
  --world 2 --stats
record plan.data.keys $mpirun 1 "$inspect" plan --data keys.h5 --data-key /x --label-key /y --sampler weighted --seed 2 \
  --world 2 --batch-size 4 --all-ranks --json

# ---- strider-train: several samplers at 1 and 2 ranks, traces, stats, checkpoints ----
# train NAME RANKS OPTIONS...: keeps stdout/stderr, the traces, the stats JSON (timing removed).
train_run() {
  local name=$1 ranks=$2
  shift 2
  record "train.$name" $mpirun "$ranks" "$train" --backend cpu --trace-samples "trace.$name" --stats-json "stats.$name.json" "$@"
  for ((rank = 0; rank < ranks; ++rank)); do
    [[ -f trace.$name.rank$rank ]] && keep "trace.$name.rank$rank" "train.$name.trace.rank$rank"
  done
  [[ -f stats.$name.json ]] && keep "stats.$name.json" "train.$name.stats.json"
}
for ranks in 1 2; do
  train_run distributed.w$ranks $ranks --data imb.h5 --epochs 2 --batch-size 16 --seed 3
  train_run balanced.w$ranks $ranks --data imb.h5 --sampler balanced --epochs 2 --batch-size 16 --seed 3 --lr 0.05
  train_run stratified.w$ranks $ranks --data imb.h5 --sampler stratified --stratify-target uniform --epochs 2 --batch-size 16 \
    --seed 4
  train_run weighted.w$ranks $ranks --data imb.h5 --sampler weighted --reweight-every 1 --epochs 3 --batch-size 16 --seed 4
  train_run streaming.w$ranks $ranks --data bal.h5 --sampler streaming --epochs 2 --batch-size 32 --seed 5 --model softmax
  train_run block.w$ranks $ranks --data bal.h5 --sampler block --block-size 16 --epochs 2 --batch-size 32 --seed 5
  train_run bucketed.w$ranks $ranks --data seq.h5 --sampler bucketed --max-tokens 2048 --epochs 2 --seed 6 --lr 2
  train_run sequences.w$ranks $ranks --data seq.h5 --batch-size 16 --epochs 1 --seed 6 --lr 2 --embed-dim 8 --vocab 512
  train_run images.w$ranks $ranks --data img.h5 --batch-size 16 --epochs 2 --seed 7 --model softmax
  train_run mlp-hdf5.w$ranks $ranks --data chunked.h5 --engine hdf5 --batch-size 16 --epochs 1 --seed 8 --hidden 8 \
    --momentum 0.5 --lr 0.2
  train_run direct.w$ranks $ranks --data bal.h5 --engine direct --prefetch 2 --batch-size 8 --epochs 1 --seed 8 \
    --eval-data imb.h5 --eval-batch-size 7
done
# Checkpoint after epoch 1 (and every 5 steps), then resume to 3 epochs; the checkpoint's bytes hold
# the model, the optimizer and the sampler state.
for mode in distributed weighted bucketed; do
  data=imb.h5 extra=(--batch-size 16)
  [[ $mode == weighted ]] && extra+=(--reweight-every 1)
  [[ $mode == bucketed ]] && data=seq.h5 extra=(--max-tokens 2048 --lr 2)
  train_run "ckpt-$mode.first" 2 --data $data --sampler $mode --epochs 1 --seed 9 --checkpoint "ckpt.$mode" "${extra[@]}"
  md5sum <"ckpt.$mode" >"$out/train.ckpt-$mode.first.checkpoint.md5"
  cp "trace.ckpt-$mode.first.rank0" "trace.ckpt-$mode.resumed.rank0"
  cp "trace.ckpt-$mode.first.rank1" "trace.ckpt-$mode.resumed.rank1"
  train_run "ckpt-$mode.resumed" 2 --data $data --sampler $mode --epochs 3 --seed 9 --checkpoint "ckpt.$mode" --resume \
    --checkpoint-every 5 "${extra[@]}"
  md5sum <"ckpt.$mode" >"$out/train.ckpt-$mode.resumed.checkpoint.md5"
done
train_run resume-fresh 1 --data bal.h5 --epochs 1 --batch-size 64 --seed 1 --checkpoint ckpt.fresh --resume

# ---- strider-bench and strider-inspect read-speed (keys and counts; timing values removed) ----
for ranks in 1 2; do
  record "bench.w$ranks" $mpirun $ranks "$bench" --data bal.h5 --batch-size 32 --steps 5 --epochs 2 --seed 1 \
    --json "bench.w$ranks.json"
  keep "bench.w$ranks.json" "bench.w$ranks.json"
done
record bench.balanced $mpirun 2 "$bench" --data imb.h5 --sampler balanced --batch-size 16 --seed 1 --engine hdf5 \
  --compute-us 10 --compute-mode sleep --json bench.balanced.json
keep bench.balanced.json bench.balanced.json
record bench.streaming $mpirun 1 "$bench" --data bal.h5 --sampler streaming --batch-size 16 --seed 1 --engine direct \
  --copy-threads 2 --prefetch 3 --json bench.streaming.json
keep bench.streaming.json bench.streaming.json
record read-speed $mpirun 2 "$inspect" read-speed bal.h5 --batch-size 32 --engine mmap

# ---- strider-sim-example ----
record sim.w1 $mpirun 1 "$sim" --data bal.h5 --steps 100 --train-every 2 --batch-size 8
record sim.w2 $mpirun 2 "$sim" --data imb.h5 --steps 60 --train-every 1 --batch-size 8

# ---- bad inputs: exit status and the first stderr line ----
bad gen.no-out $mpirun 1 "$gen" --kind features
bad gen.bad-option $mpirun 1 "$gen" --out x.h5 --frobnicate
bad gen.bad-kind $mpirun 1 "$gen" --out x.h5 --kind pictures
bad gen.bad-counts $mpirun 2 "$gen" --out x.h5 --class-counts 10,x
bad gen.bad-layout $mpirun 1 "$gen" --out x.h5 --layout striped
bad gen.unwritable $mpirun 1 "$gen" --out /nonexistent/dir/x.h5 --samples 10
bad inspect.no-command "$inspect"
bad inspect.unknown-command "$inspect" frobnicate
bad inspect.plan-no-samples "$inspect" plan --world 2
bad inspect.plan-bad-rank "$inspect" plan --samples 10 --world 2 --rank 2
bad inspect.plan-bad-mode "$inspect" plan --samples 10 --sampler shuffled
bad inspect.plan-bad-option "$inspect" plan --samples 10 --frobnicate
bad inspect.plan-bucketed-no-lengths "$inspect" plan --samples 10 --sampler bucketed --max-tokens 64
bad inspect.plan-long-sample "$inspect" plan --samples 10 --sampler bucketed --max-tokens 4 --lengths uniform:min=8,max=9
bad inspect.plan-bad-weights "$inspect" plan --class-counts 5,5 --sampler weighted --class-weights 1,-1
bad inspect.plan-weights-count "$inspect" plan --class-counts 5,5 --sampler weighted --class-weights 1,2,3
bad inspect.plan-stratified-small "$inspect" plan --class-counts 5,5,5 --sampler stratified --batch-size 2
bad inspect.plan-block-size "$inspect" plan --samples 10 --sampler block --block-size 0
bad inspect.plan-balance "$inspect" plan --class-counts 5,5 --sampler balanced --balance most
bad inspect.plan-counts-mismatch "$inspect" plan --samples 11 --class-counts 5,5
bad inspect.plan-histogram "$inspect" plan --samples 10 --histogram
bad inspect.plan-data-no-mpi-key $mpirun 2 "$inspect" plan --data imb.h5 --data-key /nope
bad inspect.plan-data-missing $mpirun 2 "$inspect" plan --data missing.h5
bad inspect.plan-data-no-labels $mpirun 1 "$inspect" plan --data keys.h5 --data-key /x --sampler balanced
bad inspect.info-missing $mpirun 1 "$inspect" info missing.h5
bad inspect.info-text $mpirun 1 "$inspect" info text.h5
bad inspect.info-key $mpirun 1 "$inspect" info imb.h5 --data-key /nope
bad inspect.dump-range $mpirun 1 "$inspect" dump imb.h5 --indices 0,750
bad inspect.dump-bad-list $mpirun 1 "$inspect" dump imb.h5 --indices 0,a
bad inspect.dump-direct-chunked $mpirun 1 "$inspect" dump chunked.h5 --indices 0 --engine direct
bad inspect.dump-bad-engine $mpirun 1 "$inspect" dump imb.h5 --indices 0 --engine fast
bad inspect.read-speed-missing $mpirun 2 "$inspect" read-speed missing.h5
bad train.missing $mpirun 2 "$train" --data missing.h5 --seed 1
bad train.no-data $mpirun 1 "$train" --epochs 1 --seed 1
bad train.bad-option $mpirun 2 "$train" --data imb.h5 --frobnicate --seed 1
bad train.text $mpirun 1 "$train" --data text.h5 --seed 1
bad train.data-key $mpirun 2 "$train" --data imb.h5 --data-key /nope --seed 1
bad train.label-key $mpirun 1 "$train" --data imb.h5 --label-key /nope --seed 1
bad train.epochs $mpirun 2 "$train" --data imb.h5 --epochs 0 --seed 1
bad train.lr $mpirun 1 "$train" --data imb.h5 --lr -1 --seed 1
bad train.prefetch $mpirun 1 "$train" --data imb.h5 --prefetch 65 --seed 1
bad train.resume-no-checkpoint $mpirun 1 "$train" --data imb.h5 --resume --seed 1
bad train.reweight-distributed $mpirun 2 "$train" --data imb.h5 --reweight-every 1 --seed 1
bad train.bucketed-features $mpirun 1 "$train" --data imb.h5 --sampler bucketed --max-tokens 64 --seed 1
bad train.bag-on-features $mpirun 1 "$train" --data imb.h5 --model bag --seed 1
bad train.mlp-on-sequences $mpirun 1 "$train" --data seq.h5 --model mlp --seed 1
bad train.bad-model $mpirun 1 "$train" --data imb.h5 --model transformer --seed 1
bad train.bad-backend $mpirun 1 "$train" --data imb.h5 --backend tpu --seed 1
bad train.cuda-backend $mpirun 1 "$train" --data imb.h5 --backend cuda --seed 1
bad train.eval-classes $mpirun 2 "$train" --data imb.h5 --eval-data bal.h5 --epochs 1 --backend cpu --seed 1
bad train.eval-shape $mpirun 2 "$train" --data imb.h5 --eval-data img.h5 --epochs 1 --backend cpu --seed 1
bad train.eval-labels $mpirun 1 "$train" --data imb.h5 --eval-data keys.h5 --data-key /x --label-key /y --backend cpu --seed 1
bad train.other-dataset $mpirun 1 "$train" --data bal.h5 --checkpoint ckpt.distributed --resume --backend cpu --seed 1
bad train.other-sampler $mpirun 2 "$train" --data imb.h5 --sampler balanced --checkpoint ckpt.distributed --resume \
  --backend cpu
bad train.long-sequence $mpirun 2 "$train" --data seq.h5 --sampler bucketed --max-tokens 4 --backend cpu --seed 1
bad train.batch-size $mpirun 1 "$train" --data imb.h5 --batch-size -1 --seed 1
bad train.stratified-small-batch $mpirun 1 "$train" --data imb.h5 --sampler stratified --batch-size 2 --backend cpu --seed 1
bad train.direct-chunked $mpirun 1 "$train" --data chunked.h5 --engine direct --backend cpu --seed 1
bad bench.missing $mpirun 2 "$bench" --data missing.h5
bad bench.bad-option $mpirun 1 "$bench" --data bal.h5 --frobnicate
bad bench.bad-engine $mpirun 1 "$bench" --data bal.h5 --engine fast
bad bench.compute-mode $mpirun 1 "$bench" --data bal.h5 --compute-mode nap
bad bench.bad-sampler $mpirun 1 "$bench" --data bal.h5 --sampler shuffled
bad sim.missing $mpirun 2 "$sim" --data missing.h5
bad sim.bad-option $mpirun 1 "$sim" --data bal.h5 --frobnicate
bad sim.train-every $mpirun 1 "$sim" --data bal.h5 --train-every 0

echo "snapshot: $(find "$out" -type f | wc -l) files in $out"
