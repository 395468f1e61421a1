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
for case in "features --layout chunked --chunk-rows 7" "images --compress 3" "sequences --compress 3" \
  "records --record-bytes 40 --align 4096"; do
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
# A row one past the last is refused, not read past the end of the data.
expect_error "dump --indices past the last row" "--indices: 1000 is outside \\[0, 1000\\) of " 20 \
  mpirun_n 1 "$inspect" dump "$work/f.h5" --indices 999,1000
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
grep -q "compressed (deflate, inflated by strider with \(libdeflate\|zlib\))" <<<"$text" &&
  pass "info: says strider inflates the chunks itself" || fail "info compression: $text"
grep -q "engine:   hdf5 (auto)" <<<"$text" && pass "info: auto picks hdf5 for compressed data" || fail "info engine: $text"
grep -q "counts: 0:10000 1:200 2:50" <<<"$text" && pass "info: class blocks" || fail "info classes: $text"
mpirun_n 1 "$gen" --kind sequences --samples 2000 --min-len 2 --max-len 100 --median-len 10 --out "$work/seq.h5" >/dev/null
grep -q '"length_histogram":\[\[2,4,' <<<"$(mpirun_n 1 "$inspect" info "$work/seq.h5" --json)" && pass "info: length histogram" || fail "info lengths"
# Shards: info lists each file and its global rows; dump takes global indices (row 1000 of f.h5,g.h5
# is row 0 of g.h5). Expected ranges from the files' own row counts (1000 and 300).
mpirun_n 1 "$gen" --kind features --classes 4 --samples 300 --dim 3 --seed 9 --layout chunked --chunk-rows 7 \
  --out "$work/g.h5" >/dev/null
info=$(mpirun_n 2 "$inspect" info "$work/f.h5,$work/g.h5" --json)
grep -q "\"shards\":\[{\"path\":\"$work/f.h5\",\"first_row\":0,\"rows\":1000},{\"path\":\"$work/g.h5\",\"first_row\":1000,\"rows\":300}\]" \
  <<<"$info" && pass "info --json lists the shards and their rows" || fail "info shards: $info"
text=$(mpirun_n 1 "$inspect" info "$work/f.h5,$work/g.h5")
grep -q "^          1000..1299  $work/g.h5$" <<<"$text" && pass "info lists the shards' global rows" || fail "info shards: $text"
expect_equal "dump across a shard boundary: global indices" \
  "$(mpirun_n 2 "$inspect" dump "$work/f.h5,$work/g.h5" --indices 999,1000,1299 | cut -d' ' -f2-)" \
  "$( (mpirun_n 1 "$inspect" dump "$work/f.h5" --indices 999; mpirun_n 1 "$inspect" dump "$work/g.h5" --indices 0,299) | cut -d' ' -f2-)"
# ---- files as h5py writes them: float16 samples split over three shards, int64 labels ----
# dump over global indices (every shard boundary, both ends) must equal h5py's own values exactly.
py=${STRIDER_PYTHON:-/usr/bin/python3}
"$py" - "$work/h5py" <<'PY' || fail "h5py could not write the shards (scripts/setup.sh installs python3-h5py)"
import os, sys, h5py, numpy as np
folder = sys.argv[1]
os.makedirs(folder, exist_ok=True)
rng = np.random.default_rng(3)
x = rng.normal(0, 300, size=(250, 2, 3)).astype(np.float16)
x[0, 0] = [np.inf, -0.0, np.float16(6.0e-8)]  # infinity, negative zero, a subnormal
x[1, 0, 0] = 65504                              # the largest float16
y = rng.integers(0, 5, 250).astype(np.int64)
bounds = [0, 100, 101, 250]                     # one shard of a single row
for k in range(3):
    with h5py.File(f"{folder}/part-{k}.h5", "w") as f:
        f["samples"] = x[bounds[k]:bounds[k + 1]]
        f["labels"] = y[bounds[k]:bounds[k + 1]]
rows = [0, 1, 99, 100, 101, 102, 249, 100, 0]
with open(f"{folder}/rows", "w") as f:
    f.write(",".join(map(str, rows)))
with open(f"{folder}/expected", "w") as f:
    for i in rows:
        f.write(" ".join([str(i), str(y[i])] + [repr(float(v)) for v in x[i].ravel()]) + "\n")
PY
mpirun_n 2 "$inspect" dump "$work/h5py" --indices "$(cat "$work/h5py/rows")" >"$work/h5py/dumped" 2>/dev/null
expect_equal "h5py float16 shards: dump over global indices equals h5py's values exactly" \
  "$("$py" -c '
