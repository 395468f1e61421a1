#!/usr/bin/env bash
# Unusable input for strider-gen and strider-inspect info/dump, at 2 ranks: each must print one
# 'strider: error:' line first, exit non-zero on every rank, and not hang.
source "$(dirname "$0")/common.sh"
# Single-rank runs go through mpirun too: an Open MPI singleton crashes LeakSanitizer's tracer at
# exit under ASan (CI runs these scripts again with sanitizers).
gen=$STRIDER_BIN/strider-gen
inspect=$STRIDER_BIN/strider-inspect
# A file strider-gen cannot write (made with the HDF5 C API; shared with test_reliability.sh): /samples
# float32 [4,2], /labels int32 [4], /labels_short int32 [3], /half float16 [4,2], /names 4-byte
# strings [4], /empty float32 [0,2].
bad=$STRIDER_TEST_DATA_DIR/unusable.h5
mpi2=("$STRIDER_MPIEXEC" --bind-to none -np 2)  # expect_error runs commands under timeout: no functions

mpirun_n 1 "$gen" --kind features --classes 4 --samples 1000 --dim 3 --out "$work/f.h5" >/dev/null
mpirun_n 1 "$gen" --kind features --classes 2 --samples 100 --dim 2 --compress 1 --out "$work/c.h5" >/dev/null
mpirun_n 1 "$gen" --kind sequences --samples 10 --min-len 3 --max-len 3 --out "$work/s.h5" >/dev/null
echo "not an HDF5 file" >"$work/text.h5"
mkdir -p "$work/r0" "$work/r1" && cp "$work/f.h5" "$work/r0/data.h5"
expect_error "missing file" "cannot open $work/nope.h5: No such file" 20 "${mpi2[@]}" "$inspect" info "$work/nope.h5"
expect_error "not HDF5" "not an HDF5 file" 20 "${mpi2[@]}" "$inspect" info "$work/text.h5"
# A missing name lists what the file holds, with shapes; the source location stays out of it.
expect_error "missing dataset" "no dataset /nope .*; the file holds /labels \[1000\], /samples \[1000, 3\]\$" 20 \
  "${mpi2[@]}" "$inspect" dump "$work/f.h5" --indices 1 --data-key /nope
STRIDER_LOG_LEVEL=debug timeout 20 "${mpi2[@]}" "$inspect" dump "$work/f.h5" --indices 1 --data-key /nope \
  >/dev/null 2>"$work/debug.err" || true
expect_equal "missing dataset at STRIDER_LOG_LEVEL=debug: with its source location" \
  "$(grep -cE '^strider: error: .*/samples \[1000, 3\] \(src/io/open_reader.cpp:[0-9]+\)$' "$work/debug.err")" 1
expect_error "missing on one rank only" "\[rank 1\] cannot open data.h5: No such file" 20 \
  "${mpi2[@]}" bash -c 'cd "$0/r$OMPI_COMM_WORLD_RANK" && exec "$1" info data.h5' "$work" "$inspect"
expect_error "labels length" "labels /labels_short has 3 entries but there are 4 samples" 20 "${mpi2[@]}" "$inspect" info "$bad" --label-key /labels_short
expect_error "misspelt label key" "no labels dataset /lables \(named by --label-key; --label-key none reads no labels\)" 20 \
  "${mpi2[@]}" "$inspect" info "$work/f.h5" --label-key /lables
expect_error "no labels for a class-aware mode" "--label-key none reads no labels, but the balanced sampler needs them" 20 \
  "${mpi2[@]}" "$inspect" plan --data "$work/f.h5" --sampler balanced --label-key none
# --label-key none: strider-gen writes no labels, and the default name is then optional.
mpirun_n 1 "$gen" --kind features --samples 10 --dim 2 --label-key none --out "$work/unlabelled.h5" >/dev/null
expect_equal "gen --label-key none: no labels" "$(mpirun_n 1 "$inspect" info "$work/unlabelled.h5" | grep '^labels:')" \
  "labels:   none (/labels not found)"
expect_error "sequences named, the file has fixed-size samples" \
  "no dataset /toks \(the sequences named by --tokens-key/--offsets-key\)" 20 "${mpi2[@]}" "$inspect" info "$work/f.h5" --tokens-key /toks
expect_error "both layouts named" "--data-key /x names fixed-size samples and --tokens-key/--offsets-key \(/tokens, /offs\) sequences: name one" 20 \
  "${mpi2[@]}" "$inspect" info "$work/f.h5" --data-key /x --offsets-key /offs
expect_error "offsets length" "labels /labels has 10 entries but there are 9 samples \(offsets /labels has 10 entries\)" 20 \
  "${mpi2[@]}" "$inspect" info "$work/s.h5" --offsets-key /labels
