#!/usr/bin/env bash
# The documentation runs: every code block of README.md and docs/ is marked tested or illustrative,
# the tested shell and Python blocks (the README's quick starts among them) run as written in a fresh
# directory on small files, and docs/reference/ matches what scripts/docs/gen-reference.py generates
# from the apps and the sources, the network table of docs/design/scaling.md what
# bench/scripts/summarize_network.py makes of bench/results/network.json, and docs/performance.md
# what scripts/docs/gen-performance.py makes of bench/results/ and docs/performance.md.in (a copy of
# the page with one figure changed must fail that check).
source "$(dirname "$0")/common.sh"
python=${STRIDER_PYTHON:-/usr/bin/python3}
[[ -x $python ]] || { echo "skipped: no python3 to run the docs' blocks"; exit 77; }
export STRIDER_MPIEXEC=${STRIDER_MPIEXEC:-mpirun}

if "$python" "$STRIDER_SOURCE_DIR/scripts/docs/run-doc-blocks.py" >"$work/blocks.log" 2>&1; then
  pass "doc blocks: $(tail -n 1 "$work/blocks.log")"
else
  cat "$work/blocks.log"
  fail "doc blocks"
fi
grep '^skip:' "$work/blocks.log" || true

if "$python" "$STRIDER_SOURCE_DIR/scripts/docs/gen-reference.py" --bin "$STRIDER_BIN" --check >"$work/reference.log" 2>&1; then
  pass "docs/reference matches the code"
else
  cat "$work/reference.log"
  fail "docs/reference is stale"
fi
if "$python" "$STRIDER_SOURCE_DIR/scripts/docs/gen-performance.py" --check >"$work/performance.log" 2>&1; then
  pass "docs/performance.md matches bench/results/"
else
  cat "$work/performance.log"
  fail "docs/performance.md is stale"
fi
# The first figure of the comparison table's first row, its first digit doubled (9,329,561 -> 99,329,561).
sed -E 's/^(\| w1 [^|]*\| 1 \| )([0-9])/\1\2\2/' "$STRIDER_SOURCE_DIR/docs/performance.md" >"$work/performance.md"
if cmp -s "$STRIDER_SOURCE_DIR/docs/performance.md" "$work/performance.md"; then
  fail "no w1 row at 1 rank in docs/performance.md to change a figure of"
elif "$python" "$STRIDER_SOURCE_DIR/scripts/docs/gen-performance.py" --check --page "$work/performance.md" \
  >"$work/performance-changed.log" 2>&1; then
  fail "gen-performance.py --check passed a page with a changed figure"
elif grep -q '^-| w1 ' "$work/performance-changed.log"; then
  pass "gen-performance.py --check fails on a changed figure and shows it in the diff"
else
  cat "$work/performance-changed.log"
  fail "gen-performance.py --check failed on a changed figure without showing it"
fi
if "$python" "$STRIDER_SOURCE_DIR/bench/scripts/summarize_network.py" --results "$STRIDER_SOURCE_DIR/bench/results/network.json" \
  --doc "$STRIDER_SOURCE_DIR/docs/design/scaling.md" --check >"$work/network.log" 2>&1; then
  pass "docs/design/scaling.md's network table matches bench/results/network.json"
else
  cat "$work/network.log"
  fail "docs/design/scaling.md's network table is stale"
fi
finish
