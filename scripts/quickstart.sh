#!/usr/bin/env bash
# The README's first command: install what the main job needs (scripts/setup.sh --core), build the
# library and the three apps the job runs (no tests, no Python module, no examples, no CUDA), generate
# a small imbalanced dataset, train it at 2 ranks with the `balanced` and the `distributed` samplers,
# and draw both runs side by side (scripts/plot-stats.py).
#   STRIDER_QUICKSTART_BUILD_DIR  build folder (default: build-quickstart, beside the tests' build/)
#   STRIDER_QUICKSTART_DIR        where the data, the runs' JSON and the PNG go (default: <build>/run)
#   STRIDER_SKIP_SETUP=1          skip the package check (packages installed another way)
set -euo pipefail
source "$(dirname "$0")/common.sh"

[[ ${STRIDER_SKIP_SETUP:-0} == 1 ]] || "$repo_root/scripts/setup.sh" --core
build=${STRIDER_QUICKSTART_BUILD_DIR:-$repo_root/build-quickstart}
STRIDER_BUILD_TARGETS="strider-gen strider-inspect strider-train" configure_and_build "$build" \
  -DCMAKE_BUILD_TYPE=Release -DSTRIDER_BUILD_TESTS=OFF -DSTRIDER_BUILD_PYTHON=OFF \
  -DSTRIDER_BUILD_LIBTORCH_EXAMPLE=OFF -DSTRIDER_ENABLE_CUDA=OFF
bin=$build/bin
run=${STRIDER_QUICKSTART_DIR:-$build/run}
mkdir -p "$run"
launch=(mpirun --bind-to none -np 2)

echo
echo "quickstart: generating $run/train.h5: 10,250 feature vectors in 3 classes (10000, 200, 50 samples)"
"${launch[@]}" "$bin/strider-gen" --kind features --class-counts 10000,200,50 --dim 16 --noise 3 --seed 1 \
  --out "$run/train.h5" --no-progress
"$bin/strider-inspect" info "$run/train.h5"

for sampler in balanced distributed; do
  echo
  echo "quickstart: training at 2 ranks with --sampler $sampler"
  "${launch[@]}" "$bin/strider-train" --data "$run/train.h5" --sampler "$sampler" --batch-size 32 --epochs 3 \
    --lr 0.05 --seed 3 --checkpoint "$run/$sampler.ckpt" --json "$run/$sampler.json"
done

echo
python=/usr/bin/python3  # Debian's, where python3-matplotlib installs (a python3 of one's own may lack it)
[[ -x $python ]] || python=python3
if "$python" -c "import matplotlib" 2>/dev/null; then
  "$python" "$repo_root/scripts/plot-stats.py" "$run/balanced.json" "$run/distributed.json" \
    --out "$run/quickstart.png" --title "10,250 samples, classes of 10000, 200 and 50, 2 ranks, 3 epochs"
  picture="drawn in $run/quickstart.png"
else
  picture="not drawn (no matplotlib: apt-get install python3-matplotlib, then scripts/plot-stats.py)"
fi
echo "quickstart: done. balanced gives every class every epoch; distributed (PyTorch's DistributedSampler)"
echo "            sees the rare classes as rarely as the file holds them, and their recall collapses."
echo "            Per-epoch figures and per-class recall: $run/{balanced,distributed}.json; $picture."
