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
# Open MPI's mpirun, once a rank exits non-zero, signals the job's processes and waits
# odls_base_sigkill_timeout (1 s) between SIGTERM and SIGKILL even when every rank has already
# exited: 1-2 s of each failing run, minutes of the suite. Here every rank is expected to stop on
# its own (an agreed error, or MPI_Abort), so the wait is 0 unless the caller sets it.
expect_error() {
  local name=$1 pattern=$2 seconds=$3
  shift 3
  local status=0
  # Through bash so that the command may be a helper function such as mpirun_n.
  OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0} \
    timeout -k 5 "$seconds" bash -c "$(declare -f mpirun_n); \"\$@\"" _ "$@" >"$work/out" 2>"$work/err" || status=$?
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

# json_number FILE KEY: the first number after "KEY": in a JSON file.
json_number() { grep -o "\"$2\":[-0-9.eE+]*" "$1" | head -n 1 | cut -d: -f2; }
# json_array FILE KEY: the numbers of the first array "KEY":[...] in a JSON file, space-separated.
json_array() { grep -o "\"$2\":\[[^]]*\]" "$1" | head -n 1 | sed 's/.*\[//; s/\]//; s/,/ /g'; }
# expect_at_least NAME VALUE MINIMUM (floating point)
expect_at_least() {
  if awk -v v="$2" -v m="$3" 'BEGIN { exit !(v != "" && v + 0 >= m + 0) }'; then pass "$1: $2 >= $3"; else fail "$1: $2 < $3"; fi
}
expect_at_most() {
  if awk -v v="$2" -v m="$3" 'BEGIN { exit !(v != "" && v + 0 <= m + 0) }'; then pass "$1: $2 <= $3"; else fail "$1: $2 > $3"; fi
}

# wait_until SECONDS COMMAND...: polls COMMAND every 50 ms until it succeeds (returns 0) or SECONDS
# pass (returns 1): a wait on a condition (a file, a log line, a process's state), never a sleep
# that guesses how long something takes.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

