#!/usr/bin/env bash
# Fails when a tracked C++/CUDA source is not formatted with the repository's .clang-format by the
# pinned clang-format (Debian 12's clang-format-14; another version formats some constructs
# differently). Usage: scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=${STRIDER_CLANG_FORMAT:-clang-format-14}
command -v "$formatter" >/dev/null || { echo "check-format: $formatter not found (scripts/setup.sh installs it)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if [[ ${1:-} == --fix ]]; then
  "$formatter" -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
# One formatter per core over batches of files; each names the files it would change in its
# "FILE:LINE:COLUMN: error: code should be clang-formatted" lines.
mapfile -t unformatted < <(printf '%s\0' "${files[@]}" | { xargs -0 -P "$(nproc)" -n 32 "$formatter" --dry-run --Werror 2>&1 || true; } |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if ((${#unformatted[@]})); then
  echo "check-format: ${#unformatted[@]} file(s) not formatted with $formatter (run scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
