#!/usr/bin/env bash
# h5py variable-length sequences (h5py.vlen_dtype of integers): read back exactly by the hdf5 engine
# over shards, refused by name elsewhere (direct, mmap; floats, strings), rewritten by
# strider-convert as tokens + offsets that every engine reads and that train to the same trace.
source "$(dirname "$0")/common.sh"
gen=$STRIDER_BIN/strider-gen
inspect=$STRIDER_BIN/strider-inspect
convert=$STRIDER_BIN/strider-convert
train=$STRIDER_BIN/strider-train
py=${STRIDER_PYTHON:-/usr/bin/python3}

# ---- h5py writes: int32 sequences over three shards (one of a single row; empty rows; extremes),
# single files of int8, uint16 and int64 sequences, and vlen floats and strings ----
"$py" - "$work" <<'PY' || fail "h5py could not write the files (scripts/setup.sh installs python3-h5py)"
import sys, h5py, numpy as np
folder = sys.argv[1]
rng = np.random.default_rng(11)
def rows_of(dtype, n):
    info = np.iinfo(dtype)
    rows = []
    for i in range(n):
        length = 0 if i % 7 == 3 else int(rng.integers(1, 12))
        rows.append(rng.integers(max(info.min, -1000), min(info.max, 1000), length, endpoint=True).astype(dtype))
    rows[1] = np.array([info.min, info.max, 0], dtype=dtype)  # both ends of the type
    return rows
def write(path, rows, dtype, labels=None):
    with h5py.File(path, "w") as f:
        d = f.create_dataset("tokens", (len(rows),), dtype=h5py.vlen_dtype(dtype))
        for i, row in enumerate(rows):
            d[i] = row
        if labels is not None:
            f["labels"] = labels
def expected(path, rows, labels, indices):
    with open(path, "w") as f:
        for i in indices:
            f.write(" ".join([str(i), str(labels[i]) if labels is not None else "-"] + [str(int(v)) for v in rows[i]]) + "\n")
    with open(path + ".rows", "w") as f:
        f.write(",".join(map(str, indices)))
rows = rows_of(np.int32, 90)
labels = rng.integers(0, 4, 90).astype(np.int64)
bounds = [0, 40, 41, 90]
for k in range(3):
    write(f"{folder}/part-{k}.h5", rows[bounds[k]:bounds[k + 1]], np.int32, labels[bounds[k]:bounds[k + 1]])
expected(f"{folder}/int32.expected", rows, labels, [0, 1, 3, 39, 40, 41, 42, 89, 40, 0, 10])
for dtype in (np.int8, np.uint16, np.int64):
    name = np.dtype(dtype).name
    r = rows_of(dtype, 30)
    write(f"{folder}/{name}.h5", r, dtype)
    expected(f"{folder}/{name}.expected", r, None, [29, 0, 1, 3, 17, 1])
with h5py.File(f"{folder}/deflate.h5", "w") as f:  # chunked (4 rows) and compressed
    d = f.create_dataset("tokens", (90,), dtype=h5py.vlen_dtype(np.int32), chunks=(4,), compression="gzip")
    for i, row in enumerate(rows):
        d[i] = row
    f["labels"] = labels
with h5py.File(f"{folder}/both.h5", "w") as f:
    d = f.create_dataset("tokens", (1,), dtype=h5py.vlen_dtype(np.int32))
    d[0] = np.array([1, 2], np.int32)
    f["offsets"] = np.array([0, 2], np.int64)
with h5py.File(f"{folder}/empty.h5", "w") as f:
    f.create_dataset("tokens", (0,), dtype=h5py.vlen_dtype(np.int32))
with h5py.File(f"{folder}/floats.h5", "w") as f:
    d = f.create_dataset("tokens", (2,), dtype=h5py.vlen_dtype(np.float32))
    d[0] = np.array([1.5, 2.5], np.float32)
    d[1] = np.array([3.5], np.float32)
with h5py.File(f"{folder}/strings.h5", "w") as f:
    f.create_dataset("tokens", data=np.array(["a b", "c"], dtype=object), dtype=h5py.string_dtype())
