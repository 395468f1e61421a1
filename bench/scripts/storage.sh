#!/usr/bin/env bash
# Storage-bound training, MLPerf Storage style (DLIO's workloads; these are not MLPerf results): for
# unet3d, resnet50 and cosmoflow, how many emulated accelerators (one rank each, a sleeping step of
# the workload's H100 compute time x a slowdown) this node's storage keeps at or above the
# workload's accelerator utilization (AU) threshold, with strider reading with O_DIRECT and with the
# PyTorch DataLoader + h5py; and what share of fio's bandwidth strider delivers there. Prints a table
# and writes $BENCH_OUT/storage.json, storage.md and storage.png.
#
#   bench/scripts/setup-bench.sh              # once: fio, torch, h5py-mpi, matplotlib (Debian packages)
#   bench/scripts/storage.sh                  # see the README (Performance) for how long it takes
#   STORAGE_QUICK=1 bench/scripts/storage.sh  # tiny files, counts 1 and 2: the script end to end (CI)
#
# Per workload:
#   1. the file: strider-gen --workload W (records of the preset's sample size, rows 4 KiB-aligned),
#      enough samples for the steps per epoch at the largest count the file serves (unet3d: 4, else
#      MAX_ACCELERATORS; FILE_ACCELERATORS_<workload> sets it); kept in $BENCH_DIR.
#   2. the limit: fio on the same file (O_DIRECT, psync, the sample size as the block size, random and
#      sequential, as many jobs as strider has reading threads: ranks x copy threads).
#   3. the slowdown X (counts are also given in H100s: count / X; X < 1 is an accelerator faster than
#      an H100): chosen so that TARGET_ACCELERATORS accelerators ask for all of fio's random-read
#      bandwidth at as many jobs, so that the search below ends near what the storage can feed on any
#      machine (the answer in H100s does not depend on X), and so that holding a 90% threshold there
#      means delivering at least 90% of fio's bandwidth; SLOWDOWN_<workload> sets it.
#   4. strider-bench --workload W --accelerator-slowdown X --engine direct --odirect at 1, 2, 4, ...
#      ranks until the AU falls below the threshold or memory caps the count (the cap itself is tried
#      when it lies between two powers of two), then by bisection between the largest count that held
#      and the first that did not.
#   5. the refinement at the largest count N that held (refine, below): N ranks, shorter steps (a
#      smaller slowdown: more H100s per rank) up to the one that asks for fio's rate, bisected
#      REFINE_STEPS times; the goals are judged there.
#   6. the peer (storage_peer.py: DataLoader + DistributedSampler + h5py, the file dropped from the page
#      cache at each epoch's start), searched the same way, with its own memory cap.
# The AU, samples/s and GB/s are those of the AU window (each epoch's first step left out, as DLIO).
#
# Memory: the batches read ahead by all ranks together stay within RING_MEMORY_GB (default 40% of the
# memory available at the start): strider needs 2 batches per rank, the peer (workers x prefetch
# factor 2 + 2) (a unet3d batch is about 1 GB), which caps the counts.
#
# Environment: STRIDER_BIN (default build/bin), BENCH_DIR (the files; default /tmp/strider-storage, or
# /tmp/strider-storage-quick), BENCH_OUT (default $BENCH_DIR/results), WORKLOADS ("unet3d resnet50
# cosmoflow"), MAX_ACCELERATORS (8; quick 2), TARGET_ACCELERATORS (4), REFINE_STEPS (4; quick 1; 0:
# no refinement), COPY_THREADS (strider's --copy-threads, 2; quick 1), PEER_WORKERS (2), PEER_DROP (file:
# posix_fadvise DONTNEED on the file; all: /proc/sys/vm/drop_caches, root only, empties the whole
# machine's page cache), FIO_SECONDS (2, each of the median's three runs; quick 1), RING_MEMORY_GB,
# SLOWDOWN_unet3d / SLOWDOWN_resnet50 / SLOWDOWN_cosmoflow.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/common.sh"

