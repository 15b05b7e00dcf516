#!/bin/bash
# Checks the node agent on a machine with NVIDIA GPUs: starts a server for this one node and
# `tidepool agent --gpus nvml`, prints what the agent discovered (GPUs, UUIDs, PCI bus ids, NUMA
# nodes, NVLink peers) and the metrics it read, then runs a job that uses one GPU (nvidia-smi) and
# prints its output. Everything runs in a temporary folder on 127.0.0.1 and is stopped at the end.
#
#   scripts/gpu-check.sh [BIN_DIR]     (default: build/release/bin, after scripts/test or a build)
set -euo pipefail

bin_dir=${1:-build/release/bin}
tidepool="$bin_dir/tidepool"
for program in tidepool tidepool-server tidepool-agent; do
  [[ -x "$bin_dir/$program" ]] || { echo "error: $bin_dir/$program is not built" >&2; exit 1; }
done
command -v nvidia-smi >/dev/null || { echo "error: nvidia-smi not found: is the NVIDIA driver installed?" >&2; exit 1; }

work=$(mktemp -d -t tidepool-gpu-check-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

gpus=$(nvidia-smi -L | grep -c '^GPU ')
echo "== nvidia-smi -L ($gpus GPU(s))"
nvidia-smi -L
cat > "$work/cluster.yaml" <<YAML
site: check
spines:
  - name: spine-1
    leaves:
      - name: leaf-1
        nodes:
          - {name: gpu-node, gpu_model: GPU, gpus: $gpus, cpus: $(nproc), memory_gib: 16}
YAML
cat > "$work/tenants.yaml" <<YAML
orgs:
  - name: org
    tenants:
      - name: check
        quota:
          GPU: {guaranteed_gpus: $gpus}
YAML
printf 'cluster: cluster.yaml\ntenants: tenants.yaml\ndatabase: tidepool.db\nlisten: 127.0.0.1:0\n' \
  > "$work/server.yaml"
"$tidepool" server --config "$work/server.yaml" --database "$work/tidepool.db" \
  --port-file "$work/port" > "$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
server="http://127.0.0.1:$(cat "$work/port")"
export TIDEPOOL_SERVER=$server TIDEPOOL_TOKEN
TIDEPOOL_TOKEN=$(cat "$work/tidepool.db.admin-token")
agent_token=$("$tidepool" token create --role agent --node gpu-node -o json |
  sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')

"$bin_dir/tidepool-agent" agent --server "$server" --token "$agent_token" --node gpu-node \
  --gpus nvml --state-dir "$work/agent" --heartbeat-interval 1s --sample-interval 1s \
  > "$work/agent.log" 2>&1 &
pids+=($!)
sleep 4
echo "== agent log"
cat "$work/agent.log"
echo "== what the agent registered"
"$tidepool" nodes -o json
echo "== GPU metrics the server exposes"
curl -s "$server/metrics" | grep '^tidepool_gpu_' || echo "(none yet)"

echo "== a job on one GPU: nvidia-smi"
# shellcheck disable=SC2016  # the job's shell expands it
job=$(printf '{"name": "gpu-check", "tenant": "check", "gpus_per_task": 1, "command": ["sh", "-c", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; nvidia-smi"]}' |
  "$tidepool" submit --parsable -)
for _ in $(seq 120); do
  state=$("$tidepool" job "$job" -o json | sed -n 's/^  "state": "\([a-z]*\)".*/\1/p')
  [[ "$state" == succeeded || "$state" == failed || "$state" == cancelled ]] && break
  sleep 0.5
done
echo "job $job: $state"
sleep 2
"$tidepool" logs "$job"
[[ "$state" == succeeded ]]
