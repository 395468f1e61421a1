#!/usr/bin/env bash
# The in-memory store and --lookahead measured in one run against the file read without them
# (compare.sh runs it as its store section; it also runs alone):
#   bench/scripts/store.sh      # about 2 minutes on 2 cores with the files present (+1 min to make them)
#
# Files (kept in $BENCH_DIR): wc, 1,000,000 x 64 float32 rows, deflate level 4 in 1024-row chunks
# (242 MB; the issue's file), and wk, the same rows contiguous (256 MB).
# Runs, at 2 ranks and at 4 ranks as 2 nodes of 2 (STRIDER_NODE_SIZE=2):
#   - today: wc shuffled without the store (distributed sampler, batches of 256, $SHUFFLED_STEPS steps);
#   - the store on wc, 3 epochs (2 ranks: auto, one node holds every row; 4 ranks: partition);
#   - --lookahead 256 on wc without the store, 2 windows of steps;
#   - the store on wk with a cold page cache (--cold), 1 epoch, at 2 ranks, and with the load read
#     through O_DIRECT (--engine direct --odirect);
# and the limits, measured by readers of their own in the same run (bench/scripts/read_limit.py,
# gather_limit.cpp): wc read in chunk order with each chunk read and decompressed once (the in-order
# limit), wk read sequentially from a cold page cache and through O_DIRECT, and one core gathering shuffled rows of wk
# from memory; and rows of another node by one-sided MPI_Get against the store's request and reply
# (store_exchange_bench.cpp); and what a decompressed-chunk cache would save --lookahead, simulated
# from the plan (chunk_cache_sim.cpp). bench/scripts/summarize_store.py prints the goals and writes $BENCH_OUT/store.json.
#
# Environment: STRIDER_BIN, BENCH_DIR (default /tmp/strider-bench), BENCH_OUT (default
# $BENCH_DIR/results), SHUFFLED_STEPS (6: a shuffled step of wc costs about a second per rank here).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/scripts/settings.sh
source "$here/settings.sh"
shuffled_steps=${SHUFFLED_STEPS:-6}
for tool in strider-gen strider-bench; do
  [[ -x $bin/$tool ]] || { echo "store bench: $bin/$tool is missing: build first (or set STRIDER_BIN)" >&2; exit 1; }
done
$python -c "import h5py, mpi4py" 2>/dev/null ||
  { echo "store bench: the limits need python3-h5py and python3-mpi4py: run bench/scripts/setup-bench.sh" >&2; exit 1; }
mkdir -p "$data" "$out/logs" "$out/store"
rm -f "$out"/store/*.json
launch=(mpirun --bind-to none)
started=$(date +%s)
log() { printf '[store %4ds] %s\n' $(($(date +%s) - started)) "$*"; }
echo "$(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/store/load.txt"

generate wc --kind features --samples 1000000 --dim 64 --classes 10 --compress 4 --chunk-rows 1024
generate wk --kind features --samples 1000000 --dim 64 --classes 10

bench() {  # TAG RANKS NODE_SIZE strider-bench options...
  local tag=$1 ranks=$2 node_size=$3
  shift 3
  local environment=()
  ((node_size > 0)) && environment=(-x STRIDER_NODE_SIZE="$node_size")
  "${launch[@]}" -np "$ranks" "${environment[@]}" "$bin/strider-bench" --seed 0 --batch-size 256 \
    --json "$out/store/$tag.json" "$@" >"$out/logs/store-$tag.log" 2>&1 ||
    { log "$tag FAILED (see $out/logs/store-$tag.log)"; return 0; }
  log "$tag: $(grep -m1 '^  total' "$out/logs/store-$tag.log" | sed 's/^  total //; s/, stall.*//')"
}
limit() {  # TAG RANKS read_limit.py options...
  local tag=$1 ranks=$2
  shift 2
  "${launch[@]}" -np "$ranks" $python "$here/read_limit.py" "$@" >"$out/store/limit-$tag.json" 2>"$out/logs/limit-$tag.log" ||
    { log "limit $tag FAILED (see $out/logs/limit-$tag.log)"; return 0; }
  log "limit $tag: $(cat "$out/store/limit-$tag.json")"
}

