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
expect_error "missing dataset" "no dataset /nope" 20 "${mpi2[@]}" "$inspect" dump "$work/f.h5" --indices 1 --data-key /nope
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
finish
