#!/usr/bin/env bash
# strider-bench end to end: the JSON contract (job and per-rank keys), sample counts that follow from
# the sampler, the auto prefetch depth, labels read per batch unless the sampler needs them, and the
# three step emulations, and the MLPerf Storage workloads (--workload: the preset's batch and step,
# the AU keys and their arithmetic, the ring's memory limit); strider-epoch-plan-bench's JSON and
# refusals. No timing is asserted (performance lives in bench/scripts/compare.sh,
# bench/scripts/storage.sh and bench/scripts/epoch_plan.py).
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
# The "epochs" list comes last: the job and per-rank keys are counted before it.
sed 's/"epochs".*//' "$work/d.json" >"$work/d-noepochs.json"
for key in samples_per_s bytes_per_s stall_fraction time_to_first_batch_s read_amplification peak_rss_bytes; do
  expect_equal "job key $key" "$(sed 's/"ranks".*//' "$work/d.json" | grep -o "\"$key\":" | wc -l | tr -d ' ')" 1
  expect_equal "per-rank key $key, 2 ranks" "$(grep -o "\"$key\":" "$work/d-noepochs.json" | wc -l | tr -d ' ')" 3
done
# Where the start-up went: four phases, each the slowest rank's, none negative but the exec's
# (-1 where /proc does not say); MPI's initialisation and the Loader take time.
/usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["startup_s"]
ok = sorted(s) == ["exec_to_main", "first_batch", "loader", "mpi_init"] and s["mpi_init"] > 0 and s["loader"] > 0 \
    and s["first_batch"] >= 0 and (s["exec_to_main"] >= 0 or s["exec_to_main"] == -1)
sys.exit(0 if ok else 1)' "$work/d.json" && pass "startup_s: $(grep -o '"startup_s":{[^}]*}' "$work/d.json")" ||
  fail "startup_s: $(grep -o '"startup_s":{[^}]*}' "$work/d.json")"
# Per epoch: samples, samples/s and where the bytes came from (all from the file, none remote).
epochs=$(sed 's/.*"epochs"//' "$work/d.json")
expect_equal "two epochs listed" "$(grep -o '"samples_per_s":' <<<"$epochs" | wc -l | tr -d ' ')" 2
expect_equal "samples per epoch" "$(grep -o '"samples":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "5000 5000 "
expect_equal "file bytes per epoch (mmap: the useful bytes)" \
  "$(grep -o '"bytes_read_file":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "160000 160000 "
expect_equal "nothing remote without the store" "$(grep -o '"bytes_remote":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "0 0 "
expect_equal "samples, 2 epochs" "$(json_number "$work/d.json" samples)" 10000
expect_equal "useful bytes" "$(json_number "$work/d.json" useful_bytes)" 320000
expect_equal "ranks listed" "$(grep -o '"rank":[0-9]*' "$work/d.json" | tr '\n' ' ')" '"rank":0 "rank":1 '
expect_equal "per-rank samples" "$(grep -o '"samples":[0-9]*' "$work/d-noepochs.json" | tail -n 2 | cut -d: -f2 | tr '\n' ' ')" "5000 5000 "
expect_at_least "stall fraction >= 0" "$(json_number "$work/d.json" stall_fraction)" 0
expect_at_most "stall fraction <= 1" "$(json_number "$work/d.json" stall_fraction)" 1
expect_at_least "samples/s > 0" "$(json_number "$work/d.json" samples_per_s)" 1
expect_equal "mmap reads only useful bytes" "$(json_number "$work/d.json" read_amplification)" 1
# 64 rows x 32 bytes = 2 KiB per batch: 16 MiB of them is more than 64, so the cap.
expect_equal "auto prefetch depth" "$(json_number "$work/d.json" prefetch)" 64
expect_equal "distributed reads labels per batch" "$(grep -o '"labels_per_batch":[a-z]*' "$work/d.json")" '"labels_per_batch":true'
grep -q "total .* samples/s" "$work/d.txt" || fail "no total line in the table"

# The CPU account: CPU seconds and samples per CPU-second for the job and each rank, the per-batch
# account of each rank.
for key in cpu_seconds samples_per_cpu_s; do
  expect_equal "job and per-rank key $key" "$(grep -o "\"$key\":" "$work/d.json" | wc -l | tr -d ' ')" 3
