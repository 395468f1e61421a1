#!/usr/bin/env bash
# Node memory in /dev/shm, each case in a mount namespace of its own whose /dev/shm is a new tmpfs:
# a /dev/shm too small for the in-memory store is one error line and a non-zero exit on every rank
# (not a SIGBUS, not a hang), and the node's shared order leaves no file in /dev/shm after a run (one
# that failed too) and, where /dev/shm cannot hold it or cannot be written, every rank shuffles for
# itself with the same batches. Needs root and unshare(1); elsewhere it reports skipped (exit 77).
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
train=$STRIDER_BIN/strider-train
bench=$STRIDER_BIN/strider-bench
export STRIDER_LOG_LEVEL=warn

if ((EUID != 0)) || ! unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs /dev/shm' 2>/dev/null; then
  echo "skipped: no mount namespace with a tmpfs of its own here (needs root and unshare -m)"
  exit 77
fi
# with_shm OPTIONS COMMAND...: COMMAND with a fresh tmpfs mounted with OPTIONS on /dev/shm. Open MPI's
# shared-memory transport cannot back its own segments in a tiny or read-only /dev/shm, so the ranks
# talk over TCP (the store's window and the node's order still go to /dev/shm).
with_shm() {
  local options=$1
  shift
  OMPI_MCA_btl=self,tcp unshare -m bash -c 'mount -t tmpfs -o "$0" tmpfs /dev/shm && "$@"' "$options" "$@"
}
export -f with_shm # for expect_error's shell
# Counts the node orders' segments left in the namespace's /dev/shm (its last command).
orders_left='n=$(find /dev/shm -name "strider-order-*" | wc -l); echo "orders left: $n"'

# 40,000 samples: the store needs 10.4 MB, the order 324 KB (more than half of a 512 KB /dev/shm).
mpirun_n 1 "$gen" --kind features --classes 4 --samples 40000 --dim 64 --seed 1 --out "$work/f.h5" --no-progress >/dev/null

# 1. The store in a 1 MB /dev/shm: refused on every rank before the window is made, whether the budget
#    is the default (half of /dev/shm's free space) or given larger than /dev/shm.
for budget in "" "--store-budget 1G"; do
  # shellcheck disable=SC2086
  expect_error "--store memory, 1 MB /dev/shm ${budget:-(default budget)}" \
    "--store memory: node 0 needs 10\.4 MB \(every row and every label\) of shared memory but /dev/shm has 1\.0 MB free" \
    30 with_shm size=1M "$STRIDER_MPIEXEC" --bind-to none -np 2 "$bench" --data "$work/f.h5" --store memory $budget
done

# 2. The node's order. An uninterrupted run on the host's /dev/shm is the reference.
args=(--data "$work/f.h5" --epochs 2 --batch-size 64 --seed 7)
mpirun_n 2 "$train" "${args[@]}" --trace-samples "$work/host" >/dev/null
# In a /dev/shm of its own: no segment left after a run, nor after one that failed mid-epoch.
with_shm size=64M bash -c 'STRIDER_LOG_LEVEL=info "$@" >"'"$work"'/ok.out" 2>&1; echo "status: $?"; '"$orders_left" \
  _ "$STRIDER_MPIEXEC" --bind-to none -np 2 "$train" "${args[@]}" --trace-samples "$work/ok" >"$work/ok.check"
expect_equal "a run with the node's order: exit 0, nothing left in /dev/shm" "$(cat "$work/ok.check")" \
  "$(printf 'status: 0\norders left: 0')"
grep -q "shuffles each epoch's order itself" "$work/ok.out" && fail "the node's order was not used: $(grep -m1 "itself" "$work/ok.out")"
expect_equal "the node's order: the same batches" "$(cat "$work/ok.rank0" "$work/ok.rank1")" \
  "$(cat "$work/host.rank0" "$work/host.rank1")"
with_shm size=64M bash -c 'STRIDER_TEST_FAIL_READ=1:3 "$@" >/dev/null 2>&1; echo "status: $?"; '"$orders_left" \
  _ "$STRIDER_MPIEXEC" -x STRIDER_TEST_FAIL_READ --bind-to none -np 2 "$train" "${args[@]}" >"$work/failed.check"
expect_equal "a run that failed at step 3: nothing left in /dev/shm" "$(tail -n 1 "$work/failed.check")" "orders left: 0"
[[ $(head -n 1 "$work/failed.check") != "status: 0" ]] && pass "the failing run failed" || fail "the failing run exited 0"

# The fallback: a /dev/shm with less than twice the order free, and one that cannot be written. Every
# rank shuffles for itself (one line saying why) and the batches are the same.
for options in size=512K ro; do
  with_shm "$options" env STRIDER_LOG_LEVEL=info "$STRIDER_MPIEXEC" --bind-to none -np 2 "$train" "${args[@]}" \
    --trace-samples "$work/$options" >"$work/$options.out" 2>&1 || fail "/dev/shm $options: the run failed: $(grep -m1 error "$work/$options.out")"
  line=$(grep -m1 "plan: every rank shuffles each epoch's order itself (not once per node): " "$work/$options.out")
  [[ -n $line ]] && pass "/dev/shm $options: ${line#*info: }" || fail "/dev/shm $options: no line saying every rank shuffles"
  expect_equal "/dev/shm $options: the same batches as with the node's order" \
    "$(cat "$work/$options.rank0" "$work/$options.rank1")" "$(cat "$work/host.rank0" "$work/host.rank1")"
done

# The store's segment asks for huge pages where the kernel offers them for shared memory, and says
# which pages it got: the line names this machine's setting.
setting=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)
STRIDER_LOG_LEVEL=info mpirun_n 2 "$bench" --data "$work/f.h5" --store memory --epochs 1 >"$work/huge.out" 2>&1 ||
  fail "store run for the page size: $(grep -m1 error "$work/huge.out")"
line=$(grep -m1 "store: the node segment " "$work/huge.out")
case $setting in
  advise | always | within_size | force) expected="asks for 2 MiB pages (transparent_hugepage/shmem_enabled: $setting)" ;;
  "") expected="uses 4 KiB pages: this kernel offers no transparent huge pages for shared memory" ;;
  *) expected="uses 4 KiB pages: transparent huge pages for shared memory are '$setting' here" ;;
esac
[[ $line == *"$expected"* ]] && pass "store segment pages: ${line#*info: }" ||
  fail "store segment pages: expected '$expected', got '${line:-no line}'"
finish
