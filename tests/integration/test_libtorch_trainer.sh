#!/usr/bin/env bash
# examples/libtorch_trainer at 2 ranks: it trains (accuracy far above chance, the loss falls), a run
# stopped mid-epoch and resumed from its checkpoint ends with the same parameters as a run that
# never stopped, a checkpoint of another seed is refused, and a bad option ends every rank with one
# line. Skipped (exit 77) where the example was not built (LibTorch not found, sanitizer builds).
source "$(dirname "$0")/common.sh"
trainer=$STRIDER_BIN/libtorch_trainer
if [[ ! -x $trainer ]]; then
  echo "skipped: $trainer was not built (LibTorch not found at configure time, or a sanitizer build)"
  exit 77
fi
# Three Gaussian classes in 8 dimensions: a trained model does far better than chance (1/3).
"$STRIDER_BIN/strider-gen" --out "$work/train.h5" --kind features --samples 3000 --classes 3 --dim 8 --seed 2 \
  --no-progress >/dev/null
train() { mpirun_n 2 "$trainer" --data "$work/train.h5" --epochs 3 --batch-size 32 --seed 5 "$@" 2>&1; }

whole=$(train --checkpoint "$work/whole.ckpt")
echo "$whole"
expect_equal "three epochs of 3000 samples" "$(grep -c '^epoch [012]: .*(3000 samples)$' <<<"$whole")" 3
first_loss=$(awk '/^epoch 0:/ {print $4}' <<<"$whole")
last_loss=$(awk '/^epoch 2:/ {print $4}' <<<"$whole")
expect_at_most "the loss falls" "$last_loss" "$first_loss"
expect_at_least "accuracy after 3 epochs" "$(awk '/^epoch 2:/ {print $6}' <<<"$whole")" 0.8
digest=$(grep -o 'parameters [0-9a-f]* after [0-9]* steps' <<<"$whole")

stopped=$(train --checkpoint "$work/stopped.ckpt" --stop-after 60)  # mid-epoch 1 (47 steps per epoch)
expect_equal "stopped at step 60" "$(grep -c '^stopped after step 60$' <<<"$stopped")" 1
resumed=$(train --checkpoint "$work/stopped.ckpt" --resume)
echo "$resumed"
expect_equal "resumed mid-epoch" "$(grep -c '^resumed at epoch 1, step 60$' <<<"$resumed")" 1
expect_equal "resumed run ends with the uninterrupted run's parameters" \
  "$(grep -o 'parameters [0-9a-f]* after [0-9]* steps' <<<"$resumed")" "$digest"

expect_error "a checkpoint of another seed is refused" "seed|config" 60 \
  mpirun_n 2 "$trainer" --data "$work/train.h5" --epochs 3 --batch-size 32 --seed 6 --checkpoint "$work/stopped.ckpt" --resume
expect_error "a bad option" "unknown option '--bogus'" 60 mpirun_n 2 "$trainer" --data "$work/train.h5" --bogus 1
finish