expect_error "offsets decreasing" "/tokens is not non-decreasing" 20 "${mpi2[@]}" "$inspect" info "$work/s.h5" --offsets-key /tokens --label-key none
expect_error "offsets past the end" "is past the end of /labels" 20 "${mpi2[@]}" "$inspect" info "$work/s.h5" --tokens-key /labels
expect_error "unsupported type (strings)" "/names has an unsupported type \(4-byte string\)" 20 "${mpi2[@]}" "$inspect" info "$bad" --data-key /names
# float16 is read (the file was written with float16 1..8): not an error any more.
expect_equal "float16 read" "$(mpirun_n 2 "$inspect" dump "$bad" --data-key /half --indices 3,0 2>/dev/null)" $'3 1 7 8\n0 0 1 2'
expect_error "empty dataset" "/empty is empty" 20 "${mpi2[@]}" "$inspect" info "$bad" --data-key /empty
expect_error "direct on compressed data" "the direct engine cannot read .*compressed" 20 "${mpi2[@]}" "$inspect" dump "$work/c.h5" --indices 1 --engine direct
expect_error "index out of range" "--indices: 1000 is outside \[0, 1000\)" 20 "${mpi2[@]}" "$inspect" dump "$work/f.h5" --indices 1,1000
expect_error "gen: unknown kind" "--kind must be features, images, sequences or records" 20 "${mpi2[@]}" "$gen" --out "$work/x.h5" --kind pictures
expect_error "gen: bad class counts" "--class-counts: 'x' is not a number" 20 "${mpi2[@]}" "$gen" --out "$work/x.h5" --class-counts 3,x
expect_error "gen: unwritable output" "creating $work/no/such/dir.h5" 20 "${mpi2[@]}" "$gen" --out "$work/no/such/dir.h5"
expect_error "gen: more than the file system holds" \
  "$work/huge.h5 needs 400.4 PB \(99999999999999 samples\), and its file system has .* free" 20 \
  "${mpi2[@]}" "$gen" --out "$work/huge.h5" --samples 99999999999999 --dim 1000
expect_error "gen: more sequences than the file system holds" \
  "$work/huge.h5 needs at least 16.0 PB \(999999999999999 sequences\), and its file system has .* free" 20 \
  "${mpi2[@]}" "$gen" --out "$work/huge.h5" --kind sequences --samples 999999999999999 --min-len 1 --max-len 10
# A launcher that is not MPI's: torchrun's two processes, started at once without mpirun, are two MPI
# worlds of one. Both must refuse within seconds (exit 2) with one line naming WORLD_SIZE and how to
# launch. These run as Open MPI singletons, whose exit crashes LeakSanitizer's tracer: leak checks off.
singleton=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
torchrun_process() {  # torchrun_process RANK: strider-inspect info as torchrun's process RANK of 2
  "${singleton[@]}" RANK="$1" WORLD_SIZE=2 LOCAL_RANK="$1" timeout -k 5 20 "$inspect" info "$work/f.h5" \
    >/dev/null 2>"$work/torchrun$1.err"
  echo $? >"$work/torchrun$1.status"
}
started=$SECONDS
torchrun_process 0 &
torchrun_process 1 &
wait
for rank in 0 1; do
  first=$(head -n 1 "$work/torchrun$rank.err")
  expect_equal "torchrun's process $rank: exit" "$(cat "$work/torchrun$rank.status")" 2
  if grep -qE "^strider: error: torchrun \(WORLD_SIZE=2, RANK=$rank, LOCAL_RANK=$rank\) started this process as one of 2 but MPI's world has 1 process: .*\`mpirun -np 2 \.\.\.\`.*initialise torch.distributed from MPI's rank and size" <<<"$first" &&
    (($(grep -c '^strider: error:' "$work/torchrun$rank.err") == 1)); then
    pass "torchrun's process $rank: $first"
  else
    fail "torchrun's process $rank: stderr '$(cat "$work/torchrun$rank.err")'"
  fi
done
expect_at_most "torchrun's processes: refused within seconds" $((SECONDS - started)) 10
expect_error "srun step of 2 without --mpi" \
  "srun \(SLURM_STEP_NUM_TASKS=2, SLURM_STEP_ID=0, SLURM_PROCID=1\) started this process as one of 2 .*srun --mpi=pmix -n 2" 20 \
  "${singleton[@]}" SLURM_JOB_ID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 \
  "$STRIDER_BIN/strider-train" --data "$work/f.h5" --epochs 1
# One process in an sbatch allocation of 2 tasks (the batch script: no step variables), and a
# launcher silenced by STRIDER_IGNORE_LAUNCHER=1, are accepted.
expect_equal "one process in an allocation of 2 tasks" \
  "$("${singleton[@]}" SLURM_NTASKS=2 SLURM_JOB_ID=1 "$inspect" info "$work/f.h5" 2>&1 | grep -c '^file:')" 1
expect_equal "STRIDER_IGNORE_LAUNCHER=1" \
  "$("${singleton[@]}" STRIDER_IGNORE_LAUNCHER=1 WORLD_SIZE=2 RANK=1 "$inspect" info "$work/f.h5" 2>&1 | grep -c '^file:')" 1
finish
