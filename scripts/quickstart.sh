#!/usr/bin/env bash
# The README's first command: set up, build, and run strider at 2 ranks on a small example.
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$repo_root/scripts/setup.sh"
configure_and_build "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
bin=$build_dir/bin

echo
echo "quickstart: the epoch-1 plan of 20 samples on 2 ranks, batches of 4 (seed 7)"
for rank in 0 1; do
  echo -n "  rank $rank: "
  mpirun --bind-to none -np 1 "$bin/strider-inspect" plan --samples 20 --world 2 --rank $rank --seed 7 --epoch 1 --batch-size 4
done
echo "quickstart: done"