quick=${STORAGE_QUICK:-0}
bin=${STRIDER_BIN:-$build_dir/bin}
if [[ $quick == 1 ]]; then data=${BENCH_DIR:-/tmp/strider-storage-quick}; else data=${BENCH_DIR:-/tmp/strider-storage}; fi
out=${BENCH_OUT:-$data/results}
workloads=${WORKLOADS:-unet3d resnet50 cosmoflow}
max_accelerators=${MAX_ACCELERATORS:-$([[ $quick == 1 ]] && echo 2 || echo 8)}
target=${TARGET_ACCELERATORS:-4}
# Two copy threads per rank: a batch of one large sample (cosmoflow) is read in two pieces at once,
# and fio gets as many jobs; quick mode keeps one (one fio job per rank, as the CI test checks).
copy_threads=${COPY_THREADS:-$([[ $quick == 1 ]] && echo 1 || echo 2)}
peer_workers_wanted=${PEER_WORKERS:-2}
peer_drop=${PEER_DROP:-file}
refine_steps=${REFINE_STEPS:-$([[ $quick == 1 ]] && echo 1 || echo 4)}
fio_seconds=${FIO_SECONDS:-$([[ $quick == 1 ]] && echo 1 || echo 2)}
python=/usr/bin/python3
seed=0
[[ $refine_steps =~ ^[0-9]+$ ]] || { echo "storage: REFINE_STEPS must be a whole number >= 0, got '$refine_steps'" >&2; exit 1; }

for tool in strider-gen strider-bench strider-inspect; do
  [[ -x $bin/$tool ]] || { echo "storage: $bin/$tool is missing: build first (or set STRIDER_BIN)" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "storage: fio is missing: run bench/scripts/setup-bench.sh" >&2; exit 1; }
[[ -x $python ]] || { echo "storage: $python is missing (the summary needs it): run scripts/setup.sh" >&2; exit 1; }
peer_ready=1
peer_missing=$($python -c "import torch, h5py" 2>&1 | tail -n 1) || peer_ready=0