PY

# dump_equals NAME DATA EXPECTED [ARGS...]: dump at 2 ranks of EXPECTED's rows equals its lines.
dump_equals() {
  local name=$1 data=$2 expected=$3
  shift 3
  expect_equal "$name" "$(mpirun_n 2 "$inspect" dump "$data" --indices "$(cat "$expected.rows")" "$@" 2>/dev/null)" \
    "$(cat "$expected")"
}
shards="$work/part-0.h5,$work/part-1.h5,$work/part-2.h5"
dump_equals "vlen int32 over 3 shards: dump over global indices equals h5py's values" "$shards" "$work/int32.expected"
dump_equals "vlen int32 over 3 shards: --engine hdf5 named" "$shards" "$work/int32.expected" --engine hdf5
dump_equals "vlen int32, chunked and deflated: dump equals h5py's values" "$work/deflate.h5" "$work/int32.expected"
grep -q "compressed (deflate, through HDF5's filters (h5py variable-length sequences))" \
  <<<"$(mpirun_n 1 "$inspect" info "$work/deflate.h5" 2>/dev/null)" &&
  pass "vlen: info says HDF5's filters inflate h5py's sequences" ||
  fail "vlen: info compression: $(mpirun_n 1 "$inspect" info "$work/deflate.h5" 2>&1)"
for type in int8 uint16 int64; do
  dump_equals "vlen $type: dump equals h5py's values" "$work/$type.h5" "$work/$type.expected"
done
grep -q '"kind":"sequences".*"tokens":[1-9][0-9]*,.*"engine":"hdf5"' <<<"$(mpirun_n 1 "$inspect" info "$shards" --json 2>/dev/null)" &&
  pass "vlen: info says sequences, read by hdf5 (auto)" || fail "vlen: info: $(mpirun_n 1 "$inspect" info "$shards" --json 2>&1)"

# ---- what cannot be read: one line each, at 2 ranks ----
for engine in direct mmap; do
  expect_error "vlen with --engine $engine" "the $engine engine cannot read .*only the hdf5 engine reads.*strider-convert" \
    30 mpirun_n 2 "$inspect" dump "$shards" --indices 0 --engine $engine
done
expect_error "vlen of floats" "/tokens holds variable-length sequences of 4-byte floats; strider reads variable-length sequences of integers only" \
  30 mpirun_n 2 "$inspect" dump "$work/floats.h5" --indices 0
expect_error "vlen strings" "/tokens holds variable-length strings; strider reads variable-length sequences of integers only.*tokenize" \
  30 mpirun_n 2 "$inspect" dump "$work/strings.h5" --indices 0
expect_error "vlen beside an offsets dataset" "/tokens holds variable-length sequences .*need no /offsets" \
  30 mpirun_n 2 "$inspect" dump "$work/both.h5" --indices 0
expect_error "empty vlen dataset" "/tokens is empty" 30 mpirun_n 2 "$inspect" dump "$work/empty.h5" --indices 0
expect_error "vlen named with --data-key" "holds variable-length sequences .*--tokens-key" \
  30 mpirun_n 2 "$inspect" dump "$work/int8.h5" --indices 0 --data-key /tokens

# ---- strider-convert: tokens + offsets every engine reads, labels carried ----
mpirun_n 2 "$convert" --data "$shards" --out "$work/flat.h5" 2>"$work/convert.err" >/dev/null ||
  fail "strider-convert at 2 ranks: $(cat "$work/convert.err")"
grep -qE "^strider-convert: wrote 90 rows \(.* int32 tokens\) to .* rows/s, 2 ranks\)$" "$work/convert.err" &&
  pass "strider-convert reports rows/s" || fail "strider-convert's last line: $(tail -n 1 "$work/convert.err")"
for engine in mmap direct hdf5; do
  dump_equals "converted file, $engine engine: equals h5py's values" "$work/flat.h5" "$work/int32.expected" --engine $engine
