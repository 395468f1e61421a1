#!/usr/bin/env bash
# Two real hosts on this machine (scripts/cluster/hosts.sh: a network, UTS and mount namespace each,
# with its own hostname, address and /dev/shm), 2 ranks each, against one host at 4 ranks: the same
# traces for several samplers, the node split found from the hostnames alone (no STRIDER_NODE_SIZE),
# and the in-memory store's partition serving rows across hosts over TCP with the same batches;
# then what breaks across hosts: a rank killed on one host, one host's /dev/shm too small for the
# store; and 3 hosts x 1 rank, where the split is one rank per node.
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
for sampler in distributed balanced weighted stratified streaming block; do
  args=(--data "$work/f.h5" --sampler "$sampler" --epochs 2 --batch-size 16 --seed 5 --block-size 50)
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
# The GPU each rank binds by node-local rank (the CPU backend names the one it would bind): 0 and 1
# on each host, from the hostnames.
expect_equal "device binding by node-local rank on each host" \
  "$(grep -o 'device binding by node-local rank.*' "$work/distributed.two" | sed 's/.*): //')" \
  "strider-host-1: ranks 0,1 -> devices 0,1; strider-host-2: ranks 2,3 -> devices 0,1"

# 3. The store, rows partitioned between the nodes, found from the hostnames: the same batches as
#    without it, rows fetched from the other host.
args=(--data "$work/f.h5" --sampler distributed --epochs 2 --batch-size 16 --seed 5)
on_hosts "$work/store.two" env STRIDER_LOG_LEVEL=info "$train" "${args[@]}" --store memory --store-layout partition \
  --trace-samples "$work/store.two"
grep -m1 "over 2 nodes of 2 ranks" "$work/store.two" && pass "the node split, from the hostnames" ||
  fail "no 'over 2 nodes of 2 ranks' line: $(grep -m1 'store:' "$work/store.two")"
