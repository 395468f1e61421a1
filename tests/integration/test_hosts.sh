#!/usr/bin/env bash
# Two real hosts on this machine (scripts/cluster/hosts.sh: a network, UTS and mount namespace each,
# with its own hostname, address and /dev/shm), 2 ranks each, against one host at 4 ranks: the same
# traces for several samplers, the node split found from the hostnames alone (no STRIDER_NODE_SIZE),
# and the in-memory store's partition serving rows across hosts over TCP with the same batches.
# Needs root and namespaces; elsewhere it reports skipped (exit 77).
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
train=$STRIDER_BIN/strider-train
bench=$STRIDER_BIN/strider-bench
hosts=$STRIDER_SOURCE_DIR/scripts/cluster/hosts.sh
export STRIDER_LOG_LEVEL=warn
unset STRIDER_NODE_SIZE

if ((EUID != 0)); then
  echo "skipped: needs root (network, UTS and mount namespaces)"
  exit 77
fi
if ! unshare --net --uts --mount true 2>/dev/null; then
  echo "skipped: this kernel or container does not allow network, UTS and mount namespaces"
  exit 77
fi
# A state folder and a /24 of the test's own, so that a developer's hosts are left alone.
export STRIDER_HOSTS_DIR=$work/hosts STRIDER_HOSTS_NET=10.213.$((100 + $$ % 100))
trap '"$hosts" down; rm -rf "$work"' EXIT
"$hosts" --shm-size 256M up 2 || { fail "hosts.sh up 2"; finish; }
# on_hosts LOG COMMAND...: COMMAND at 2 hosts x 2 ranks, within 30 s, output to LOG. Open MPI 4.1's
# TCP transport can lose a race between two ranks connecting to each other at once ("WARNING: Open MPI
# failed to TCP connect to a peer", then a hang): that case, and only that, is tried once more.
on_hosts() {
  local log=$1 status=0
  shift
  "$hosts" --timeout 30 run 2 2 -- "$@" >"$log" 2>&1 || status=$?
  if ((status == 124)) && grep -q "failed to TCP connect" "$log"; then
    echo "note: Open MPI's TCP connect race ($(grep -m1 'connect() to' "$log" | sed 's/^ *//')); once more: $*"
    status=0
    "$hosts" --timeout 30 run 2 2 -- "$@" >"$log" 2>&1 || status=$?
  fi
  ((status == 0)) || fail "on 2 hosts: $* (exit $status): $(tail -n 3 "$log")"
}
on_one_host() {
  local log=$1
  shift
  timeout -k 5 30 "$STRIDER_MPIEXEC" --bind-to none -np 4 "$@" >"$log" 2>&1 || fail "on 1 host: $* (exit $?): $(tail -n 3 "$log")"
}

# 1. The hosts: each rank's hostname, and a /dev/shm of each host's own (a file a rank makes there is
#    seen by the other rank of its host, not by the other host's, nor in the machine's /dev/shm).
# Each rank makes a file in /dev/shm, waits (at most 10 s) until its host's /dev/shm holds 2, and
# prints its hostname and what it sees there.
on_hosts "$work/names" sh -c 'touch /dev/shm/strider-test-$OMPI_COMM_WORLD_RANK
  for i in $(seq 200); do [ $(ls /dev/shm | grep -c strider-test-) -ge 2 ] && break; sleep 0.05; done
  echo "rank $OMPI_COMM_WORLD_RANK on $(hostname), its /dev/shm:" $(ls /dev/shm | grep strider-test-)'
sort "$work/names"
expect_equal "ranks' hostnames and /dev/shm" "$(sed -n '/^rank/p' "$work/names" | sort)" "$(printf '%s\n' \
  "rank 0 on strider-host-1, its /dev/shm: strider-test-0 strider-test-1" \
  "rank 1 on strider-host-1, its /dev/shm: strider-test-0 strider-test-1" \
  "rank 2 on strider-host-2, its /dev/shm: strider-test-2 strider-test-3" \
  "rank 3 on strider-host-2, its /dev/shm: strider-test-2 strider-test-3")"