done
expect_error "strider-convert does not overwrite" "cannot create .*flat.h5: it exists" 30 \
  mpirun_n 2 "$convert" --data "$shards" --out "$work/flat.h5"
expect_error "strider-convert of vlen floats" "holds variable-length sequences of 4-byte floats" 30 \
  mpirun_n 2 "$convert" --data "$work/floats.h5" --out "$work/floats-flat.h5"
[[ ! -e $work/floats-flat.h5 ]] && pass "no output left after a failed convert" || fail "a failed convert left its output"

# ---- training: the vlen file and its conversion train to the same trace and losses ----
mpirun_n 2 "$gen" --kind sequences --classes 4 --samples 600 --min-len 2 --max-len 64 --median-len 16 --seed 1 \
  --out "$work/seq.h5" --no-progress >/dev/null
"$py" - "$work/seq.h5" "$work/seq-vlen.h5" <<'PY' || fail "h5py could not write the vlen copy"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    tokens, offsets, labels = f["tokens"][:], f["offsets"][:], f["labels"][:]
with h5py.File(sys.argv[2], "w") as f:
    d = f.create_dataset("tokens", (len(offsets) - 1,), dtype=h5py.vlen_dtype(tokens.dtype))
    for i in range(len(offsets) - 1):
        d[i] = tokens[offsets[i]:offsets[i + 1]]
    f["labels"] = labels
PY
mpirun_n 2 "$convert" --data "$work/seq-vlen.h5" --out "$work/seq-flat.h5" >/dev/null 2>&1 || fail "convert seq-vlen"
grep -q '"engine":"mmap"' <<<"$(mpirun_n 1 "$inspect" info "$work/seq-flat.h5" --json 2>/dev/null)" &&
  pass "the converted file is read by mmap (auto)" || fail "the converted file is not read by mmap"
losses() { grep -o '"loss":[^,]*' "$1" | tr '\n' ' '; }
for sampler in "bucketed --max-tokens 512" "distributed --batch-size 16" "streaming --batch-size 16" "block --batch-size 16 --block-size 64" "balanced --batch-size 16" "stratified --batch-size 16"; do
  for data in seq-vlen seq-flat; do
    rm -f "$work/$data.json" "$work/$data.trace".rank*
    mpirun_n 2 "$train" --data "$work/$data.h5" --sampler $sampler --epochs 2 --seed 2 --lr 2 \
      --json "$work/$data.json" --trace-samples "$work/$data.trace" >"$work/$data.out" 2>&1 ||
      fail "train $data --sampler $sampler: $(tail -n 2 "$work/$data.out")"
  done
  for rank in 0 1; do
    if [[ -s $work/seq-vlen.trace.rank$rank ]] && cmp -s "$work/seq-vlen.trace.rank$rank" "$work/seq-flat.trace.rank$rank"; then
      pass "$sampler: rank $rank's sample trace of the vlen file equals its conversion's"
    else
      fail "$sampler: rank $rank's traces differ"
    fi
  done
  [[ -n $(losses "$work/seq-vlen.json") ]] &&
    expect_equal "$sampler: per-epoch losses of the vlen file and its conversion" \
      "$(losses "$work/seq-vlen.json")" "$(losses "$work/seq-flat.json")" || fail "$sampler: no losses"
done
# The in-memory store loads vlen data through the same reader: the same losses as from the file.
mpirun_n 2 "$train" --data "$work/seq-vlen.h5" --sampler bucketed --max-tokens 512 --epochs 2 --seed 2 --lr 2 \
  --json "$work/store.json" --store memory >"$work/store.out" 2>&1 || fail "train --store memory: $(tail -n 2 "$work/store.out")"
mpirun_n 2 "$train" --data "$work/seq-vlen.h5" --sampler bucketed --max-tokens 512 --epochs 2 --seed 2 --lr 2 \
  --json "$work/file.json" >/dev/null 2>&1
[[ -n $(losses "$work/file.json") ]] &&
  expect_equal "vlen under --store memory: the losses of the file" "$(losses "$work/store.json")" "$(losses "$work/file.json")" ||
  fail "vlen under --store memory: no losses"
finish
