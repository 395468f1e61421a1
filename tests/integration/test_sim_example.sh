#!/usr/bin/env bash
# The simulation-style example trainer (the template users copy) runs at 2 ranks and learns.
source "$(dirname "$0")/common.sh"
export STRIDER_LOG_LEVEL=warn
mpirun_n 2 "$STRIDER_BIN/strider-gen" --kind features --classes 4 --samples 2000 --dim 16 --seed 1 --out "$work/train.h5" \
  --no-progress >/dev/null
mpirun_n 2 "$STRIDER_BIN/strider-sim-example" --data "$work/train.h5" --steps 400 --train-every 4 >"$work/out"
expect_equal "exit status" "$?" 0
done_line=$(grep "^done:" "$work/out")
[[ $done_line == "done: 400 simulation steps, "* ]] && pass "$done_line" || fail "no final line: $(tail -3 "$work/out")"
expect_at_most "mean training loss" "$(sed 's/.*mean loss //' <<<"$done_line")" 0.5
expect_error "bad option" "train-every" 30 mpirun_n 2 "$STRIDER_BIN/strider-sim-example" --data "$work/train.h5" --train-every 0
finish