mkdir -p "$data" "$out/logs"
rm -f "$out"/*.json "$out"/*.jsonl "$out"/storage.md "$out"/storage.png
started=$(date +%s)
log() { printf '[%4ds] %s\n' $(($(date +%s) - started)) "$*"; }
launch=(mpirun --bind-to none)

available_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
ring_memory_gb=${RING_MEMORY_GB:-$(awk -v k="$available_kib" 'BEGIN { printf "%.1f", k * 1024 * 0.4 / 1e9 }')}
ring_memory_bytes=$(awk -v g="$ring_memory_gb" 'BEGIN { printf "%.0f", g * 1e9 }')
filesystem="$(df -h --output=source,fstype,size "$data" | tail -n 1 | awk '{ print $1 " (" $2 ", " $3 ")" }')"
{
  echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r)"
  echo "storage: $data on $filesystem; a virtual disk's host may cache what it reads"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "memory for batches read ahead: $ring_memory_gb GB (of $((available_kib / 1048576)) GiB available)"
  echo "peer page cache drop: $peer_drop ($([[ $peer_drop == file ]] && echo 'posix_fadvise DONTNEED on the file, every rank' || echo '/proc/sys/vm/drop_caches'))"
  [[ $quick == 1 ]] && echo "STORAGE_QUICK=1: tiny records, counts 1 and 2, slowdown 1: the figures are not the workloads'"
  [[ $peer_ready == 1 ]] || echo "peer skipped: python3-torch and python3-h5py-mpi are needed ($peer_missing): bench/scripts/setup-bench.sh"
} | tee "$out/machine.txt"

# The presets, as strider-bench --workload sets them.
preset() { "$bin/strider-inspect" workloads | awk -v w="$1" '$1 == w { print $2, $4, $5, $6 }'; }

# fio_rate MODE JOBS FILE BLOCK: bytes/s of O_DIRECT psync reads (MODE read or randread) over the file.
fio_rate() {
  local mode=$1 jobs=$2 file=$3 block=$4 size region
  size=$(stat -c %s "$file")
  region=$((size / jobs / block * block))
  local extra=()
  # Sequential jobs each read their own part; random ones roam the whole file.
  [[ $mode == read ]] && extra=(--size="$region" --offset_increment="$region")
  fio --name=limit --filename="$file" --readonly --rw="$mode" --bs="$block" --direct=1 --ioengine=psync \
    --numjobs="$jobs" --time_based --runtime="$fio_seconds" --group_reporting --output-format=terse \
    "${extra[@]}" 2>>"$out/logs/fio.err" | awk -F';' 'NR == 1 { printf "%.0f\n", $7 * 1024 }'
}

# gbps BYTES_PER_S: the rate in GB/s, three decimals (for the log).
gbps() { awk -v b="$1" 'BEGIN { printf "%.3f", b / 1e9 }'; }

# median_of_three COMMAND...: the middle of three runs' numbers (the largest could be a run the
# virtual disk's host served from its cache; the smallest one another job disturbed).
median_of_three() {
  { "$@"; "$@"; "$@"; } | sort -n | sed -n 2p
}

# fio_at WORKLOAD JOBS FILE BLOCK: both rates at JOBS jobs (each the median of three; one run in
# quick mode), once, kept in $out/fio.jsonl.
declare -A fio_random
fio_at() {
  local key="$1/$2"
  [[ -n ${fio_random[$key]:-} ]] && return
  local random sequential
  local repeat=(median_of_three)
  [[ $quick == 1 ]] && repeat=()
  random=$("${repeat[@]}" fio_rate randread "$2" "$3" "$4")
  sequential=$("${repeat[@]}" fio_rate read "$2" "$3" "$4")
  fio_random[$key]=$random
  printf '{"workload": "%s", "jobs": %s, "block_bytes": %s, "random_bytes_per_s": %s, "sequential_bytes_per_s": %s}\n' \
    "$1" "$2" "$4" "$random" "$sequential" >>"$out/fio.jsonl"
  log "fio $1, $2 jobs, $4-byte reads: random $(gbps "$random") GB/s, sequential $(gbps "$sequential") GB/s"
}

# search CAP RUN: the largest count in 1..CAP at which `RUN count` holds the threshold (RUN returns 0
# when it held, 1 when not, 2 when it failed to run): 1, 2, 4, ... (CAP after the last power of two)
# until one does not hold, then bisection between the last that held and the first that did not.
# Leaves that count in searched_held (0: none held, or a run failed).
search() {
  local cap=$1 run=$2 held=0 failed=0 count=1 status
  searched_held=0
  while ((count <= cap)); do
    status=0
    $run $count || status=$?
    ((status == 2)) && return 0
    if ((status == 0)); then
      held=$count
      ((count == cap)) && break
      count=$((count * 2 > cap ? cap : count * 2))
    else
      failed=$count
      break
    fi
  done
  while ((failed > held + 1)); do
    count=$(((held + failed) / 2))
    status=0
    $run $count || status=$?
    ((status == 2)) && return 0
    if ((status == 0)); then held=$count; else failed=$count; fi
  done
  searched_held=$held
}

# refine N: at N ranks, the largest count the grid held, the shortest step (the largest demand) that
# still holds the threshold: the counts are powers of two and bisection, so the demand at N can lie
# well below what the storage delivers (it feeds 3.6 accelerators, the grid holds 2). First the step
# that asks exactly fio's random-read rate at N x copy threads jobs (kept when it holds), else
# REFINE_STEPS bisections of the demand between the grid's step and that one. A demand is asked with
# the step as it is measured: the grid run's overshoot per step (a sleep's wake-up latency, a share of
# millisecond steps) is taken off the nominal step (at most down to a tenth of the period). Each run
# writes refine-<workload>-N-<i>.json (i = 0: fio's rate; 1, 2, ...: the bisections); the summary
# takes the held run with the largest demand (the grid's run when none held).
refine() {
  local n=$1 limit=${fio_random[$workload/$(($1 * copy_threads))]} overshoot held failed demand i=0 status=0
  overshoot=$($python -c "import sys; sys.path.insert(0, sys.argv[1]); from storage_summary import load, step_overshoot_s
print(f'{step_overshoot_s(load(sys.argv[2])):.9f}')" "$here" "$out/strider-$workload-$n.json")
  held=$(awk -v n="$n" -v b="$batch_bytes" -v s="$step_s" -v o="$overshoot" 'BEGIN { printf "%.0f", n * b / (s + o) }')
  if ((limit <= held + held / 100)); then
    log "strider $workload at $n: the grid's step already asks for fio's $(gbps "$limit") GB/s: nothing to refine"
    return 0
  fi
  log "strider $workload at $n: refining towards fio's $(gbps "$limit") GB/s (the grid's step asks $(gbps "$held") GB/s as measured, $overshoot s over per step)"
  demand=$limit
  while :; do
    # The slowdown whose step (as measured) makes N ranks ask for `demand` bytes per second.
    status=0
    strider_run "$n" "$(awk -v n="$n" -v b="$batch_bytes" -v c="$compute_s" -v d="$demand" -v o="$overshoot" \
      'BEGIN { period = n * b / d; step = period - o; if (step < period / 10) step = period / 10; printf "%.4g", step / c }')" \
      "refine-$workload-$n-$i" || status=$?
    ((status == 2)) && return 0
    if ((status == 0)); then held=$demand; else failed=$demand; fi
    ((i == 0 && status == 0)) && return 0
    ((i >= refine_steps)) && return 0
    i=$((i + 1))
    demand=$(((held + failed) / 2))
  done
}

json_field() { $python -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2" 2>/dev/null; }

port=$((29500 + RANDOM % 2000))
for workload in $workloads; do
  read -r sample_bytes batch compute_s threshold < <(preset "$workload")
  [[ -n ${sample_bytes:-} ]] || { echo "storage: unknown workload '$workload' (strider-inspect workloads)" >&2; exit 1; }
  # Steps per epoch and epochs (each epoch's first step is outside the AU window), and the most
  # accelerators the file serves that many steps per epoch (a unet3d sample is 146.6 MB: 56 of them
  # are 8.2 GB).
  case $workload in
    unet3d) steps=2 epochs=3 file_accelerators=4 ;;
    resnet50) steps=4 epochs=3 file_accelerators=$max_accelerators ;;
    *) steps=32 epochs=3 file_accelerators=$max_accelerators ;;
  esac
  record_bytes=$sample_bytes
  if [[ $quick == 1 ]]; then
    steps=2 epochs=2 file_accelerators=$max_accelerators
    record_bytes=$((sample_bytes / 4096 / 256 * 4096))
    ((record_bytes >= 4096)) || record_bytes=4096
  fi
  variable=FILE_ACCELERATORS_$workload
  file_accelerators=${!variable:-$file_accelerators}
  batch_bytes=$((record_bytes * batch))
  # Memory caps: strider needs 2 batches per rank, the peer (workers x 2 + 2); and the file's.
  strider_cap=$((ring_memory_bytes / (2 * batch_bytes)))
  ((strider_cap > file_accelerators)) && strider_cap=$file_accelerators
  peer_workers=$peer_workers_wanted
  peer_cap=$((ring_memory_bytes / ((peer_workers * 2 + 2) * batch_bytes)))
  if ((peer_cap < 2 && peer_workers > 1)); then
    peer_workers=1
    peer_cap=$((ring_memory_bytes / (4 * batch_bytes)))
  fi
  ((peer_cap > file_accelerators)) && peer_cap=$file_accelerators
  if ((strider_cap < 1)); then
    log "$workload: one rank needs 2 batches of $batch_bytes bytes, more than $ring_memory_gb GB: skipped"
    continue
  fi
  # Strider's ring depth: 2 for batches of 256 MB or more (touching each costs about a second here), else auto.
  prefetch=()
  ((batch_bytes >= 256000000)) && prefetch=(--prefetch 2)

  # ---- the file ----
  samples=$((file_accelerators * batch * steps))
  file=$data/$workload.h5
  stamp="--workload $workload --record-bytes $record_bytes --samples $samples --seed 1"
  if [[ -f $file && -f $file.options && $(cat "$file.options") == "$stamp" ]]; then
    log "$workload.h5 present ($samples samples of $record_bytes bytes)"
  else
    log "generating $workload.h5: $samples samples of $record_bytes bytes"
    rm -f "$file" "$file.options"
    # shellcheck disable=SC2086
    "${launch[@]}" -np 2 "$bin/strider-gen" --out "$file" --no-progress $stamp >"$out/logs/gen-$workload.log" 2>&1
    echo "$stamp" >"$file.options"
  fi
  sync "$file"
  dd if="$file" iflag=nocache count=0 status=none  # out of the page cache (the peer reads through it)

  # ---- the slowdown ----
  variable=SLOWDOWN_$workload
  if [[ -n ${!variable:-} ]]; then
    slowdown=${!variable}
    why="set by $variable"
  elif [[ $quick == 1 ]]; then
    slowdown=1
    why="quick mode"
  else
    fio_at "$workload" $((target * copy_threads)) "$file" "$record_bytes"
    slowdown=$(awk -v n="$target" -v b="$batch_bytes" -v c="$compute_s" -v f="${fio_random[$workload/$((target * copy_threads))]}" \
      'BEGIN { printf "%.3g", n * b / c / f }')
    why="$target accelerators ask for all of fio's random-read bandwidth at $((target * copy_threads)) jobs"
  fi
  step_s=$(awk -v c="$compute_s" -v x="$slowdown" 'BEGIN { printf "%.6g", c * x }')
  log "$workload: batch $batch x $record_bytes bytes, step $step_s s (x$slowdown: $why); counts up to $strider_cap (strider), $peer_cap (peer, $peer_workers workers)"
  order=$((${order:-0} + 1))
  printf '{"order": %s, "workload": "%s", "sample_bytes": %s, "batch_size": %s, "compute_s": %s, "au_threshold": %s, "slowdown": %s, "slowdown_why": "%s", "step_s": %s, "steps_per_epoch": %s, "epochs": %s, "samples": %s, "strider_cap": %s, "peer_cap": %s, "peer_workers": %s, "copy_threads": %s, "target_accelerators": %s}\n' \
    "$order" "$workload" "$record_bytes" "$batch" "$compute_s" "$threshold" "$slowdown" "$why" "$step_s" "$steps" "$epochs" \
    "$samples" "$strider_cap" "$peer_cap" "$peer_workers" "$copy_threads" "$target" >"$out/setup-$workload.json"

  # ---- strider ----
  # strider_run COUNT SLOWDOWN NAME [OPTION...]: one run, $out/NAME.json and logs/NAME.log; returns as
  # search's RUN.
  strider_run() {
    local count=$1 result=$out/$3.json
    if ! "${launch[@]}" -np "$count" "$bin/strider-bench" --data "$file" --workload "$workload" \
      --accelerator-slowdown "$2" --engine direct --odirect --copy-threads "$copy_threads" --epochs "$epochs" \
      --steps "$steps" --ring-memory-gb "$ring_memory_gb" --seed $seed "${prefetch[@]}" --json "$result" "${@:4}" \
      >"$out/logs/$3.log" 2>&1; then
      log "strider $workload at $count (x$2): FAILED (see $out/logs/$3.log)"
      return 2
    fi
    log "strider $workload at $count (x$2): $(grep -m1 '^  AU' "$out/logs/$3.log" | sed 's/^  //')"
    [[ $(json_field "$result" passed) == True ]]
  }
  run_strider() {
    fio_at "$workload" $(($1 * copy_threads)) "$file" "$record_bytes"
    strider_run "$1" "$slowdown" "strider-$workload-$1"
  }
  search "$strider_cap" run_strider
  if ((searched_held > 0 && refine_steps > 0)); then refine "$searched_held"; fi
  # DLIO's own order at each count the grid ran, the same step: each rank its contiguous block,
  # shuffled inside (--shuffle local), which is what the published AU results read.
  for grid_run in "$out"/strider-"$workload"-*.json; do
    [[ -f $grid_run ]] || continue
    count=${grid_run##*-}
    count=${count%.json}
    strider_run "$count" "$slowdown" "local-$workload-$count" --shuffle local || true
  done

  # ---- the peer ----
  [[ $peer_ready == 1 ]] || continue
  run_peer() {
    local count=$1 result=$out/peer-$workload-$1.json
    port=$((port + 1))
    if ! "${launch[@]}" -np "$count" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port -x PYTHONWARNINGS=ignore \
      $python "$here/storage_peer.py" --data "$file" --workload "$workload" --batch-size "$batch" --compute-s "$step_s" \
      --au-threshold "$threshold" --epochs "$epochs" --steps "$steps" --workers "$peer_workers" --drop "$peer_drop" \
      --seed $seed --json "$result" >"$out/logs/peer-$workload-$count.log" 2>&1; then
      log "peer $workload at $count: FAILED (see $out/logs/peer-$workload-$count.log)"
      return 2
    fi
    log "$(grep -m1 '^peer' "$out/logs/peer-$workload-$count.log")"
    [[ $(json_field "$result" passed) == True ]]
  }
  search "$peer_cap" run_peer
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
echo "seconds: $(($(date +%s) - started))" >>"$out/machine.txt"
$python "$here/storage_summary.py" "$out" $([[ $quick == 1 ]] && echo --quick)
log "done in $(($(date +%s) - started)) s: $out/storage.json, $out/storage.md, $out/storage.png"