done
expect_equal "an account per rank" "$(grep -o '"account_us_per_batch":' "$work/d.json" | wc -l | tr -d ' ')" 2
expect_at_least "cpu seconds > 0" "$(json_number "$work/d.json" cpu_seconds)" 0.000001
grep -q "CPU, whole process" "$work/d.txt" || fail "no CPU account in the table"

# Either thread layout reads the same samples; each rank says which it used.
for layout in yes no; do
  mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --epochs 2 --io-thread $layout --json "$work/l-$layout.json" \
    >"$work/l.txt" 2>&1 || fail "--io-thread $layout: $(tail -n 3 "$work/l.txt")"
  expect_equal "--io-thread $layout: the same samples" "$(json_number "$work/l-$layout.json" samples)" 10000
done
expect_equal "--io-thread yes: the I/O thread" "$(grep -o '"thread_layout":"[a-z-]*"' "$work/l-yes.json" | sort -u)" \
  '"thread_layout":"io-thread"'
expect_equal "--io-thread no: the caller's thread" "$(grep -o '"thread_layout":"[a-z-]*"' "$work/l-no.json" | sort -u)" \
  '"thread_layout":"caller"'
expect_equal "--io-thread no: every batch read on the consumer" \
  "$(grep -o '"caller_thread_batches":[0-9.]*' "$work/l-no.json" | sort -u)" '"caller_thread_batches":1'

# An explicit depth, and a sampler that needs every label (held in memory).
mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --sampler balanced --prefetch 3 --json "$work/b.json" \
  >"$work/b.txt" 2>&1 || fail "balanced run: $(tail -n 3 "$work/b.txt")"
expect_equal "explicit prefetch depth" "$(json_number "$work/b.json" prefetch)" 3
expect_equal "balanced holds the labels" "$(grep -o '"labels_per_batch":[a-z]*' "$work/b.json")" '"labels_per_batch":false'
expect_equal "balanced: the planned samples" "$(json_number "$work/b.json" samples)" \
  "$(planned "$work/f.h5" 2 --sampler balanced --batch-size 64)"

# Streaming with --steps: exactly steps x batch x ranks samples; a file read without labels.
mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 32 --sampler streaming --steps 10 --label-key none \
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

# The in-memory store at 4 ranks as 2 nodes of 2, rows partitioned: the load reads the file once
# (epoch 0's file bytes), epoch 1 reads nothing from it; each epoch's 5,000 x 32 bytes come from this
# node's memory or the other node's; a node holds half the rows (20 pages) and every label (5 pages).
STRIDER_NODE_SIZE=2 mpirun_n 4 "$bench" --data "$work/f.h5" --batch-size 64 --epochs 2 --store memory \
  --store-layout partition --json "$work/m.json" >"$work/m.txt" 2>&1 || fail "store run: $(tail -n 3 "$work/m.txt")"
epochs=$(sed 's/.*"epochs"//' "$work/m.json")
expect_equal "store: layout" "$(grep -o '"store_layout":"[a-z]*"' "$work/m.json")" '"store_layout":"partition"'
expect_equal "store: nodes" "$(json_number "$work/m.json" store_nodes)" 2
expect_equal "store: the load read the file once" "$(json_number "$work/m.json" store_load_bytes_read)" 160000
expect_equal "store: file bytes per epoch" \
  "$(grep -o '"bytes_read_file":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "160000 0 "
for epoch in 1 2; do
  remote=$(grep -o '"bytes_remote":[0-9]*' <<<"$epochs" | sed -n ${epoch}p | cut -d: -f2)
  local_bytes=$(grep -o '"bytes_local":[0-9]*' <<<"$epochs" | sed -n ${epoch}p | cut -d: -f2)
  expect_equal "store: epoch $epoch's bytes, local + remote" $((remote + local_bytes)) 160000
  expect_at_least "store: epoch $epoch asks the other node" "$remote" 1
done
expect_equal "store: the segment per node" "$(json_number "$work/m.json" store_segment_bytes)" $((25 * 4096))
expect_at_least "store: resident per node" "$(json_number "$work/m.json" store_bytes_per_node)" $((25 * 4096))
expect_at_most "store: resident per node" "$(json_number "$work/m.json" store_bytes_per_node)" $((25 * 4096 + 65536))
grep -q "store: partition over 2 nodes" "$work/m.txt" || fail "no store line in the table"
# The store's errors through the app: one line, a non-zero exit, within seconds.
expect_error "store: a budget too small" "needs .* but its budget is 999 bytes \(--store-budget\)" 60 \
  mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --store memory --store-budget 999
