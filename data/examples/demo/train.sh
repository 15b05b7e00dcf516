#!/bin/sh
# A stand-in for one task of a training job, for `tidepool demo`: STEPS steps of STEP_SECONDS
# each, a checkpoint every CHECKPOINT_EVERY steps. It follows Tidepool's preemption protocol:
#   - on start, it resumes from $TIDEPOOL_RESUME_FROM (the job's last reported checkpoint) if set;
#   - on SIGUSR1 (the agent's preemption notice) it writes a checkpoint at once and reports it
#     with `tidepool checkpoint`, then waits for SIGTERM;
#   - on SIGTERM it exits promptly with status 143.
# Only rank 0 writes and reports checkpoints (every rank reads them back), as in real training.
# Checkpoints are small text files under $TIDEPOOL_CHECKPOINT_DIR, the job's folder on the shared
# checkpoint storage, so that the job can resume on another node.
#
# Environment: STEPS (default 30), CHECKPOINT_EVERY (default 10; 0: never), STEP_SECONDS
# (default 1), and what the agent sets (RANK, WORLD_SIZE, CUDA_VISIBLE_DEVICES, ...).

steps=${STEPS:-30}
every=${CHECKPOINT_EVERY:-10}
step_seconds=${STEP_SECONDS:-1}
rank=${RANK:-0}
world=${WORLD_SIZE:-1}
checkpoint_dir=${TIDEPOOL_CHECKPOINT_DIR:-$PWD/checkpoints}
step=0
notice=0

echo "job ${TIDEPOOL_JOB_ID:-?} task ${TIDEPOOL_TASK_INDEX:-0}: rank $rank of $world," \
  "GPUs ${CUDA_VISIBLE_DEVICES:-none}, master ${MASTER_ADDR:-?}:${MASTER_PORT:-?}"

if [ -n "${TIDEPOOL_RESUME_FROM:-}" ]; then
  if [ -r "$TIDEPOOL_RESUME_FROM" ]; then
    step=$(sed -n 's/^step=//p' "$TIDEPOOL_RESUME_FROM")
    echo "resuming from step ${step:=0} ($TIDEPOOL_RESUME_FROM)"
  else
    echo "warning: cannot read the checkpoint $TIDEPOOL_RESUME_FROM; starting from step 0"
  fi
fi

# Writes the checkpoint of the current step and reports it to Tidepool.
checkpoint() {
  mkdir -p "$checkpoint_dir" || return 1
  file="$checkpoint_dir/step-$step.ckpt"
  printf 'step=%s\n' "$step" >"$file.tmp" && mv "$file.tmp" "$file" || return 1
  if tidepool checkpoint --step "$step" --path "$file"; then
    echo "checkpoint at step $step: $file"
  else
    echo "warning: wrote $file but could not report it (tidepool checkpoint failed)"
  fi
}

trap 'notice=1' USR1
trap 'echo "SIGTERM at step $step: exiting"; exit 143' TERM

# `sleep & wait`: a trapped signal interrupts `wait` at once, where it would wait for a
# foreground sleep to end first. The sleep ignores SIGUSR1, which the agent sends to the whole
# process group, so that the shell has no killed child to report.
pause() {
  (trap '' USR1 && exec sleep "$1") &
  wait $!
}

while [ "$step" -lt "$steps" ]; do
  pause "$step_seconds"
  if [ "$notice" = 1 ]; then
    echo "preemption notice at step $step"
    if [ "$rank" = 0 ]; then checkpoint; fi
    echo "waiting to be stopped"
    while :; do pause 1; done
  fi
  step=$((step + 1))
  echo "step $step/$steps"
  if [ "$rank" = 0 ] && [ "$every" -gt 0 ] && [ $((step % every)) -eq 0 ] && [ "$step" -lt "$steps" ]; then
    checkpoint
  fi
done
echo "training done: $steps steps"
