#!/usr/bin/env bash
# The Slurm scripts without Slurm: each script's body runs with stand-ins (SRUN / MPIRUN swapped for a
# local mpirun, SCONTROL for a recorder), end to end on a small dataset, including a preemption
# (USR1 to the batch script, as --signal=B:USR1@120 sends it) and the requeued job's resume.
source "$(dirname "$0")/common.sh"
slurm=$STRIDER_SOURCE_DIR/slurm
export STRIDER_LOG_LEVEL=warn
mpirun_n 2 "$STRIDER_BIN/strider-gen" --kind features --class-counts 3000,200,50 --dim 16 --noise 3 --seed 1 \
  --out "$work/train.h5" --no-progress >/dev/null

# A stand-in srun: drops srun's own flags and runs the command under a local mpirun with 2 ranks.
cat >"$work/fake-srun" <<FAKE
#!/usr/bin/env bash
[[ \$1 == --mpi=list ]] && { echo "MPI plugin types are: none pmi2"; exit 0; }
while [[ \$1 == --* ]]; do shift; done
exec "$STRIDER_MPIEXEC" --bind-to none -np 2 "\$@"
FAKE
cat >"$work/fake-scontrol" <<FAKE
#!/usr/bin/env bash
echo "\$*" >>"$work/scontrol.log"
FAKE
chmod +x "$work/fake-srun" "$work/fake-scontrol"

common_env=(DATA="$work/train.h5" SAMPLER=balanced BATCH_SIZE=16 EPOCHS=2 SEED=9 CHECKPOINT_EVERY=50
  CHECKPOINT_DIR="$work/checkpoints" STRIDER_BIN="$STRIDER_BIN" SCONTROL="$work/fake-scontrol" TMPDIR="$work/scratch"
  SRUN="$work/fake-srun" MPIRUN="$STRIDER_MPIEXEC -np 2")
mkdir -p "$work/scratch"
cd "$work" || exit 1

# Uninterrupted, through srun (the stand-in).
env "${common_env[@]}" SLURM_JOB_ID=100 LAUNCHER=srun EXTRA_ARGS="--trace-samples $work/full" \
  bash "$slurm/strider-train.sbatch" >"$work/full.out" 2>&1
expect_equal "srun: job finished" "$?" 0
grep -q "per-class recall" "$work/full.out" && pass "srun: training output in the job log" || fail "srun: no training output"
[[ -f $work/checkpoints/strider-100.ckpt ]] && pass "checkpoint keyed by job id" || fail "no checkpoint strider-100.ckpt"
[[ -z $(ls -A "$work/scratch") ]] && pass "node-local scratch cleaned up" || fail "scratch left behind: $(ls "$work/scratch")"

for launcher in mpirun srun; do
  job=$([[ $launcher == mpirun ]] && echo 200 || echo 300)
  rm -f "$work/scontrol.log"
  # The job, preempted: USR1 reaches the batch script, which forwards it; strider-train exits 75.
  env "${common_env[@]}" SLURM_JOB_ID=$job LAUNCHER=$launcher EXTRA_ARGS="--trace-samples $work/cut$job" \
    STRIDER_TEST_STEP_DELAY_US=3000 bash "$slurm/strider-train.sbatch" >"$work/cut$job.out" 2>&1 &
  script=$!
  for _ in $(seq 1 300); do
    [[ -f $work/cut$job.rank0 ]] && (($(wc -l <"$work/cut$job.rank0") >= 60)) && break
    sleep 0.1
  done
  kill -USR1 $script
  wait $script
  expect_equal "$launcher: preempted job's script exits 0 after requeueing" "$?" 0
  expect_equal "$launcher: scontrol requeue called" "$(cat "$work/scontrol.log" 2>/dev/null)" "requeue $job"
  # The requeued job: same job id, next restart count; resumes from the checkpoint by itself.
  env "${common_env[@]}" SLURM_JOB_ID=$job SLURM_RESTART_COUNT=1 LAUNCHER=$launcher EXTRA_ARGS="--trace-samples $work/cut$job" \
    bash "$slurm/strider-train.sbatch" >>"$work/cut$job.out" 2>&1
  expect_equal "$launcher: requeued job finished" "$?" 0
  grep -q "checkpointed at .*; requeueing job $job" "$work/cut$job.out" && pass "$launcher: the script saw exit 75" ||
    fail "$launcher: no requeue message in the job log"
  if cmp -s "$work/full.rank0" "$work/cut${job}.rank0" && cmp -s "$work/full.rank1" "$work/cut${job}.rank1"; then
    pass "$launcher: preempted + requeued job trained exactly the uninterrupted samples"
  else
    fail "$launcher: the requeued job's trace differs from the uninterrupted one"
  fi
done

# The multi-node script runs the same body (one node here).
env "${common_env[@]}" SLURM_JOB_ID=400 LAUNCHER=mpirun STRIDER_SLURM_DIR="$slurm" EPOCHS=1 \
  bash "$slurm/strider-train-multinode.sbatch" >"$work/multi.out" 2>&1
expect_equal "multi-node script: job finished" "$?" 0
# A bad launcher is refused with one line.
expect_error "unknown launcher" "LAUNCHER" 30 env "${common_env[@]}" SLURM_JOB_ID=500 LAUNCHER=qsub bash "$slurm/strider-train.sbatch"
finish
