#!/usr/bin/env bash
# strider side by side with the PyTorch data stack and with the machine's limits, on the same files,
# in one run (DESIGN.md section 5). Prints a table with the ratios and writes
# $BENCH_OUT/results.json and $BENCH_OUT/compare.png.
#
#   bench/scripts/setup-bench.sh        # once: torch, h5py-mpi, mpi4py, matplotlib (Debian packages)
#   bench/scripts/compare.sh            # about 10 minutes on 2 cores, the first time with the files
#
# Workloads, each at 1 and 2 ranks (RANKS="1 2"):
#   w1  1,000,000 x 64 float32 with labels, shuffled (distributed sampler), batches of 256; measured in
#       steady state (strider-bench --warmup-epochs, as the gather limit is warmed; see below)
#   w2  8,192 x 64 KiB (16384 float32) rows, shuffled, batches of 32
#   w3  200,000 sequences (median 64, max 512 int32 tokens), bucketed under 16384 tokens per batch
#   w4  1,000,000 x 64 float32, 10 classes, imbalance 100, class-balanced (weighted sampler, 1/count)
# each 2-rank repeat of w3 and w4 followed by 1 rank (the pair the scaling goal reads) and by 1 rank
# held to one core (taskset): the scaling of 2 ranks per core, beside the 1-rank figure whose
# next-epoch plan has the second core to itself;
# plus, on w1: strider from Python (bench/scripts/python_loop.py: strider.Loader, each batch wrapped with
# torch.from_numpy) beside strider-bench's C++ loop and the peer; the same rows split over 8 shards (read as one
# dataset; strider-bench within 10% of the one file is the target); runs with --compute-us at 1x, 2x (and 4x) the
# measured time to read a batch, as a busy wait on the clock, a sleep and fixed CPU work (stall fraction; with CPU
# work also with each thread layout forced: --io-thread yes / no), --cold, and the streaming sampler's peak RSS at
# N = 100,000, 1,000,000 and 10,000,000 (with and without the labels dataset; the distributed sampler beside it).
#
# Then the in-memory store and --lookahead (bench/scripts/store.sh: its own files, goals and
# $BENCH_OUT/store/store.json; about 2 minutes), and last the sampler microbenchmarks
# (bench/sampler_bench.cpp, built when Google Benchmark is installed).
#
# BENCH_ONLY=python runs only what the Python comparison needs (w1: strider-bench, the Python loop, the peer, the
# limits): about 2 minutes with the file present.
#
# BENCH_ONLY=baseline BASELINE_BIN=DIR compares two builds of strider-bench on w1 (DIR's, e.g. the
# commit before a change, against $STRIDER_BIN's): at each rank count, W1_REPEATS runs of each,
# alternating (each build first in half the pairs), so that both see the same phases of the
# machine's drift. Prints each build's median samples/s and time to first batch and the median of
# the pairs' ratios (this build / the baseline), and writes $BENCH_OUT/baseline.json.
# BENCH_ONLY=short does the same with a short job against a long one (RANKS default 1 2 4): one
# epoch in a fresh process (a smoke test, an evaluation pass, every job's first epoch: no warm-up,
# the first touch of the file's pages and of the plans' memory included) against three, and
# writes $BENCH_OUT/short.json. Neither needs torch nor the limits (bench/scripts/summarize_pairs.py).
#
# Environment: STRIDER_BIN (the folder with strider-gen and strider-bench; default build/bin), STRIDER_PYTHONPATH
# (where `import strider` is found; default $STRIDER_BIN/../python),
# SAMPLER_BENCH (default $STRIDER_BIN/../bench/strider_sampler_bench),
# BENCH_DIR (the data files, kept between runs; default /tmp/strider-bench), BENCH_OUT (results;
# default $BENCH_DIR/results), RANKS, PEER_BATCHES (500), PEER_WARMUP (20), PEER_WORKERS (0,1,2),
# REPEATS (3: every strider figure is the median of this many runs; the peer's is its best
# num_workers over 500 timed batches; the limits are the best of three), W1_REPEATS (5: the runs of w1,
# w3 and w4, each with its gathers beside it and w1's with its Python loop; the ratios are the
# median of the pairs').
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/scripts/settings.sh
source "$here/settings.sh"
ranks_list=${RANKS:-1 2}
[[ ${BENCH_ONLY:-} == short ]] && ranks_list=${RANKS:-1 2 4}
peer_batches=${PEER_BATCHES:-500}
peer_warmup=${PEER_WARMUP:-20}
peer_workers=${PEER_WORKERS:-0,1,2}
repeats=${REPEATS:-3}
w1_repeats=${W1_REPEATS:-5}  # w1, w3 and w4 carry the ratios the goals read: more pairs against the drift
only=${BENCH_ONLY:-}
pythonpath=${STRIDER_PYTHONPATH:-$bin/../python}
seed=0

