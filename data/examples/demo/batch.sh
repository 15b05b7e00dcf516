#!/bin/sh
# A stand-in for a batch job of `tidepool demo`: processes SHARDS shards of STEP_SECONDS each
# (defaults 10 and 1) and exits. It keeps no checkpoint: preempted, it starts over. Exits with
# status 143 on SIGTERM.

shards=${SHARDS:-10}
step_seconds=${STEP_SECONDS:-1}

trap 'echo "SIGTERM: exiting"; exit 143' TERM
echo "job ${TIDEPOOL_JOB_ID:-?}: $shards shards on GPU ${CUDA_VISIBLE_DEVICES:-none}"
shard=0
while [ "$shard" -lt "$shards" ]; do
  sleep "$step_seconds" &
  wait $!
  shard=$((shard + 1))
  echo "shard $shard/$shards done"
done
echo "batch done"