STRIDER_TEST_FAIL_LOAD=1:0 expect_error "store: rank 1 fails during the load" \
  "injected I/O error \(STRIDER_TEST_FAIL_LOAD\)" 60 mpirun_n 2 "$bench" --data "$work/f.h5" --batch-size 64 --store memory

# --warmup-epochs: the warm-up epochs run first and count in no figure. With the store at 2 nodes of
# 2: 1 warm-up and 2 measured epochs, numbered 1 and 2 in the table; their samples alone are counted,
# the load's file bytes go to no measured epoch, and the measured epochs read nothing from the file.
STRIDER_NODE_SIZE=2 mpirun_n 4 "$bench" --data "$work/f.h5" --batch-size 64 --epochs 2 --warmup-epochs 1 \
  --store memory --store-layout partition --json "$work/w.json" >"$work/w.txt" 2>&1 ||
  fail "warm-up run: $(tail -n 3 "$work/w.txt")"
epochs=$(sed 's/.*"epochs"//' "$work/w.json")
expect_equal "warm-up: recorded" "$(json_number "$work/w.json" warmup_epochs)" 1
expect_equal "warm-up: the measured epochs' samples" "$(json_number "$work/w.json" samples)" 10000
expect_equal "warm-up: samples per measured epoch" \
  "$(grep -o '"samples":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "5000 5000 "
expect_equal "warm-up: no file bytes in the measured epochs" \
  "$(grep -o '"bytes_read_file":[0-9]*' <<<"$epochs" | cut -d: -f2 | tr '\n' ' ')" "0 0 "
expect_equal "warm-up: the load still reported" "$(json_number "$work/w.json" store_load_bytes_read)" 160000
expect_equal "warm-up: measured epochs numbered after it" "$(grep -o '^  epoch [0-9]*' "$work/w.txt" | tr '\n' ' ')" \
  "  epoch 1   epoch 2 "
grep -q "after 1 warm-up epochs" "$work/w.txt" || fail "warm-up: not said in the table's heading"
expect_at_least "warm-up: the time to first batch kept" "$(json_number "$work/w.json" time_to_first_batch_s)" 0.000001
expect_error "warm-up: negative" "--warmup-epochs must be >= 0" 60 \
  mpirun_n 2 "$bench" --data "$work/f.h5" --warmup-epochs -1
expect_error "warm-up: with --cold" "--cold measures reads from storage, which --warmup-epochs would do" 60 \
  mpirun_n 2 "$bench" --data "$work/f.h5" --warmup-epochs 1 --cold

# --lookahead on compressed chunks (hdf5 engine): the same samples, fewer chunk reads.
mpirun_n 2 "$gen" --kind features --classes 5 --samples 5000 --dim 8 --seed 3 --out "$work/c.h5" --compress 4 \
  --chunk-rows 64 --no-progress >/dev/null
for lookahead in 0 16; do
  mpirun_n 2 "$bench" --data "$work/c.h5" --batch-size 64 --lookahead $lookahead --json "$work/l$lookahead.json" \
    >"$work/l.txt" 2>&1 || fail "lookahead $lookahead: $(tail -n 3 "$work/l.txt")"
done
expect_equal "lookahead recorded" "$(json_number "$work/l16.json" lookahead)" 16
expect_equal "lookahead: the same samples" "$(json_number "$work/l16.json" samples)" 5000
expect_at_most "lookahead: fewer bytes read" "$(($(json_number "$work/l16.json" bytes_read) * 2))" \
  "$(json_number "$work/l0.json" bytes_read)"

# The three step emulations run and are recorded.
for mode in busy sleep work; do
  mpirun_n 1 "$bench" --data "$work/f.h5" --batch-size 256 --compute-us 100 --compute-mode $mode --json "$work/c-$mode.json" \
    >"$work/c.txt" 2>&1 || fail "compute mode $mode: $(tail -n 3 "$work/c.txt")"
  expect_equal "compute mode $mode recorded" "$(json_number "$work/c-$mode.json" compute_us)" 100
  expect_equal "compute mode $mode: one epoch" "$(json_number "$work/c-$mode.json" samples)" 5000
done