for tool in strider-gen strider-bench; do
  [[ -x $bin/$tool ]] || { echo "compare: $bin/$tool is missing: build first (or set STRIDER_BIN)" >&2; exit 1; }
done
if [[ $only == baseline ]]; then
  [[ -x ${BASELINE_BIN:-}/strider-bench ]] ||
    { echo "compare: BENCH_ONLY=baseline needs BASELINE_BIN, a folder with another build's strider-bench" >&2; exit 1; }
elif [[ $only != short ]]; then
  $python -c "import torch, h5py, numpy" 2>/dev/null ||
    { echo "compare: the peer needs python3-torch and python3-h5py-mpi: run bench/scripts/setup-bench.sh" >&2; exit 1; }
fi
mkdir -p "$data" "$out/logs"
rm -rf "$out"/*.json "$out/runs"
mkdir -p "$out/runs"
launch=(mpirun --bind-to none --oversubscribe)  # --oversubscribe: RANKS may exceed the cores
# The first CPU this script may run on (taskset -c for the runs held to one core).
first_cpu=$(taskset -pc $$ | sed -E 's/.*: *//; s/[-,].*//')
started=$(date +%s)
log() { printf '[%4ds] %s\n' $(($(date +%s) - started)) "$*"; }
echo "# machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"); load before: $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee "$out/machine.txt"

# ---- the files (kept in $BENCH_DIR; regenerated when their options change) ----
generate() {  # NAME strider-gen options...
  local name=$1
  shift
  local file=$data/$name.h5 stamp="$*"
  if [[ -f $file && -f $file.options && $(cat "$file.options") == "$stamp" ]]; then
    log "$name.h5 present"
    return
  fi
  log "generating $name.h5: $stamp"
  rm -f "$file" "$file.options"
  "${launch[@]}" -np 2 "$bin/strider-gen" --out "$file" --seed 1 --no-progress "$@" >"$out/logs/gen-$name.log" 2>&1
  echo "$stamp" >"$file.options"
}
generate w1 --kind features --samples 1000000 --dim 64 --classes 10
if [[ $only == baseline || $only == short ]]; then
  # pair_run KIND RANKS K: one strider-bench run of w1 of this kind, into runs/KIND-w1-rRANKS.K.json.
  pair_run() {
    local kind=$1 ranks=$2 k=$3 run_bin=$bin args=(--data "$data/w1.h5" --batch-size 256)
    case $kind in
      baseline) run_bin=$BASELINE_BIN args+=(--epochs 10 --warmup-epochs 3) ;;
      current) args+=(--epochs 10 --warmup-epochs 3) ;;
      epochs3) args+=(--epochs 3) ;;
      epochs1) args+=(--epochs 1) ;;
    esac
    "${launch[@]}" -np "$ranks" "$run_bin/strider-bench" --seed "$seed" "${args[@]}" \
      --json "$out/runs/$kind-w1-r$ranks.$k.json" >"$out/logs/$kind-w1-r$ranks.$k.log" 2>&1 ||
      { log "$kind w1 at $ranks ranks FAILED (see $out/logs/$kind-w1-r$ranks.$k.log)"; exit 1; }
  }
  kinds=(baseline current)
  [[ $only == short ]] && kinds=(epochs3 epochs1)
  for ranks in $ranks_list; do
    for ((k = 1; k <= w1_repeats; ++k)); do
      if ((k % 2 == 1)); then  # each kind goes first in half the pairs
        pair_run "${kinds[0]}" "$ranks" "$k" && pair_run "${kinds[1]}" "$ranks" "$k"
      else
        pair_run "${kinds[1]}" "$ranks" "$k" && pair_run "${kinds[0]}" "$ranks" "$k"
      fi
      log "w1 at $ranks ranks, pair $k of $w1_repeats done"
    done
  done
  $python "$here/summarize_pairs.py" "$out" "$w1_repeats" "${kinds[0]}" "${kinds[1]}" "$only" $ranks_list
  log "done in $(($(date +%s) - started)) s: $out/$only.json"
  exit 0
