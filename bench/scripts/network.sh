#!/usr/bin/env bash
# The in-memory store across two real hosts (scripts/cluster/hosts.sh: a network, UTS and mount
# namespace each, veths to a bridge) at several link rates, against the model of
# docs/design/scaling.md. As root; about 3 minutes on 2 cores with the files present (+1 min to make
# them):
#   bench/scripts/network.sh
# For each rate (the unshaped link, then RATES, and a half and a quarter of the unshaped figure):
#   - the link itself: one TCP stream from host 1 to host 2, then two each way at once, 2 s each
#     (bench/scripts/link_rate.py);
#   - strider-bench at 2 hosts x 2 ranks, --store memory --store-layout partition, 3 epochs, on
#     wc (1,000,000 x 64 float32, deflate 4 in chunks of 1024 rows: compressed W1, batches of 256)
#     and on w64k (8,192 rows of 64 KiB, batches of 32).
# bench/scripts/summarize_network.py then sets each run against the model (the network term at the
# measured link rate, the CPU limit from the unshaped run) and writes $BENCH_OUT/network.json.
# Environment: STRIDER_BIN, BENCH_DIR (default /tmp/strider-bench), BENCH_OUT (default
# $BENCH_DIR/results), RATES (default "1gbit"), EPOCHS (3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/scripts/settings.sh
source "$here/settings.sh"
epochs=${EPOCHS:-3}
hosts=$here/../../scripts/cluster/hosts.sh
((EUID == 0)) || { echo "network bench: needs root (the hosts are namespaces)" >&2; exit 1; }
for tool in strider-gen strider-bench; do
  [[ -x $bin/$tool ]] || { echo "network bench: $bin/$tool is missing: build first (or set STRIDER_BIN)" >&2; exit 1; }
done
mkdir -p "$data" "$out/logs" "$out/network"
rm -f "$out"/network/*.json
started=$(date +%s)
log() { printf '[network %4ds] %s\n' $(($(date +%s) - started)) "$*"; }
# Hosts of this script's own, so that a developer's or a test's are left alone.
export STRIDER_HOSTS_DIR=/run/strider-hosts-bench STRIDER_HOSTS_NET=10.213.250
trap '"$hosts" down' EXIT

generate wc --kind features --samples 1000000 --dim 64 --classes 10 --compress 4 --chunk-rows 1024
generate w64k --kind features --samples 8192 --dim 16384 --classes 10

# link TAG: the link's rate in bytes/s, one TCP stream from host 1 to host 2 for 2 s (link-TAG.json),
# then two streams each way at once (link-TAG-both-K.json): the store's exchange is symmetric, every
# node sends as much as it receives, and each of a host's 2 ranks has its own connection.
stream() { # FROM TO PORT OUT: one stream for 2 s, the receiver's count into OUT (in the background)
  nsenter -t "$(cat "$STRIDER_HOSTS_DIR/strider-host-$2.pid")" --net -- $python "$here/link_rate.py" receive "$3" >"$4" &
  sleep 0.3
  nsenter -t "$(cat "$STRIDER_HOSTS_DIR/strider-host-$1.pid")" --net -- \
    $python "$here/link_rate.py" send "$STRIDER_HOSTS_NET.$((10 + $2))" "$3" 2 &
}
gbits() { $python -c 'import json,sys; print(round(sum(json.load(open(f))["bytes_per_s"] for f in sys.argv[1:]) * 8 / 1e9, 2))' "$@"; }
link() {
  local tag=$1 prefix=$out/network/link-$1
  stream 1 2 5201 "$prefix.json"
  wait
  stream 1 2 5202 "$prefix-both-1.json"
  stream 1 2 5203 "$prefix-both-2.json"
  stream 2 1 5204 "$prefix-both-3.json"
  stream 2 1 5205 "$prefix-both-4.json"
  wait
  log "link $tag: $(gbits "$prefix.json") Gbit/s one way; both ways at once, 2 streams each:" \
    "$(gbits "$prefix-both-1.json" "$prefix-both-2.json") and $(gbits "$prefix-both-3.json" "$prefix-both-4.json")"
}

# bench TAG FILE BATCH: strider-bench's store, partitioned over the 2 hosts x 2 ranks.
bench() {
  local tag=$1 file=$2 batch=$3
  "$hosts" --timeout 300 run 2 2 -- "$bin/strider-bench" --data "$file" --batch-size "$batch" --epochs "$epochs" \
    --seed 0 --store memory --store-layout partition --json "$out/network/bench-$tag.json" \
    >"$out/logs/network-$tag.log" 2>&1 || { log "$tag FAILED (see $out/logs/network-$tag.log)"; return 0; }
  log "$tag: $(grep -m1 '^  total' "$out/logs/network-$tag.log" | sed 's/^  total //; s/, stall.*//')"
}

measure() { # RATE: hosts up with links at RATE ("" = unshaped), then the link and both files
  local rate=$1 tag=${1:-unshaped}
  "$hosts" ${rate:+--rate "$rate"} --shm-size 1G up 2 >/dev/null
  link "$tag"
  bench "wc-$tag" "$data/wc.h5" 256
  bench "w64k-$tag" "$data/w64k.h5" 32
}

cat "$data/wc.h5" "$data/w64k.h5" >/dev/null # warm: every run loads from the page cache
echo "$(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/network/load.txt"
measure ""
unshaped=$($python -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["bytes_per_s"] * 8 / 1e6))' \
  "$out/network/link-unshaped.json")
for rate in ${RATES:-1gbit} "$((unshaped / 2))mbit" "$((unshaped / 4))mbit"; do measure "$rate"; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/network/load.txt"
$python "$here/summarize_network.py" "$out/network" --out "$out/network.json"
log "done in $(($(date +%s) - started)) s: $out/network.json"
