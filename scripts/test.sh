#!/usr/bin/env bash
# Sets up, configures, builds and runs every test of the plain build (ctest). Exits non-zero on any
# failure. The sanitizer passes are separate (scripts/test-sanitizers.sh); .ci/run runs both.
# Usage: scripts/test.sh            (build folder: build/, or $STRIDER_BUILD_DIR)
set -euo pipefail
source "$(dirname "$0")/common.sh"

checks() {
  "$repo_root/scripts/check-format.sh"
  "$repo_root/scripts/check-layers.sh"
}
run_stage setup "$repo_root/scripts/setup.sh"
run_stage checks checks
run_stage build configure_and_build "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIDER_BUILD_TESTS=ON
echo "test: running ctest in $build_dir"
run_stage tests strider_ctest "$build_dir" ctest-plain