fi
if [[ $only != python ]]; then
  generate w2 --kind features --samples 8192 --dim 16384 --classes 10
  generate w3 --kind sequences --samples 200000 --median-len 64 --max-len 512 --classes 10
  generate w4 --kind features --samples 1000000 --dim 64 --classes 10 --imbalance 100
  generate small --kind features --samples 100000 --dim 64 --classes 10
  generate big --kind features --samples 10000000 --dim 4 --classes 10  # streaming RSS at N = 10M (200 MB)
fi

g++ -O2 -std=c++17 -o "$out/gather_limit" "$here/gather_limit.cpp"

# Byte offset and size of a contiguous dataset (DATA KEY) for the limits.
layout() { $python -c "import h5py,sys; d=h5py.File(sys.argv[1],'r')[sys.argv[2]]; print(d.id.get_offset(), d.id.get_storage_size(), d.shape[0], d.dtype.itemsize * (int(d.size) // max(1, d.shape[0]) if d.ndim > 1 else 1))" "$1" "$2"; }

# ---- the limits ----
# The gather limit for R ranks is R gathers running at once (gather_limit --processes R), measured
# for every R in $RANKS, with and without the labels (strider delivers them with the rows); each
# also gives rows per CPU-second, the bare gather's CPU efficiency.
limits() {  # NAME KEY BATCH [OFFSETS_KEY]
  local name=$1 key=$2 batch=$3 file=$data/$1.h5
  read -r offset bytes rows unit < <(layout "$file" "$key")
  cat "$file" >/dev/null  # warm-up read: the file is in the page cache
  local best=0 line
  for _ in 1 2 3; do  # the best of three (the machine is shared)
    line=$(LC_ALL=C dd if="$file" of=/dev/null bs=4M iflag=skip_bytes,count_bytes skip="$offset" count="$bytes" 2>&1 | tail -n 1)
    best=$(awk -v line="$line" -v best="$best" 'BEGIN { split(line, f, " "); rate = f[1] / f[8]; print (rate > best ? rate : best) }')
  done
  local args=(--file "$file" --data-offset "$offset" --batch "$batch" --seconds 1)
  if [[ $# -ge 4 ]]; then  # variable-length rows: offsets[rows + 1] say where each starts
    local offsets_at offsets_rows
    read -r offsets_at _ offsets_rows _ < <(layout "$file" "$4")
    args+=(--element-bytes "$unit" --offsets-at "$offsets_at" --rows "$((offsets_rows - 1))")
  else
    args+=(--row-bytes "$unit" --rows "$rows")
  fi
  local labels_at label_bytes
  read -r labels_at _ _ label_bytes < <(layout "$file" /labels)
  printf '%q ' "${args[@]}" >"$out/limit-args-$name"  # for paired_gather
  printf '%q ' --labels-at "$labels_at" --label-bytes "$label_bytes" >"$out/limit-label-args-$name"
  local by_ranks="" with_labels="" gather one
  for r in $ranks_list; do
    gather=$("$out/gather_limit" "${args[@]}" --processes "$r")
    [[ $r == 1 ]] && one=$gather
    by_ranks+="${by_ranks:+, }\"$r\": $gather"
    with_labels+="${with_labels:+, }\"$r\": $("$out/gather_limit" "${args[@]}" --processes "$r" --labels-at "$labels_at" --label-bytes "$label_bytes")"
  done
  printf '{"workload": "%s", "sequential_read_bytes_per_s": %s, "sequential_read_bytes": %s, "gather": %s, "gather_by_ranks": {%s}, "gather_with_labels_by_ranks": {%s}}\n' \
    "$name" "$best" "$bytes" "${one:-null}" "$by_ranks" "$with_labels" >"$out/limit-$name.json"
  log "limits $name: sequential $(awk -v b="$best" 'BEGIN { printf "%.2f GB/s", b / 1e9 }'), gather rows/s by ranks:" \
    "$(grep -o '"[0-9]*": {"processes": [0-9]*, "labels": false, "rows_per_s": [0-9.]*' <<<"$by_ranks" | sed -E 's/"([0-9]+)".*"rows_per_s": ([0-9.]+)/\1: \2/' | tr '\n' ' ')"
}

# ---- strider, strider from Python, and the peer ----
keep_median() {  # KIND TAG: of runs/KIND-TAG.K.json, keep the median (by samples/s) as KIND-TAG.json
  local kind=$1 tag=$2 k
  k=$($python -c "import json,sys; runs=sorted(sys.argv[1:], key=lambda p: json.load(open(p))['samples_per_s']); print(runs[len(runs)//2].rsplit('.',2)[-2])" \
    "$out"/runs/"$kind-$tag".*.json)
  cp "$out/runs/$kind-$tag.$k.json" "$out/$kind-$tag.json"
  cp "$out/logs/$kind-$tag.$k.log" "$out/logs/$kind-$tag.log"
  echo "$k" >"$out/runs/$kind-$tag.kept"
}
# This machine's speed drifts (2x within minutes: a virtual machine on a shared host), so a limit
# measured once at the start can sit in another phase than the run set against it. With
# PAIRED=NAME, strider() runs the gather limit of NAME (R processes, with and without the labels)
# just before each repeat, into runs/gather[-labels]-TAG.K.json; pair_limits then sets the limit
# of R ranks to the gathers paired with the run kept as the median. With WITH_PYTHON=1 each repeat
# is followed by one of the Python loop with the same options (runs/python-TAG.K.json). summarize.py
# sets every ratio of runs measured this way (strider against the gathers, Python against C++) to
# the median of the repeats' own ratios: each ratio divides runs minutes apart at most, not the
# median of one series by the median of another measured in a different phase.
paired_gather() {  # NAME RANKS TAG K
  local args label_args
  eval "args=($(cat "$out/limit-args-$1"))"
  eval "label_args=($(cat "$out/limit-label-args-$1"))"
  "$out/gather_limit" "${args[@]}" --processes "$2" >"$out/runs/gather-$3.$4.json"
  "$out/gather_limit" "${args[@]}" --processes "$2" "${label_args[@]}" >"$out/runs/gather-labels-$3.$4.json"
}
pair_limits() {  # NAME: limit-NAME.json's per-rank gathers from the pairs of the kept NAME-rR runs
  $python - "$out" "$1" <<'EOF'
import glob, json, os, sys
out, name = sys.argv[1], sys.argv[2]
path = os.path.join(out, f"limit-{name}.json")
limit = json.load(open(path))
for kept in glob.glob(os.path.join(out, "runs", f"strider-{name}-r*.kept")):
    tag = os.path.basename(kept)[len("strider-"):-len(".kept")]
    ranks, k = tag.rsplit("-r", 1)[1], open(kept).read().strip()
    for key, prefix in (("gather_by_ranks", "gather"), ("gather_with_labels_by_ranks", "gather-labels")):
        pair = os.path.join(out, "runs", f"{prefix}-{tag}.{k}.json")
        if os.path.exists(pair):
            limit.setdefault(key, {})[ranks] = dict(json.load(open(pair)), paired_with_run=int(k))
    if ranks == "1" and "1" in limit.get("gather_by_ranks", {}):
        limit["gather"] = limit["gather_by_ranks"]["1"]
limit["paired"] = True
json.dump(limit, open(path, "w"))
EOF
}
one_rank() {  # KIND TAG K [PREFIX...] -- strider-bench options...: 1 rank into runs/KIND-TAG.K.json
  local kind=$1 tag=$2 k=$3 prefix=()
  shift 3
  while [[ $1 != -- ]]; do
    prefix+=("$1")
    shift
  done
  shift
  "${prefix[@]}" "${launch[@]}" -np 1 "$bin/strider-bench" --seed "$seed" --json "$out/runs/$kind-$tag.$k.json" "$@" \
    >"$out/logs/$kind-$tag.$k.log" 2>&1 || log "$kind $tag FAILED (see $out/logs/$kind-$tag.$k.log)"
}
strider() {  # TAG RANKS strider-bench options...: the median of $repeats runs (by samples/s)
  local tag=$1 ranks=$2 k
  shift 2
  local python_ok=""
  if [[ -n ${WITH_PYTHON:-} ]]; then
    if PYTHONPATH=$pythonpath $python -c "import strider, mpi4py" 2>/dev/null; then
      python_ok=1
    else
      log "python $tag skipped: no strider module in $pythonpath (build with the Python module) or no mpi4py"
    fi
  fi
  for ((k = 1; k <= repeats; ++k)); do
    if [[ -n ${PAIRED:-} ]]; then paired_gather "$PAIRED" "$ranks" "$tag" "$k"; fi
    "${launch[@]}" -np "$ranks" "$bin/strider-bench" --seed "$seed" --json "$out/runs/strider-$tag.$k.json" "$@" \
      >"$out/logs/strider-$tag.$k.log" 2>&1 || { log "strider $tag FAILED (see $out/logs/strider-$tag.$k.log)"; return 0; }
    # 1 rank with the same options just after: the scaling's pair, then held to one core.
    if [[ -n ${WITH_ONE_RANK:-} ]]; then one_rank onerank "$tag" "$k" -- "$@"; fi
    if [[ -n ${WITH_ONE_CORE:-} ]]; then one_rank onecore "$tag" "$k" taskset -c "$first_cpu" -- "$@"; fi
    if [[ -n $python_ok ]] && ! python_run "$tag" "$ranks" "$k" "$@"; then
      log "python $tag FAILED (see $out/logs/python-$tag.$k.log)"
      python_ok=""
      rm -f "$out"/runs/python-"$tag".*.json
    fi
  done
  keep_median strider "$tag"
  log "strider $tag (median of $repeats): $(grep -m1 '^  total' "$out/logs/strider-$tag.log" | sed 's/^  total //; s/, read\/useful.*//')"
  if [[ -n $python_ok ]]; then
    keep_median python "$tag"
    log "python $tag (median of $repeats): $(grep -m1 '^python loop' "$out/logs/python-$tag.log" | sed 's/^python loop //')"
  fi
}
python_run() {  # TAG RANKS K python_loop.py options...: repeat K of strider.Loader from Python
  local tag=$1 ranks=$2 k=$3
  shift 3
  "${launch[@]}" -np "$ranks" -x PYTHONPATH="$pythonpath" $python "$here/python_loop.py" --seed "$seed" \
    --json "$out/runs/python-$tag.$k.json" "$@" >"$out/logs/python-$tag.$k.log" 2>&1
}
port=$((29500 + RANDOM % 2000))
peer() {  # TAG RANKS torch_peer options...
  local tag=$1 ranks=$2
  shift 2
  port=$((port + 1))
  "${launch[@]}" -np "$ranks" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port -x PYTHONWARNINGS=ignore \
    $python "$here/torch_peer.py" --seed "$seed" --batches "$peer_batches" --warmup "$peer_warmup" \
    --workers "$peer_workers" --json "$out/peer-$tag.json" "$@" >"$out/logs/peer-$tag.log" 2>&1 ||
    { log "peer $tag FAILED (see $out/logs/peer-$tag.log)"; return 0; }
  log "peer $tag: $(grep '^peer' "$out/logs/peer-$tag.log" | awk '{print $3, $4, $6}' | tr '\n' ';')"
}

limits w1 /samples 256
# w1 is measured in steady state, as the gather limit is (it touches every row before its clock
# starts): a process's first epochs over the mapping, the ring and the plans' memory cost several
# times a later one on this virtual machine (shadow page tables: each page's first access traps).
# The warm-up epochs count in no figure but the time to first batch; --cold runs have none.
w1_epochs="--epochs 10 --warmup-epochs 3"
w1_step_epochs="--epochs 2 --warmup-epochs 2"
# w3 and w4 likewise, each repeat with its gathers beside it: their ratios to the gather are the
# goals' too. w3's epoch takes about a fifth of w1's (4-8 ms), so it runs 50 to be timed over about
# as long as w1 is: over 10 (40-80 ms) one pause of the machine moves a run's figure by a tenth.
# w4's epoch takes about w1's.
w3_epochs="--epochs 50 --warmup-epochs 2"
w4_epochs="--epochs 4 --warmup-epochs 2"
if [[ $only == python ]]; then
  for ranks in $ranks_list; do
    PAIRED=w1 WITH_PYTHON=1 repeats=$w1_repeats strider "w1-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 $w1_epochs
    peer "w1-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --sampler distributed
  done
  pair_limits w1
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
  $python "$here/summarize.py" "$out"
  log "done in $(($(date +%s) - started)) s: $out/results.json"
  exit 0
fi
limits w2 /samples 32
limits w3 /tokens 256 /offsets
limits w4 /samples 256

for ranks in $ranks_list; do
  PAIRED=w1 WITH_PYTHON=1 repeats=$w1_repeats strider "w1-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 $w1_epochs
  strider "w2-r$ranks" "$ranks" --data "$data/w2.h5" --batch-size 32 --epochs 4
  # At 2 ranks each repeat of w3 and w4 is followed by 1 rank (WITH_ONE_RANK), whose ratios give the
  # scaling goal (a pair minutes apart at most, not two series in different phases of the
  # machine), then by 1 rank held to one core (WITH_ONE_CORE): the 1-rank runs plan the next epoch
  # on the second core while the first reads, which 2 ranks on 2 cores cannot, so 2 ranks are also
  # set against the same cores per rank.
  one_core=""
  [[ $ranks == 2 ]] && one_core=1
  PAIRED=w3 WITH_ONE_RANK=$one_core WITH_ONE_CORE=$one_core repeats=$w1_repeats strider "w3-r$ranks" "$ranks" \
    --data "$data/w3.h5" --sampler bucketed --max-tokens 16384 $w3_epochs
  PAIRED=w4 WITH_ONE_RANK=$one_core WITH_ONE_CORE=$one_core repeats=$w1_repeats strider "w4-r$ranks" "$ranks" \
    --data "$data/w4.h5" --sampler weighted --batch-size 256 $w4_epochs
done
for ranks in $ranks_list; do
  peer "w1-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --sampler distributed
  peer "w2-r$ranks" "$ranks" --data "$data/w2.h5" --batch-size 32 --sampler distributed
  peer "w3-r$ranks" "$ranks" --data "$data/w3.h5" --sampler length-grouped --max-tokens 16384
  peer "w4-r$ranks" "$ranks" --data "$data/w4.h5" --batch-size 256 --sampler weighted
done
for name in w1 w3 w4; do pair_limits $name; done  # the gathers run beside the kept strider runs

# ---- stall fraction with an emulated step of about the time to read a batch (w1) ----
read_us=$($python - "$out/strider-w1-r1.json" <<'EOF'
import json, sys
try:
    run = json.load(open(sys.argv[1]))
    rank = run["ranks"][0]
    batches = -(-rank["samples"] // run["batch_size"])
    print(round(1e6 * rank["io_seconds"] / batches, 1))
except Exception:
    print(0)
EOF
)
if [[ $read_us != 0 ]]; then
  log "time to read a batch of w1: $read_us us"
  for ranks in $ranks_list; do
    for mode in busy sleep work; do
      strider "w1-compute-$mode-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --compute-us "$read_us" --compute-mode $mode \
        $w1_step_epochs
    done
    for mode in busy work; do
      strider "w1-compute4x-$mode-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --compute-mode $mode \
        --compute-us "$(awk -v t="$read_us" 'BEGIN { print 4 * t }')" $w1_step_epochs
    done
    for mode in busy sleep work; do
      strider "w1-compute2x-$mode-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --compute-mode $mode \
        --compute-us "$(awk -v t="$read_us" 'BEGIN { print 2 * t }')" $w1_step_epochs
    done
    # The thread layouts side by side with a CPU-bound step (the runs above measure and choose: auto).
    for layout in yes no; do
      for scale in "" 2x; do
        strider "w1-compute$scale-work-layout$layout-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 \
          --compute-mode work --io-thread $layout $w1_step_epochs \
          --compute-us "$(awk -v t="$read_us" -v k="${scale%x}" 'BEGIN { print (k == "" ? 1 : k) * t }')"
      done
    done
  done
fi

# ---- w1 split over 8 shards (the same rows, split with h5py) against the one file ----
if [[ ! -f $data/w1-shards/part-7.h5 || $data/w1-shards/part-7.h5 -ot $data/w1.h5 ]]; then
  log "splitting w1.h5 into 8 shards"
  mkdir -p "$data/w1-shards"
  $python - "$data/w1.h5" "$data/w1-shards" <<'EOF'
import sys, h5py
source = h5py.File(sys.argv[1], "r")
rows = source["samples"].shape[0]
for k in range(8):
    first, last = rows * k // 8, rows * (k + 1) // 8
    with h5py.File(f"{sys.argv[2]}/part-{k}.h5", "w") as shard:
        shard["samples"] = source["samples"][first:last]
        shard["labels"] = source["labels"][first:last]
EOF
fi
for ranks in $ranks_list; do
  strider "w1-shards8-r$ranks" "$ranks" --data "$data/w1-shards" --batch-size 256 $w1_epochs
  ratio=$($python - "$out/strider-w1-r$ranks.json" "$out/strider-w1-shards8-r$ranks.json" <<'EOF'
import json, sys
try:
    one, eight = (json.load(open(p))["samples_per_s"] for p in sys.argv[1:])
    print(f"{eight / one:.3f}")
except Exception as error:
    print(f"unknown ({error})")
EOF
  )
  log "w1 at $ranks ranks, 8 shards / one file: $ratio samples/s (target: within 10%)"
done

# ---- warm vs cold page cache (w1) ----
for ranks in $ranks_list; do
  strider "w1-cold-r$ranks" "$ranks" --data "$data/w1.h5" --batch-size 256 --cold
done
cat "$data/w1.h5" >/dev/null  # warm again

# ---- streaming: peak RSS against N (pread engine, so that mapped file pages do not count; 200 steps) ----
repeats=1
for name in small w1 big; do
  for sampler in streaming distributed; do
    strider "rss-$sampler-$name" 1 --data "$data/$name.h5" --batch-size 256 --sampler "$sampler" --engine direct --steps 200
    strider "rss-$sampler-$name-nolabels" 1 --data "$data/$name.h5" --batch-size 256 --sampler "$sampler" --engine direct \
      --steps 200 --label-key none
  done
done

# ---- the in-memory store and --lookahead on the compressed file, against their goals ----
STRIDER_BIN=$bin BENCH_DIR=$data BENCH_OUT=$out "$here/store.sh" || log "store section FAILED"

# ---- the samplers alone: indices/s per core and set_epoch cost per mode (Google Benchmark) ----
sampler_bench=${SAMPLER_BENCH:-$bin/../bench/strider_sampler_bench}
if [[ -x $sampler_bench ]]; then
  log "sampler microbenchmarks ($sampler_bench)"
  "$sampler_bench" --benchmark_min_time=0.2 --benchmark_out="$out/sampler-bench.json" --benchmark_out_format=json \
    >"$out/logs/sampler-bench.txt" 2>&1 || log "sampler microbenchmarks failed: $out/logs/sampler-bench.txt"
else
  log "no $sampler_bench (libbenchmark-dev, then rebuild): sampler microbenchmarks skipped"
fi

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
$python "$here/summarize.py" "$out"
log "done in $(($(date +%s) - started)) s: $out/results.json, $out/compare.png"
