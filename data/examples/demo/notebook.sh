#!/bin/sh
# A stand-in for an interactive notebook of `tidepool demo`: a session of SESSION_STEPS steps of
# STEP_SECONDS (defaults 40 and 1) in which its user runs a cell every 4 steps, then closes it.
# Exits with status 143 on SIGTERM.

session_steps=${SESSION_STEPS:-40}
step_seconds=${STEP_SECONDS:-1}

trap 'echo "SIGTERM: kernel shutting down"; exit 143' TERM
echo "notebook kernel ready on GPU ${CUDA_VISIBLE_DEVICES:-none} (job ${TIDEPOOL_JOB_ID:-?})"
step=0
while [ "$step" -lt "$session_steps" ]; do
  sleep "$step_seconds" &
  wait $!
  step=$((step + 1))
  if [ $((step % 4)) -eq 0 ]; then echo "In [$((step / 4))]: executed"; fi
done
echo "session closed"
