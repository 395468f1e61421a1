#!/usr/bin/env bash
# The documentation runs: every code block of README.md and docs/ is marked tested or illustrative,
# the tested shell and Python blocks (the README's quick starts among them) run as written in a fresh
# directory on small files, and docs/reference/ matches what scripts/docs/gen-reference.py generates
# from the apps and the sources, and the network table of docs/design/scaling.md what
# scripts/bench/summarize_network.py makes of bench/results/network.json.
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
if "$python" "$STRIDER_SOURCE_DIR/scripts/bench/summarize_network.py" --results "$STRIDER_SOURCE_DIR/bench/results/network.json" \
  --doc "$STRIDER_SOURCE_DIR/docs/design/scaling.md" --check >"$work/network.log" 2>&1; then
  pass "docs/design/scaling.md's network table matches bench/results/network.json"
else
  cat "$work/network.log"
  fail "docs/design/scaling.md's network table is stale"
fi
finish
