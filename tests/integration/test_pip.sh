#!/usr/bin/env bash
# pip, as a Python user installs strider: a venv made from the interpreter the module is built for
# (with its site packages: numpy, mpi4py, torch), `pip install --no-build-isolation` of a copy of the
# source tree, an import from another directory and an epoch of training at 2 ranks; then
# `pip wheel`, and that wheel installed into a second venv after the source copy and its build are
# gone. Skipped without the Python module or scikit-build.
# ctest-label: plain-only
source "$(dirname "$0")/common.sh"
python=${STRIDER_PYTHON:-}
[[ -n $python ]] || { echo "skipped: this build has no Python module"; exit 77; }
"$python" -c "import skbuild, venv" 2>/dev/null ||
  { echo "skipped: $python has no scikit-build or venv (Debian: python3-skbuild python3-venv)"; exit 77; }
unset PYTHONPATH
version=$(sed -n 's/^project(strider VERSION \([0-9.]*\).*/\1/p' "$STRIDER_SOURCE_DIR/CMakeLists.txt")

# The source as a fresh clone has it (tracked and untracked-but-not-ignored files), in a folder of
# its own: pip builds in the tree it is given.
src=$work/src
mkdir -p "$src"
if git -C "$STRIDER_SOURCE_DIR" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$STRIDER_SOURCE_DIR" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$src"
else
  (cd "$STRIDER_SOURCE_DIR" && tar --exclude='./build*' --exclude=./_skbuild -cf - .) | tar -xf - -C "$src"
fi
"$STRIDER_BIN/strider-gen" --out "$work/train.h5" --samples 600 --dim 8 --classes 3 --seed 1 --no-progress >/dev/null

# CUDA off: the package is the same without it, and the build stays within the suite's time.
export CMAKE_ARGS="-DSTRIDER_ENABLE_CUDA=OFF"
"$python" -m venv --system-site-packages "$work/venv1"
if "$work/venv1/bin/pip" install --no-build-isolation --no-index "$src" >"$work/pip.log" 2>&1; then
  pass "pip install --no-build-isolation into a venv"
else
  tail -n 40 "$work/pip.log"
  fail "pip install"
  finish
fi

mkdir -p "$work/elsewhere"
cd "$work/elsewhere" || exit 1
expect_equal "import strider from another directory: the venv's package, its version the C++ project's" \
  "$("$work/venv1/bin/python" -c "
import importlib.metadata, strider
print(strider.__file__.startswith('$work/venv1/'), strider.__version__, importlib.metadata.version('strider'))
" 2>&1)" "True $version $version"

# An epoch of training at 2 ranks with the venv's interpreter (torch from the system's packages);
# without torch, an epoch through the Loader.
if "$work/venv1/bin/python" -c "import torch" 2>/dev/null; then
  trained=$(mpirun_n 2 "$work/venv1/bin/python" "$src/examples/train_torch.py" --data "$work/train.h5" --epochs 1 2>&1)
  grep -q "^epoch 0: loss .* (600 samples)$" <<<"$trained" && pass "an epoch of examples/train_torch.py at 2 ranks" ||
    fail "train_torch.py from the venv: $trained"
else
  echo "note: no torch for $python: an epoch through the Loader instead"
  expect_equal "an epoch through the Loader at 2 ranks" "$(mpirun_n 2 "$work/venv1/bin/python" -c "
import strider
with strider.Loader('$work/train.h5', batch_size=50, seed=0) as loader:
    print('epoch of', sum(len(batch) for batch in loader.epoch(0)))
" 2>&1 | grep -o 'epoch of [0-9]*' | sort | uniq -c | awk '{$1 = $1; print}')" "2 epoch of 300"
fi

# A wheel (from the build pip made), installed into a second venv once the source and build are gone.
if "$work/venv1/bin/pip" wheel --no-build-isolation --no-index --no-deps -w "$work/wheels" "$src" >"$work/wheel.log" 2>&1; then
  pass "pip wheel"
else
  tail -n 40 "$work/wheel.log"
  fail "pip wheel"
  finish
fi
wheel=$(ls "$work"/wheels/strider-"$version"-*.whl)
contents=$("$python" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$wheel")
for member in strider/__init__.py strider/samplers.py strider/_strider.pyi strider/py.typed; do
  grep -qx "$member" <<<"$contents" && pass "the wheel holds $member" || fail "the wheel lacks $member"
done
grep -q '^strider/_strider\..*\.so$' <<<"$contents" && pass "the wheel holds the extension" || fail "no extension in the wheel"
outside=$(grep -v -e '^strider/' -e '^strider-[0-9.]*\.dist-info/' <<<"$contents")
expect_equal "nothing outside the package (libstrider is linked into the extension)" "$outside" ""
rm -rf "$src"
"$python" -m venv --system-site-packages "$work/venv2"
"$work/venv2/bin/pip" install --no-index --no-deps "$wheel" >"$work/install2.log" 2>&1 ||
  { cat "$work/install2.log"; fail "installing the wheel"; }
missing=$(ldd "$work"/venv2/lib/python3*/site-packages/strider/_strider*.so | grep "not found")
expect_equal "the installed extension finds every library it needs" "$missing" ""
mpirun_n 2 "$work/venv2/bin/python" -c "
import strider
assert strider.__file__.startswith('$work/venv2/'), strider.__file__
with strider.Loader('$work/train.h5', batch_size=50, seed=0) as loader:
    # One file per rank: mpirun may interleave the ranks' standard output within a line.
    with open('$work/wheel-run.rank%d' % loader.rank, 'w') as out:
        print('epoch of', sum(len(batch) for batch in loader.epoch(0)), 'samples at', loader.world_size, 'ranks', file=out)
" >"$work/wheel-run.log" 2>&1
expect_equal "the wheel's package at 2 ranks: an epoch of 600 samples" \
  "$(cat "$work"/wheel-run.rank* 2>/dev/null | sort | uniq -c | awk '{$1 = $1; print}')" "2 epoch of 300 samples at 2 ranks"
[[ -s $work/wheel-run.rank0 ]] || cat "$work/wheel-run.log"
finish
