# Helpers for the integration tests (sourced). Environment from ctest: STRIDER_BIN (the apps),
# STRIDER_MPIEXEC, STRIDER_TEST_DATA_DIR, STRIDER_SOURCE_DIR, and the MPI-as-root variables.
set -u
failures=0
work=$(mktemp -d /tmp/strider-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect_equal NAME ACTUAL EXPECTED
expect_equal() {
  if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi
}

# expect_error NAME PATTERN TIMEOUT_S COMMAND...: the command must exit non-zero within the timeout
# and the first line of its stderr must be 'strider: error: ...' matching PATTERN (grep -E), and
# that line must appear exactly once.
expect_error() {
  local name=$1 pattern=$2 seconds=$3
  shift 3
  local status=0
  timeout -k 5 "$seconds" "$@" >"$work/out" 2>"$work/err" || status=$?
  local first
  first=$(head -n 1 "$work/err")
  if ((status == 0)); then
    fail "$name: exited 0"
  elif ((status == 124 || status == 137)); then
    fail "$name: timed out after ${seconds}s (a hang)"
  elif [[ ! $first =~ ^strider:\ error:\  ]]; then
    fail "$name: first stderr line is '$first'"
  elif ! grep -qE -- "$pattern" <<<"$first"; then
    fail "$name: '$first' does not match '$pattern'"
  elif (($(grep -c '^strider: error:' "$work/err") != 1)); then
    fail "$name: the error line was printed $(grep -c '^strider: error:' "$work/err") times"
  else
    pass "$name (exit $status): $first"
  fi
}

mpirun_n() {
  local ranks=$1
  shift
  "$STRIDER_MPIEXEC" --bind-to none -np "$ranks" "$@"
}

finish() {
  if ((failures > 0)); then
    echo "$failures failed"
    exit 1
  fi
  echo "all passed"
}