# ---- MLPerf Storage workloads: the preset's batch and sleeping step, the AU keys and their arithmetic ----
mpirun_n 2 "$gen" --workload cosmoflow --samples 8 --seed 3 --out "$work/cf.h5" --no-progress >/dev/null
# au_consistent FILE: au is the mean of the ranks' au, au_min their least, passed is au >= au_threshold,
# steady_samples_per_s the sum of the ranks'.
au_consistent() {
  local ranks rates
  ranks=$(grep -o '"au":[-0-9.eE+]*' "$1" | tail -n +2 | cut -d: -f2 | tr '\n' ' ')
  rates=$(grep -o '"steady_samples_per_s":[-0-9.eE+]*' "$1" | tail -n +2 | cut -d: -f2 | tr '\n' ' ')
  awk -v ranks="$ranks" -v rates="$rates" -v au="$(json_number "$1" au)" -v au_min="$(json_number "$1" au_min)" \
    -v rate="$(json_number "$1" steady_samples_per_s)" -v threshold="$(json_number "$1" au_threshold)" \
    -v passed="$(grep -o '"passed":[a-z]*' "$1" | cut -d: -f2)" '
    BEGIN { n = split(ranks, r, " "); split(rates, q, " "); sum = 0; least = 2; total = 0
            for (i = 1; i <= n; i++) { sum += r[i]; total += q[i]; if (r[i] < least) least = r[i] }
            ok = n == 2 && (sum / n - au) ^ 2 < 1e-12 && (least - au_min) ^ 2 < 1e-12 && au >= 0 && au <= 1 &&
                 passed == (au >= threshold ? "true" : "false") && (total - rate) ^ 2 < 1e-6 * rate ^ 2
            exit !ok }'
}
for slowdown in 1 4; do
  mpirun_n 2 "$bench" --data "$work/cf.h5" --workload cosmoflow --accelerator-slowdown $slowdown --epochs 2 \
    --engine direct --odirect --json "$work/w$slowdown.json" >"$work/w.txt" 2>&1 ||
    fail "--workload cosmoflow x$slowdown: $(tail -n 3 "$work/w.txt")"
  expect_equal "cosmoflow x$slowdown: the preset's batch" "$(json_number "$work/w$slowdown.json" batch_size)" 1
  # DLIO's H100 step of 3.5 ms, times the slowdown, in microseconds.
  expect_equal "cosmoflow x$slowdown: the step" "$(json_number "$work/w$slowdown.json" compute_us)" $((3500 * slowdown))
  expect_equal "cosmoflow x$slowdown: the threshold" "$(json_number "$work/w$slowdown.json" au_threshold)" 0.7
  expect_equal "cosmoflow x$slowdown: H100 equivalents" "$(json_number "$work/w$slowdown.json" h100_equivalents)" \
    "$(awk -v s=$slowdown 'BEGIN { printf "%.9g", 2 / s }')"
  expect_equal "cosmoflow x$slowdown: 8 samples, 2 epochs" "$(json_number "$work/w$slowdown.json" samples)" 16
  expect_equal "cosmoflow x$slowdown: read with O_DIRECT" "$(grep -o '"odirect":[a-z]*' "$work/w$slowdown.json")" '"odirect":true'
  au_consistent "$work/w$slowdown.json" && pass "cosmoflow x$slowdown: au, au_min and passed follow from the ranks' AU" ||
    fail "cosmoflow x$slowdown: inconsistent AU keys in $(cat "$work/w$slowdown.json")"
  grep -q "^  AU .* 2 accelerators of cosmoflow" "$work/w.txt" && pass "cosmoflow x$slowdown: the AU line" ||
    fail "cosmoflow x$slowdown: no AU line in $(cat "$work/w.txt")"
done
# strider-inspect workloads lists what --workload sets (scripts read it from there).
expect_equal "strider-inspect workloads: cosmoflow's sample, batch, step, threshold" \
  "$("$STRIDER_BIN/strider-inspect" workloads | awk '$1 == "cosmoflow" { print $2, $4, $5, $6 }')" "2830336 1 0.0035 0.7"
expect_equal "strider-inspect workloads --json: three" \
  "$("$STRIDER_BIN/strider-inspect" workloads --json | grep -o '"workload":"[a-z0-9]*"' | tr '\n' ' ')" \
  '"workload":"unet3d" "workload":"resnet50" "workload":"cosmoflow" '