ls /dev/shm/strider-test-* >/dev/null 2>&1 && fail "a host wrote to the machine's /dev/shm" || pass "the machine's /dev/shm untouched"

# 2. Traces: 2 hosts x 2 ranks equal 1 host x 4 ranks.
timeout -k 5 60 "$gen" --kind features --classes 4 --samples 4000 --dim 8 --seed 1 --out "$work/f.h5" --no-progress >/dev/null
timeout -k 5 60 "$gen" --kind sequences --classes 4 --samples 600 --min-len 8 --max-len 256 --median-len 32 --seed 1 \
  --out "$work/s.h5" --no-progress >/dev/null
traces_equal() { # traces_equal NAME PREFIX_A PREFIX_B
  local rank a="" b=""
  for rank in 0 1 2 3; do
    a+=$(cat "$2.rank$rank" 2>/dev/null)$'\n' b+=$(cat "$3.rank$rank" 2>/dev/null)$'\n'
  done
  if [[ -s $2.rank0 && $a == "$b" ]]; then pass "$1"; else fail "$1: the traces differ"; fi
}
for sampler in distributed balanced; do
  args=(--data "$work/f.h5" --sampler "$sampler" --epochs 2 --batch-size 16 --seed 5)
  on_one_host "$work/$sampler.one" "$train" "${args[@]}" --trace-samples "$work/$sampler.one"
  on_hosts "$work/$sampler.two" env STRIDER_LOG_LEVEL=info "$train" "${args[@]}" --trace-samples "$work/$sampler.two"
  traces_equal "$sampler: 2 hosts x 2 ranks trace what 1 host x 4 ranks does" "$work/$sampler.one" "$work/$sampler.two"
  # Each host shares one order between its ranks in its own /dev/shm (none falls back to its own).
  grep -q "shuffles each epoch's order itself" "$work/$sampler.two" &&
    fail "$sampler: a host did not share the order: $(grep -m1 itself "$work/$sampler.two")"
done
args=(--data "$work/s.h5" --sampler bucketed --max-tokens 2048 --epochs 2 --seed 2)
on_one_host "$work/bucketed.one" "$train" "${args[@]}" --trace-samples "$work/bucketed.one"
on_hosts "$work/bucketed.two" "$train" "${args[@]}" --trace-samples "$work/bucketed.two"
traces_equal "bucketed: 2 hosts x 2 ranks trace what 1 host x 4 ranks does" "$work/bucketed.one" "$work/bucketed.two"

# 3. The store, rows partitioned between the nodes, found from the hostnames: the same batches as
#    without it, rows fetched from the other host.
args=(--data "$work/f.h5" --sampler distributed --epochs 2 --batch-size 16 --seed 5)
on_hosts "$work/store.two" env STRIDER_LOG_LEVEL=info "$train" "${args[@]}" --store memory --store-layout partition \
  --trace-samples "$work/store.two"
grep -m1 "over 2 nodes of 2 ranks" "$work/store.two" && pass "the node split, from the hostnames" ||
  fail "no 'over 2 nodes of 2 ranks' line: $(grep -m1 'store:' "$work/store.two")"
traces_equal "store: the same batches across hosts" "$work/distributed.one" "$work/store.two"
on_hosts "$work/bench.two" "$bench" --data "$work/f.h5" --batch-size 64 --epochs 2 --store memory \
  --store-layout partition --json "$work/bench.json"
expect_equal "bench: store nodes" "$(json_number "$work/bench.json" store_nodes)" 2
epochs=$(sed 's/.*"epochs"//' "$work/bench.json")
for epoch in 1 2; do
  remote=$(grep -o '"bytes_remote":[0-9]*' <<<"$epochs" | sed -n ${epoch}p | cut -d: -f2)
  local_bytes=$(grep -o '"bytes_local":[0-9]*' <<<"$epochs" | sed -n ${epoch}p | cut -d: -f2)
  expect_equal "bench: epoch $epoch's bytes, local + remote" $((remote + local_bytes)) $((4000 * 32))
  expect_at_least "bench: epoch $epoch's bytes from the other host" "$remote" 1
done
finish
