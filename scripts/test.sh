#!/usr/bin/env bash
# Sets up, configures, builds and runs every test (ctest). Exits non-zero on any failure.
# Usage: scripts/test.sh            (build folder: build/, or $STRIDER_BUILD_DIR)
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$repo_root/scripts/setup.sh"
"$repo_root/scripts/check-format.sh"
"$repo_root/scripts/check-layers.sh"
configure_and_build "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIDER_BUILD_TESTS=ON
echo "test: running ctest in $build_dir"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$jobs" --timeout 900
