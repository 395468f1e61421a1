#!/usr/bin/env bash
# --odirect returns the bytes the test wrote, for rows aligned to 4 KiB and not, at 1 to 3 ranks: the
# readers' test case tagged [odirect] (tests/mpi/test_readers.cpp, hidden from the default MPI runs
# because a file system may refuse O_DIRECT). Its files live under /tmp; where /tmp refuses O_DIRECT
# this reports skipped (exit 77), never passed.
source "$(dirname "$0")/common.sh"
tests=$STRIDER_BUILD_DIR/tests/strider_mpi_tests
[[ -x $tests ]] || { echo "FAIL: $tests is missing"; exit 1; }

head -c 8192 /dev/zero >"$work/probe"
if ! dd if="$work/probe" of=/dev/null iflag=direct bs=4096 count=1 status=none 2>"$work/probe.err"; then
  echo "skipped: /tmp refuses O_DIRECT ($(head -n 1 "$work/probe.err"))"
  exit 77
fi
for ranks in 1 2 3; do
  if mpirun_n $ranks "$tests" "[odirect]" --warn NoTests >"$work/np$ranks.txt" 2>&1; then
    pass "[odirect] at $ranks ranks: $(grep -m1 'All tests passed' "$work/np$ranks.txt")"
  else
    fail "[odirect] at $ranks ranks: $(grep -v '^strider\[' "$work/np$ranks.txt" | tail -n 15)"
  fi
done
finish