import sys
parse = lambda path: [[float(v) for v in line.split()] for line in open(path)]
got, want = parse(sys.argv[1]), parse(sys.argv[2])
print("equal" if got == want and len(got) == 9 else f"dump {got} h5py {want}")' "$work/h5py/dumped" "$work/h5py/expected")" "equal"
for engine in hdf5 direct mmap; do
  expect_equal "h5py float16 shards: the $engine engine" \
    "$(mpirun_n 2 "$inspect" dump "$work/h5py" --indices "$(cat "$work/h5py/rows")" --engine $engine 2>/dev/null)" \
    "$(cat "$work/h5py/dumped")"
done
grep -q '"element_type":"float16"' <<<"$(mpirun_n 1 "$inspect" info "$work/h5py" --json)" &&
  pass "h5py float16: info says float16" || fail "h5py float16 info"

# ---- stats: per channel for images, per feature otherwise; expected values from dump's rows ----
mpirun_n 1 "$gen" --kind images --classes 3 --samples 301 --channels 3 --height 4 --width 4 --seed 5 \
  --out "$work/im.h5" >/dev/null
mpirun_n 1 "$inspect" dump "$work/im.h5" --indices "$(all_rows 301)" >"$work/im.dump"
mpirun_n 1 "$inspect" dump "$work/f.h5,$work/g.h5" --indices "$(all_rows 1300)" >"$work/fg.dump"
# Checks a stats --json against the dumped rows: group of element f is f // (F // groups) for
# channels first, f otherwise; population standard deviation; relative tolerance 1e-6.
check_stats() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, math, sys
stats = json.load(open(sys.argv[1]))
rows = [[float(v) for v in line.split()[2:]] for line in open(sys.argv[2])]
groups = int(sys.argv[3])
features = len(rows[0])
per = features // groups if stats["layout"] == "channels-first" else 1
values = [[] for _ in range(groups)]
for row in rows:
    for f, v in enumerate(row):
        values[f // per if per > 1 else f].append(v)
def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))
for g, vs in enumerate(values):
    mean = sum(vs) / len(vs)
    std = math.sqrt(sum((v - mean) ** 2 for v in vs) / len(vs))
    want = (len(vs), mean, std, min(vs), max(vs))
    got = (stats["count"][g], stats["mean"][g], stats["std"][g], stats["min"][g], stats["max"][g])
    if got[0] != want[0] or not all(close(a, b) for a, b in zip(got[1:], want[1:])):
        sys.exit(f"group {g}: stats {got}, expected {want}")
print(stats["layout"], groups)
PY
}
mpirun_n 3 "$inspect" stats "$work/im.h5" --json >"$work/im3.json" 2>/dev/null
expect_equal "stats: uint8 images [3, 4, 4] per channel (channels first), 3 ranks" \
  "$(check_stats "$work/im3.json" "$work/im.dump" 3)" "channels-first 3"
mpirun_n 1 "$inspect" stats "$work/im.h5" --json >"$work/im1.json" 2>/dev/null
expect_equal "stats: 1 rank gives the same counts, min and max as 3" \
  "$(python3 -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); print([a[k]==b[k] for k in ("count","min","max")])' "$work/im1.json" "$work/im3.json")" \
  "[True, True, True]"
mpirun_n 2 "$inspect" stats "$work/f.h5,$work/g.h5" --json >"$work/fg.json" 2>/dev/null
expect_equal "stats: features over two shards, per feature, 2 ranks" \
  "$(check_stats "$work/fg.json" "$work/fg.dump" 3)" "per-feature 3"
text=$(mpirun_n 2 "$inspect" stats "$work/im.h5" --channel-axis last 2>&1)
grep -q "channel 3: count 3612" <<<"$text" && pass "stats --channel-axis last: the last axis (4 channels)" || fail "stats last: $text"
expect_error "stats on sequences" "stats needs fixed-size samples; $work/s.h5 holds token sequences" 20 \
  mpirun_n 2 "$inspect" stats "$work/s.h5"
expect_error "stats --channel-axis on features" "--channel-axis 1 needs image samples" 20 \
  mpirun_n 2 "$inspect" stats "$work/f.h5" --channel-axis 1
# (Whole outputs first: grep -q closing the pipe early makes mpirun crash.)
grep -q -- "--class-counts" <<<"$(mpirun_n 1 "$gen" --help)" && pass "gen --help" || fail "gen --help"
grep -q -- "--data-key" <<<"$(mpirun_n 1 "$inspect" info --help)" && pass "info --help" || fail "info --help"

finish