cat "$data/wc.h5" >/dev/null  # warm: the in-order limit and the store read the same cached bytes
for ranks in 2 4; do
  limit "chunks-r$ranks" $ranks chunks "$data/wc.h5"
  # 2 ranks: one node (auto: it holds every row); 4 ranks: 2 nodes of 2, each holding half the rows.
  node_size=$( ((ranks == 4)) && echo 2 || echo 0)
  bench "store-r$ranks" $ranks $node_size --data "$data/wc.h5" --store memory --epochs 3 \
    $( ((ranks == 4)) && echo --store-layout partition)
  bench "shuffled-r$ranks" $ranks 0 --data "$data/wc.h5" --steps "$shuffled_steps"
done
bench lookahead-r2 2 0 --data "$data/wc.h5" --lookahead 256 --steps 512  # two windows per rank

# Cold page cache: the contiguous twin, the store's load against a sequential read; and the same
# with the load read through O_DIRECT against an O_DIRECT sequential read (a cold read whatever the
# page cache holds).
limit cold-sequential-r2 2 sequential "$data/wk.h5" --cold
bench cold-store-r2 2 0 --data "$data/wk.h5" --store memory --cold
limit odirect-sequential-r2 2 sequential "$data/wk.h5" --odirect
bench odirect-store-r2 2 0 --data "$data/wk.h5" --store memory --engine direct --odirect

g++ -O2 -std=c++17 -o "$out/gather_limit" "$here/gather_limit.cpp"
read -r offset rows < <($python -c "import h5py,sys; d=h5py.File(sys.argv[1],'r')['/samples']; print(d.id.get_offset(), d.shape[0])" "$data/wk.h5")
cat "$data/wk.h5" >/dev/null
"$out/gather_limit" --file "$data/wk.h5" --data-offset "$offset" --row-bytes 256 --rows "$rows" --batch 256 --seconds 1 \
  >"$out/store/limit-gather.json"
log "limit gather (one core): $(cat "$out/store/limit-gather.json")"

# Rows of another node, 4 ranks as 2 nodes of 2: one-sided MPI_Get (Open MPI's osc sm and osc ucx)
# against the store's own request and reply (bench/scripts/store_exchange_bench.cpp), batches of 256
# rows of 256 B and of 64 KiB, under MPI_THREAD_MULTIPLE. A component that cannot make the window is
# logged and skipped.
lib_dir=$(strider_lib_dir) && config_include=$(strider_config_include "$lib_dir") || exit 1
mpicxx -O2 -std=c++17 -I"$repo_root/include" -I"$config_include" -I"$repo_root/src" -o "$out/store_exchange_bench" \
  "$here/store_exchange_bench.cpp" "$repo_root"/src/{pipeline/store_exchange,core/error,core/log,comm/communicator,comm/backoff}.cpp
for row_bytes in 256 65536; do
  for mode in rma-sm rma-ucx request; do
    osc=() && [[ $mode == rma-* ]] && osc=(-x OMPI_MCA_osc="${mode#rma-}")
    tag=exchange-$mode-d$row_bytes
    "${launch[@]}" -np 4 "${osc[@]}" "$out/store_exchange_bench" --mode "${mode%%-*}" --row-bytes "$row_bytes" \
      --batch 256 --seconds 2 >"$out/store/$tag.json" 2>"$out/logs/$tag.log" ||
      { log "$tag FAILED (see $out/logs/$tag.log)"; rm -f "$out/store/$tag.json"; continue; }
    log "$tag: $(cut -c1-120 "$out/store/$tag.json")"
  done
done

# A decompressed-chunk cache for --lookahead, simulated from the plan (no file read): decompressions
# per epoch of rank 0 of 2, windows of 256 steps, without a cache and with 16-240 MiB of chunks.
mpicxx -O2 -std=c++17 -I"$repo_root/include" -I"$config_include" -I"$repo_root/src" -o "$out/chunk_cache_sim" \
  "$here/chunk_cache_sim.cpp" -L"$lib_dir" -lstrider -Wl,-rpath,"$lib_dir"
"$out/chunk_cache_sim" --samples 1000000 --chunk-rows 1024 --row-bytes 256 --batch 256 --ranks 2 --lookahead 256 \
  --cache-mib 16,64,128,240 >"$out/store/chunk-cache.json"
log "chunk cache (simulated): $(cat "$out/store/chunk-cache.json")"

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/store/load.txt"
$python "$here/summarize_store.py" "$out/store"
log "done in $(($(date +%s) - started)) s: $out/store/store.json"