# A file of other samples runs, with a warning that the figures are not the workload's.
mpirun_n 1 "$bench" --data "$work/f.h5" --workload cosmoflow --steps 3 >"$work/wf.txt" 2>&1 ||
  fail "--workload on another file: $(tail -n 3 "$work/wf.txt")"
grep -q "the samples of $work/f.h5 are 32 bytes, cosmoflow's are 2830336" "$work/wf.txt" &&
  pass "--workload on other samples: a warning" || fail "no warning about the sample size: $(cat "$work/wf.txt")"
expect_error "--workload with --batch-size" "--workload cosmoflow sets --batch-size; drop --batch-size" 30 \
  mpirun_n 2 "$bench" --data "$work/cf.h5" --workload cosmoflow --batch-size 4
# --shuffle local: DLIO's order (each rank its own block, shuffled inside): the block sampler, every
# sample once per epoch, marked in the JSON; the sampler options it sets are refused beside it.
mpirun_n 2 "$bench" --data "$work/f.h5" --shuffle local --epochs 2 --json "$work/local.json" >"$work/local.txt" 2>&1 ||
  fail "--shuffle local: $(tail -n 3 "$work/local.txt")"
expect_equal "--shuffle local: the block sampler, marked" \
  "$(grep -o '"sampler":"[a-z]*","shuffle":"[a-z]*"' "$work/local.json")" '"sampler":"block","shuffle":"local"'
expect_equal "--shuffle local: every sample of both epochs" "$(json_number "$work/local.json" samples)" 10000
expect_error "--shuffle local with --sampler" "--shuffle local sets --sampler; drop --sampler" 30 \
  mpirun_n 2 "$bench" --data "$work/f.h5" --shuffle local --sampler balanced
expect_error "unknown --workload" "unknown workload 'bert' \(known: unet3d, resnet50, cosmoflow\)$" 30 \
  mpirun_n 2 "$bench" --data "$work/cf.h5" --workload bert
expect_error "--accelerator-slowdown 0" "--accelerator-slowdown must be a positive number" 30 \
  mpirun_n 1 "$bench" --data "$work/cf.h5" --workload cosmoflow --accelerator-slowdown 0
# The ring's memory: 1 MB for the node's 2 ranks cannot hold one 2,830,336-byte batch.
expect_error "--ring-memory-gb too small" \
  "a batch of 2830336 bytes does not fit the ring memory limit of 500000 bytes per rank" 30 \
  mpirun_n 2 "$bench" --data "$work/cf.h5" --workload cosmoflow --ring-memory-gb 0.001
# --odirect reads with the direct engine only.
expect_error "--odirect with --engine mmap" "--odirect reads with the direct engine" 30 \
  mpirun_n 2 "$bench" --data "$work/cf.h5" --engine mmap --odirect
# strider-epoch-plan-bench: one run per size, the order's bytes 8N, its times positive; bad sizes
# are refused before anything is planned.
plan_bench=$STRIDER_BIN/strider-epoch-plan-bench
"$plan_bench" --sizes 1000,2e4 --repeats 2 >"$work/plan.json" || fail "strider-epoch-plan-bench exited non-zero"
expect_equal "epoch-plan sizes" "$(grep -o '"n": [0-9]*' "$work/plan.json" | cut -d' ' -f2 | tr '\n' ' ')" "1000 20000 "
expect_equal "epoch-plan order bytes" "$(grep -o '"order_bytes": [0-9]*' "$work/plan.json" | cut -d' ' -f2 | tr '\n' ' ')" \
  "8000 160000 "
/usr/bin/python3 -c 'import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
bad = [r for r in runs if not (r["epoch_ms"] > 0 and r["epoch_ms_min"] <= r["epoch_ms"] and r["ns_per_sample"] > 0
                                 and r["first_epoch_ms"] > 0 and r["repeats"] == 2)]
sys.exit(1 if bad else 0)' "$work/plan.json" || fail "epoch-plan figures: $(cat "$work/plan.json")"
expect_error "epoch-plan --sizes 0" "--sizes: '0' is not a whole number of samples" 10 "$plan_bench" --sizes 0
expect_error "epoch-plan --sizes 1x" "--sizes: '1x' is not a count" 10 "$plan_bench" --sizes 1x
expect_error "epoch-plan --repeats 0" "--repeats: '0' is not a count" 10 "$plan_bench" --repeats 0
finish
