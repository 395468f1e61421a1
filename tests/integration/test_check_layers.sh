#!/usr/bin/env bash
# ctest-label: plain-only
# scripts/check-layers.sh: the source tree keeps its layers, and the check names an include that
# points up (a forbidden include added on purpose to a copy of the tree, and one of each kind in a
# small made-up tree) while it lets the allowed ones through.
source "$(dirname "$0")/common.sh"
check=$STRIDER_SOURCE_DIR/scripts/check-layers.sh

if "$check" "$STRIDER_SOURCE_DIR" >"$work/tree.out" 2>&1; then
  pass "the source tree keeps its layers: $(cat "$work/tree.out")"
else
  fail "the source tree breaks its layers:"
  cat "$work/tree.out"
fi

# A copy of the tree with one include pointing up (device -> train).
mkdir -p "$work/copy"
cp -r "$STRIDER_SOURCE_DIR/include" "$STRIDER_SOURCE_DIR/src" "$STRIDER_SOURCE_DIR/apps" "$work/copy/"
echo '#include "strider/train/trainer.hpp"' >>"$work/copy/include/strider/device/backend.hpp"
status=0
"$check" "$work/copy" >"$work/copy.out" 2>&1 || status=$?
expect_equal "a device header that includes train/ fails the check" "$status" 1
grep -q '^include/strider/device/backend.hpp:[0-9]*: device includes "strider/train/trainer.hpp"' "$work/copy.out" &&
  pass "the failure names the file, the line and the include" || fail "unexpected report: $(cat "$work/copy.out")"

# One include of each kind, forbidden or allowed.
fake=$work/fake
mkdir -p "$fake/include/strider/sampling" "$fake/include/strider/core" "$fake/src/sampling" "$fake/src/device/cpu" \
  "$fake/src/io" "$fake/src/pipeline" "$fake/src/train" "$fake/apps/tool"
cat >"$fake/include/strider/sampling/plan.hpp" <<'EOF'
#include "strider/core/error.hpp"
#include "strider/comm/communicator.hpp"
EOF
cat >"$fake/src/sampling/plan.cpp" <<'EOF'
#include <vector>
#include <mpi.h>
#include "sampling/detail.hpp"
EOF
printf '#include <hdf5.h>\n' >"$fake/include/strider/core/handle.hpp"
cat >"$fake/src/device/cpu/model.cpp" <<'EOF'
#include "model.hpp"
#include "device/batch_checks.hpp"
#include "strider/comm/communicator.hpp"
#include "strider/pipeline/host_allocator.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "train/batch_checks.hpp"
#include "strider/io/batch_reader.hpp"
EOF
cat >"$fake/src/io/reader.cpp" <<'EOF'
#include <hdf5.h>
#include "strider/comm/communicator.hpp"
#include "strider/sampling/random.hpp"
EOF
cat >"$fake/src/pipeline/ring.cpp" <<'EOF'
#include "strider/io/batch_reader.hpp"
#include "strider/sampling/sampler.hpp"
#include "strider/device/backend.hpp"
EOF
cat >"$fake/src/train/loop.cpp" <<'EOF'
#include "strider/device/backend.hpp"
#include "strider/pipeline/prefetcher.hpp"
#include "strider/config.hpp"
EOF
cat >"$fake/apps/tool/main.cpp" <<'EOF'
#include <boost/program_options.hpp>
#include "common/cli.hpp"
#include "subcommands.hpp"
#include "strider/train/trainer.hpp"
#include "io/reader_detail.hpp"
EOF
status=0
"$check" "$fake" >"$work/fake.out" 2>&1 || status=$?
expect_equal "the made-up tree fails the check" "$status" 1
expected=(
  'include/strider/sampling/plan.hpp:2: sampling includes "strider/comm/communicator.hpp"'
  'src/sampling/plan.cpp:2: sampling includes <mpi.h>'
  'include/strider/core/handle.hpp:1: a public core header includes <hdf5.h>'
  'src/device/cpu/model.cpp:5: device includes "strider/pipeline/prefetcher.hpp"'
  'src/device/cpu/model.cpp:6: device includes "train/batch_checks.hpp"'
  'src/device/cpu/model.cpp:7: device includes "strider/io/batch_reader.hpp"'
  'src/io/reader.cpp:3: io includes "strider/sampling/random.hpp"'
  'src/pipeline/ring.cpp:3: pipeline includes "strider/device/backend.hpp"'
  'apps/tool/main.cpp:5: an app includes a private header "io/reader_detail.hpp"'
)
for line in "${expected[@]}"; do
  grep -qF "$line" "$work/fake.out" && pass "named: $line" || fail "not named: $line"
done
# Everything else in the made-up tree is allowed: exactly the lines above and the summary.
expect_equal "nothing allowed is reported" "$(grep -c '^[a-z].*:[0-9]*: ' "$work/fake.out")" "${#expected[@]}"
finish
