#!/usr/bin/env bash
# Node memory in /dev/shm, each case in a mount namespace of its own whose /dev/shm is a new tmpfs:
# a /dev/shm too small for the in-memory store is one error line and a non-zero exit on every rank
# (not a SIGBUS, not a hang). Needs root and unshare(1); elsewhere it reports skipped (exit 77).
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

# 40,000 samples: the store needs 10.4 MB.
mpirun_n 1 "$gen" --kind features --classes 4 --samples 40000 --dim 64 --seed 1 --out "$work/f.h5" --no-progress >/dev/null

# 1. The store in a 1 MB /dev/shm: refused on every rank before the window is made, whether the budget
#    is the default (half of /dev/shm's free space) or given larger than /dev/shm.
for budget in "" "--store-budget 1G"; do
  # shellcheck disable=SC2086
  expect_error "--store memory, 1 MB /dev/shm ${budget:-(default budget)}" \
    "--store memory: node 0 needs 10\.4 MB \(every row and every label\) of shared memory but /dev/shm has 1\.0 MB free" \
    30 with_shm size=1M "$STRIDER_MPIEXEC" --bind-to none -np 2 "$bench" --data "$work/f.h5" --store memory $budget
done

finish
