#!/usr/bin/env bash
# Measures every ctest entry of a build alone (wall time, and user + system CPU time of the entry and
# its children) and prints lines in the form of tests/test-times.txt's first two figures, for the
# plain build's columns; under a sanitizer build, compare the wall times with the columns of that
# build. Run on an otherwise idle machine: the figures set each entry's TIMEOUT, COST and PROCESSORS.
# Usage: scripts/dev/measure-tests.sh [BUILD_DIR] [ctest -R REGEX]   (default: build/, every entry)
set -euo pipefail
source "$(dirname "$0")/../common.sh"
dir=${1:-$build_dir}
regex=${2:-.}
command -v /usr/bin/time >/dev/null || { echo "measure-tests: /usr/bin/time is missing (Debian: time)" >&2; exit 2; }
mapfile -t tests < <(ctest --test-dir "$dir" -N -R "$regex" | awk '/Test +#[0-9]+:/ { print $3 }')
((${#tests[@]})) || { echo "measure-tests: no ctest entry in $dir matches '$regex'" >&2; exit 2; }
printf '# %-39s %6s %6s\n' entry wall_s cpu_s
for test in "${tests[@]}"; do
  times=$(mktemp)
  status=0
  /usr/bin/time -f "%e %U %S" -o "$times" ctest --test-dir "$dir" -R "^$test\$" >/dev/null 2>&1 || status=$?
  read -r wall user system <"$times"
  rm -f "$times"
  awk -v name="$test" -v wall="$wall" -v cpu="$(awk -v u="$user" -v s="$system" 'BEGIN { print u + s }')" \
    -v status="$status" 'BEGIN { printf "%-41s %6.1f %6.1f%s\n", name, wall, cpu, (status == 0 ? "" : "   # failed or skipped") }'
done