traces_equal "store: the same batches across hosts" "$work/distributed.one" "$work/store.two"
# bench_store LAYOUT: strider-bench's store over 3 epochs: every epoch's rows from the store, those
# of the other host's part over TCP (partition), nothing from the file after the first epoch; and
# each host's ranks share one order per epoch (one rank shuffles it, the other copies it; the
# bench's counts start after the first epoch's plan, so 2 copies per host).
bench_store() {
  local layout=$1 json=$work/bench.$1.json
  on_hosts "$work/bench.$layout" "$bench" --data "$work/f.h5" --batch-size 64 --epochs 3 --store memory \
    --store-layout "$layout" --json "$json"
  expect_equal "bench $layout: store nodes" "$(json_number "$json" store_nodes)" 2
  local figures
  figures=$(/usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for e in d["epochs"]: print(e["bytes_remote"], e["bytes_local"], e["bytes_read_file"])
copied = [r["epoch_orders_copied"] for r in d["ranks"]]
print("orders", copied[0] + copied[1], copied[2] + copied[3])' "$json") || { fail "bench $layout: no JSON"; return; }
  local epoch=0 remote local_bytes file
  while read -r remote local_bytes file; do
    [[ $remote == orders ]] && break
    epoch=$((epoch + 1))
    expect_equal "bench $layout: epoch $epoch's bytes, local + remote" $((remote + local_bytes)) $((4000 * 32))
    if [[ $layout == partition ]]; then
      expect_at_least "bench $layout: epoch $epoch's bytes from the other host" "$remote" 1
    else
      expect_equal "bench $layout: epoch $epoch's bytes from the other host" "$remote" 0
    fi
    ((epoch == 1)) || expect_equal "bench $layout: epoch $epoch's bytes from the file" "$file" 0
  done <<<"$figures"
  expect_equal "bench $layout: epochs measured" "$epoch" 3
  expect_equal "bench $layout: orders copied on host 1, host 2 (one order per host per epoch)" \
    "$(tail -n 1 <<<"$figures")" "orders 2 2"
}
bench_store partition
bench_store replicate
args=(--data "$work/f.h5" --sampler distributed --epochs 2 --batch-size 16 --seed 5)
on_hosts "$work/replicate.two" "$train" "${args[@]}" --store memory --store-layout replicate \
  --trace-samples "$work/replicate.two"
traces_equal "store, replicated on each host: the same batches" "$work/distributed.one" "$work/replicate.two"

# 4. A rank killed on the second host: the job ends on both hosts within 30 s, and no rank is left.
"$hosts" --timeout 60 run 2 2 -- env STRIDER_TEST_STEP_DELAY_US=20000 "$train" --data "$work/f.h5" --batch-size 16 \
  --seed 1 --epochs 50 --trace-samples "$work/kill" >"$work/kill.log" 2>&1 &
runner=$!
rank_pid() { # rank_pid RANK: the strider-train process of that rank (its environment names it)
  local pid
  for pid in $(pgrep -x strider-train); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$pid" && return 0
  done
  return 1
}
traced_steps() { [[ -f $1 ]] && (($(wc -l <"$1") >= $2)); }
if wait_until 30 traced_steps "$work/kill.rank3" 5 && victim=$(rank_pid 3); then
  victim_host=$(nsenter -t "$victim" --uts hostname)
  started=$SECONDS
  kill -9 "$victim"
  status=0
  wait "$runner" || status=$?
  elapsed=$((SECONDS - started))
  if ((status != 0 && status != 124 && elapsed <= 30)); then
    pass "rank 3 killed on $victim_host: the job ended on both hosts in $elapsed s (exit $status)"
  else
    fail "rank 3 killed on $victim_host: exit $status after $elapsed s: $(tail -n 5 "$work/kill.log")"
  fi
  echo "what the job said: $(grep -E 'error|noticed|killed|signal' "$work/kill.log" | head -n 3)"
  left=$(pgrep -f "strider-train --data $work/f.h5" | tr '\n' ' ')
  expect_equal "no rank left on any host" "$left" ""
else
  fail "rank 3 on the second host traced no 5 steps within 30 s: $(tail -n 3 "$work/kill.log")"
  kill "$runner" 2>/dev/null
  wait "$runner"
fi

# 5. One host's /dev/shm too small for its part of the store (the second host's, 2 MB, while the
#    first has room): refused with one line, and every rank exits, on both hosts. Two ranks per host
#    (a node of one rank keeps its rows in its own memory); Open MPI's shared-memory transport cannot
#    back its segments in 2 MB, so the ranks talk over TCP.
mpirun_n 1 "$gen" --kind features --classes 4 --samples 40000 --dim 64 --seed 1 --out "$work/big.h5" --no-progress >/dev/null
shm_of_host2() { nsenter -t "$(cat "$STRIDER_HOSTS_DIR/strider-host-2.pid")" --mount mount -o "remount,size=$1" /dev/shm; }
shm_of_host2 2M
status=0
"$hosts" --timeout 30 run 2 2 -- --mca btl self,tcp "$bench" --data "$work/big.h5" --store memory --store-layout partition \
  >"$work/small.out" 2>"$work/small.err" || status=$?
shm_of_host2 256M
refusals=$(grep -cE "^strider: error: (\[rank [0-9]+\] )?--store memory: node 1 needs [0-9.]+ MB .* of shared memory but /dev/shm has [0-9.]+ MB free" \
  "$work/small.err")
if ((status != 0 && status != 124 && refusals == 1)) && (($(grep -c '^strider: error:' "$work/small.err") == 1)); then
  pass "the second host's /dev/shm too small: $(grep -m1 '^strider: error:' "$work/small.err") (exit $status)"
else
  fail "the second host's /dev/shm too small: exit $status, $(cat "$work/small.err" | head -n 5)"
fi

# 6. 3 hosts x 1 rank against 1 host x 3 ranks: one rank per node, the same trace; the store over 3 nodes.
"$hosts" --shm-size 256M up 3 >/dev/null || fail "hosts.sh up 3"
args=(--data "$work/f.h5" --sampler distributed --epochs 2 --batch-size 16 --seed 5)
timeout -k 5 30 "$STRIDER_MPIEXEC" --bind-to none -np 3 "$train" "${args[@]}" --trace-samples "$work/three.one" \
  >/dev/null 2>&1 || fail "on 1 host at 3 ranks"
"$hosts" --timeout 30 run 3 1 -- env STRIDER_LOG_LEVEL=info "$train" "${args[@]}" --store memory \
  --store-layout partition --trace-samples "$work/three.three" >"$work/three.log" 2>&1 || fail "on 3 hosts: $(tail -n 3 "$work/three.log")"
grep -q "over 3 nodes of 1 rank" "$work/three.log" && pass "3 hosts: 3 nodes of 1 rank, from the hostnames" ||
  fail "3 hosts: no 'over 3 nodes of 1 rank' line: $(grep -m1 'store:' "$work/three.log")"
expect_equal "3 hosts x 1 rank with the store trace what 1 host x 3 ranks does" \
  "$(cat "$work"/three.three.rank{0,1,2} 2>/dev/null)" "$(cat "$work"/three.one.rank{0,1,2})"
finish
