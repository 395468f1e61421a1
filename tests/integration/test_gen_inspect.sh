#!/usr/bin/env bash
# strider-gen and strider-inspect info/dump: determinism whatever the rank count, every engine
# returns the same rows, info's report. Unusable input: test_io_bad_input.sh.
source "$(dirname "$0")/common.sh"
# Single-rank runs go through mpirun too: an Open MPI singleton crashes LeakSanitizer's tracer at
# exit under ASan (CI runs these scripts again with sanitizers).
gen=$STRIDER_BIN/strider-gen
inspect=$STRIDER_BIN/strider-inspect

# ---- the same file whatever the rank count, for every kind and layout ----
all_rows() { seq -s, 0 $(($1 - 1)); }
for case in "features --layout chunked --chunk-rows 7" "images --compress 3" "sequences --compress 3"; do
  read -r kind layout <<<"$case"
  {
    args=(--kind "$kind" --class-counts 60,25,15 --seed 7 --dim 5 --height 4 --width 4 --median-len 6 --max-len 20 $layout)
    mpirun_n 1 "$gen" "${args[@]}" --out "$work/one.h5" >/dev/null || fail "gen $kind $layout at 1 rank"
    mpirun_n 3 "$gen" "${args[@]}" --out "$work/three.h5" >/dev/null || fail "gen $kind $layout at 3 ranks"
    cmp -s "$work/one.h5" "$work/three.h5" && pass "$kind $layout: byte-identical from 1 and 3 writers" || fail "$kind $layout: files differ"
    one=$(mpirun_n 1 "$inspect" dump "$work/one.h5" --indices "$(all_rows 100)")
    three=$(mpirun_n 2 "$inspect" dump "$work/three.h5" --indices "$(all_rows 100)")
    expect_equal "$kind $layout: 1 and 3 writers, 1 and 2 readers give the same rows" "$three" "$one"
    [[ $(wc -l <<<"$one") == 100 ]] || fail "$kind $layout: dump printed $(wc -l <<<"$one") lines"
  }
done

# ---- every engine returns the same rows, in the order asked, duplicates included ----
mpirun_n 1 "$gen" --kind features --classes 4 --samples 1000 --dim 3 --out "$work/f.h5" >/dev/null
reference=$(mpirun_n 1 "$inspect" dump "$work/f.h5" --indices 5,3,999,3,0 --engine hdf5)
for engine in direct mmap auto; do
  expect_equal "dump --engine $engine" "$(mpirun_n 2 "$inspect" dump "$work/f.h5" --indices 5,3,999,3,0 --engine $engine)" "$reference"
done
expect_equal "dump order and labels" "$(cut -d' ' -f1,2 <<<"$reference" | tr '\n' ' ')" "5 0 3 0 999 3 3 0 0 0 "
expect_equal "dump of a sequence row prints its tokens" \
  "$(mpirun_n 1 "$gen" --kind sequences --samples 10 --min-len 3 --max-len 3 --out "$work/s.h5" >/dev/null; mpirun_n 1 "$inspect" dump "$work/s.h5" --indices 4 | wc -w)" "5"

# ---- info ----
info=$(mpirun_n 1 "$inspect" info "$work/f.h5" --json)
grep -q '"samples":1000,"sample_shape":\[3\],"element_type":"float32"' <<<"$info" && pass "info --json shape and type" || fail "info --json: $info"
grep -q '"engine":"mmap"' <<<"$info" && pass "info: auto picks mmap for contiguous data" || fail "info engine: $info"
grep -q '"class_counts":\[\[0,250\],\[1,250\],\[2,250\],\[3,250\]\]' <<<"$info" && pass "info class counts" || fail "info classes: $info"
mpirun_n 1 "$gen" --kind features --class-counts 10000,200,50 --dim 2 --compress 1 --out "$work/c.h5" >/dev/null
text=$(mpirun_n 2 "$inspect" info "$work/c.h5")
grep -q "chunked, chunks \[8192, 2\], compressed" <<<"$text" && pass "info: chunking" || fail "info chunking: $text"
grep -q "engine:   hdf5 (auto)" <<<"$text" && pass "info: auto picks hdf5 for compressed data" || fail "info engine: $text"
grep -q "counts: 0:10000 1:200 2:50" <<<"$text" && pass "info: class blocks" || fail "info classes: $text"
mpirun_n 1 "$gen" --kind sequences --samples 2000 --min-len 2 --max-len 100 --median-len 10 --out "$work/seq.h5" >/dev/null
grep -q '"length_histogram":\[\[2,4,' <<<"$(mpirun_n 1 "$inspect" info "$work/seq.h5" --json)" && pass "info: length histogram" || fail "info lengths"
# (Whole outputs first: grep -q closing the pipe early makes mpirun crash.)
grep -q -- "--class-counts" <<<"$(mpirun_n 1 "$gen" --help)" && pass "gen --help" || fail "gen --help"
grep -q -- "--data-key" <<<"$(mpirun_n 1 "$inspect" info --help)" && pass "info --help" || fail "info --help"

finish
