#!/usr/bin/env bash
# --odirect on a file system that refuses O_DIRECT: one line naming the file and the refusal, exit 2,
# within seconds, on 1 and 2 ranks. The file system: a ramfs mounted for the test (as root, where
# mounting is allowed), else /dev/shm where it refuses O_DIRECT (tmpfs did before Linux 6.6). Where
# neither is available this reports skipped (exit 77), never passed.
source "$(dirname "$0")/common.sh"
export STRIDER_LOG_LEVEL=warn

refuses_odirect() {  # FOLDER: true when a file there cannot be opened with O_DIRECT
  head -c 8192 /dev/zero >"$1/strider-probe.$$" 2>/dev/null || return 1
  local status=0
  dd if="$1/strider-probe.$$" of=/dev/null iflag=direct bs=4096 count=1 status=none 2>/dev/null || status=1
  rm -f "$1/strider-probe.$$"
  ((status == 1))
}
folder=""
mounted=""
mkdir -p "$work/ramfs"
if ((EUID == 0)) && mount -t ramfs ramfs "$work/ramfs" 2>/dev/null; then
  mounted=$work/ramfs
  trap 'umount "$mounted" 2>/dev/null; rm -rf "$work"' EXIT
  refuses_odirect "$mounted" && folder=$mounted
fi
if [[ -z $folder && -d /dev/shm ]] && refuses_odirect /dev/shm; then
  folder=$(mktemp -d /dev/shm/strider-test.XXXXXX)
  trap 'umount "$mounted" 2>/dev/null; rm -rf "$work" "$folder"' EXIT
fi
if [[ -z $folder ]]; then
  echo "skipped: no file system here refuses O_DIRECT (no ramfs mount allowed; /dev/shm takes O_DIRECT)"
  exit 77
fi
echo "file system that refuses O_DIRECT: $(stat -f -c %T "$folder") at $folder"

mpirun_n 2 "$STRIDER_BIN/strider-gen" --kind features --samples 500 --dim 16 --classes 2 --seed 1 --out "$folder/f.h5" \
  --no-progress >/dev/null || fail "strider-gen on $folder"
for ranks in 1 2; do
  expect_error "strider-bench --odirect, $ranks ranks" \
    "--odirect: the file system of $folder/f.h5 refuses O_DIRECT \(open: Invalid argument\)" 30 \
    mpirun_n $ranks "$STRIDER_BIN/strider-bench" --data "$folder/f.h5" --batch-size 16 --odirect
  expect_equal "strider-bench --odirect, $ranks ranks: exit 2 (a usage error)" \
    "$(timeout 30 bash -c "$(declare -f mpirun_n); mpirun_n $ranks \"$STRIDER_BIN/strider-bench\" --data \"$folder/f.h5\" --odirect" \
      >/dev/null 2>&1; echo $?)" 2
done
# The same file reads without --odirect.
mpirun_n 1 "$STRIDER_BIN/strider-bench" --data "$folder/f.h5" --batch-size 16 --engine direct >"$work/plain.txt" 2>&1 ||
  fail "without --odirect: $(tail -n 2 "$work/plain.txt")"
finish
