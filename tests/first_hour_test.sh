#!/usr/bin/env bash
# The first hour of a new user, scripted: the README's server quick start (a server, agents with
# fake GPUs on two nodes, the example training job) with what each step must show:
#   - the nodes without an agent take no jobs and say why; the two with one are ready;
#   - the example job (4 x 8 GPUs under one leaf) waits with a reason while two nodes have agents,
#     and runs once the other two of the leaf get theirs;
#   - `tidepool logs -f` prints a running task's lines while it runs (about 1 s after it writes them);
#   - the job checkpoints (recorded by the server); requeued, it runs again and resumes from its
#     checkpoint, while `logs -f` goes on across both runs; cancelled, it stops; the server's log of
#     each run is the task's own output of that run, byte for byte;
#   - the same job of a tenant without a guarantee, on capacity another tenant is guaranteed, is
#     preempted when that tenant reclaims it, and resumes from its checkpoint once the other job is
#     cancelled; again each run's log is that run's output, byte for byte.
#
# Usage: first_hour_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE (CASE: quickstart)
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup first-hour "$@"
client_test_setup
agent_pids=() # and the test's other background processes
stop_all() {
  local pid
  for pid in "${agent_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${agent_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  stop_server
  rm -rf "$work"
}
trap stop_all EXIT
# The tasks run `tidepool checkpoint`: the binary under test on their PATH. As root the agents run
# tasks as uids of their own: the scratch folder must let them through to their checkpoints.
PATH="$(dirname "$tidepool"):$PATH"
export PATH
chmod 0711 "$work"

# start_agent NODE: an agent with fake GPUs for NODE, its token in a file (as the README does).
start_agent() {
  tp token create --role agent --node "$1" --secret-file "$work/$1.token" >/dev/null
  "$tidepool" agent --node "$1" --gpus fake:8xH100 --token-file "$work/$1.token" \
    --state-dir "$work/agents/$1" --checkpoint-root "$work/checkpoints" \
    --heartbeat-interval 500ms >"$work/agent-$1.log" 2>&1 &
  agent_pids+=("$!")
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds, or fails the test.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || fail "not within ${limit}s: $*"
    sleep 0.1
  done
}

node_state() {
  "$tidepool" nodes -o json >"$work/nodes.json"
  python3 -c 'import json,sys; print({n["name"]: n["state"] for n in json.load(open(sys.argv[1]))["nodes"]}[sys.argv[2]])' \
    "$work/nodes.json" "$1"
}
job_state() { "$tidepool" job "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

case "$case_name" in
  quickstart)
    AGENTS_ONLY=1 start_server
    tp nodes
    expect_out "not_ready" "no agent has registered the node"
    start_agent h100-a-01
    start_agent h100-a-02
    ready() { [[ $(node_state "$1") == ready ]]; }
    wait_for 10 ready h100-a-01
    wait_for 10 ready h100-a-02
    tp nodes
    [[ $(node_state h100-a-03) == not_ready ]] || fail "a node without an agent should not be ready"
    # The gang needs four nodes of one leaf: with two agents it waits, and says why.
    job=$("$tidepool" submit --parsable "$source_dir/data/examples/train-resnet.yaml")
    sleep 1.5
    [[ $(job_state "$job") == pending ]] || fail "the job should wait for nodes"
    tp why "$job"
    grep -qiE "leaf|node|GPUs" "$work/out" || fail "why should say what it waits for"
    start_agent h100-a-03
    start_agent h100-a-04
    running() { [[ $(job_state "$job") == running ]]; }
    wait_for 20 running
    # logs -f: each line is stamped when the task writes it (tail -F of the agent's local log)
    # and when `logs -f` prints it; the median latency of epochs 4 to 8 is within 2 s (the agent
    # ships output every second, logs -f polls every 250 ms). The median, so that one stall of a
    # loaded machine does not decide; every line must still arrive within 10 s.
    stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s%N)" "$line"; done; }
    "$tidepool" logs "$job" --task 0 --follow > >(stamp >"$work/followed") 2>&1 &
    follower=$!
    agent_pids+=("$follower")
    # The agent's own copy of a run's output: task-0.run-R.log (run 1 by default).
    local_log() { ls "$work"/agents/*/logs/"$job"/task-0.run-"${1:-1}".log 2>/dev/null | head -1; }
    has_log() { [[ -n $(local_log "$1") ]]; }
    wait_for 10 has_log 1
    tail -n +1 -F "$(local_log)" > >(stamp >"$work/written") 2>/dev/null &
    tailer=$!
    agent_pids+=("$tailer")
    wait_for 20 grep -q "epoch 8/" "$work/followed"
    python3 - "$work/written" "$work/followed" <<'PY' || fail "logs -f is too slow"
import re, statistics, sys
def stamps(path):
    out = {}
    for line in open(path):
        at, _, text = line.rstrip("\n").partition(" ")
        m = re.search(r"epoch (\d+)/", text)
        if m and int(m.group(1)) not in out:
            out[int(m.group(1))] = int(at)
    return out
written, followed = stamps(sys.argv[1]), stamps(sys.argv[2])
ms = [(followed[e] - written[e]) / 1e6 for e in range(4, 9)]
print("logs -f: latency of epochs 4-8 (ms):", " ".join(f"{m:.0f}" for m in ms),
      f"median {statistics.median(ms):.0f}")
sys.exit(0 if statistics.median(ms) <= 2000 and max(ms) <= 10000 else 1)
PY
    kill "$tailer" 2>/dev/null || true
    # A checkpoint every 15 epochs, recorded by the server.
    checkpointed() { "$tidepool" job "$job" -o json | grep -q '"checkpoint_step": 15'; }
    wait_for 30 checkpointed
    # Requeued, the job's run stops as a preemption stops it (the job leaves its nodes, and their
    # agents stop its tasks), it runs again on the same nodes and resumes from its checkpoint;
    # logs -f goes on from one run to the next.
    tp requeue "$job"
    expect_out "Requeued job $job"
    # wait_resumed: until $job runs a second time and has said where it resumed from, which must
    # be its checkpoint (step 15 or later); sets $resumed_at.
    second_run() { "$tidepool" job "$job" -o json | grep -q '"starts": 2' && [[ $(job_state "$job") == running ]]; }
    wait_resumed() {
      wait_for 30 second_run
      wait_for 20 has_log 2
      wait_for 20 grep -q "rank 0: resuming from step" "$(local_log 2)"
      resumed_at=$(sed -n 's/^rank 0: resuming from step \([0-9]*\)$/\1/p' "$(local_log 2)")
      [[ $resumed_at -ge 15 ]] || fail "job $job should resume from its checkpoint, not step '$resumed_at'"
    }
    wait_resumed
    wait_for 30 grep -q "epoch $((resumed_at + 3))/" "$(local_log 2)"
    tp cancel "$job"
    wait_for 10 bash -c "! kill -0 $follower 2>/dev/null"
    wait "$follower" || true
    # The server's log of each run is that run's own output, byte for byte; the whole log is the
    # two runs one after the other, and so is what logs -f printed.
    same_run() { "$tidepool" logs "$job" --task 0 --run "$1" >"$work/server-run-$1" && cmp -s "$work/server-run-$1" "$(local_log "$1")"; }
    wait_for 10 same_run 1
    wait_for 10 same_run 2
    cat "$(local_log 1)" "$(local_log 2)" >"$work/both-runs"
    "$tidepool" logs "$job" --task 0 >"$work/server-log"
    cmp -s "$work/server-log" "$work/both-runs" || fail "the job's log should be run 1 then run 2"
    cut -d' ' -f2- "$work/followed" >"$work/followed-text"
    cmp -s "$work/followed-text" "$work/both-runs" ||
      fail "logs -f should print both runs: $(diff "$work/followed-text" "$work/both-runs" | head -5)"
    grep -q "rank 0 of 4 on GPUs 0,1,2,3,4,5,6,7: epoch 15/90" "$work/server-log" ||
      fail "the log should hold the task's epochs"
    grep -q "checkpoint: step 15" "$work/server-log" || fail "the log should show the checkpoint"
    echo "requeued and resumed: run 1 $(wc -c <"$(local_log 1)") bytes, run 2 (resumed at step $resumed_at) $(wc -c <"$(local_log 2)") bytes, each the same on the server"
    # A preemption proper: the same training job of tenant interns (no guarantee) runs on H100s
    # that search is guaranteed and does not use; a job of search reclaims them, the interns job
    # is preempted, and once search's job is cancelled it resumes from its checkpoint. Each run's
    # log on the server is that run's output, byte for byte.
    as_tenant() { sed -e "s/^name: .*/name: $1-run/" -e "s/^tenant: .*/tenant: $1/" -e "s/^queue: .*/queue: $2/" \
      "$source_dir/data/examples/train-resnet.yaml" >"$work/$1.yaml"; }
    as_tenant interns default
    as_tenant search ranking
    job=$("$tidepool" submit --parsable "$work/interns.yaml")
    wait_for 30 running
    wait_for 30 checkpointed
    owner=$("$tidepool" submit --parsable "$work/search.yaml")
    preempted() { "$tidepool" job "$job" -o json | grep -q '"preemptions": 1'; }
    wait_for 30 preempted
    tp job "$job"
    expect_out "preempted (reclaim) for job $owner"
    owner_runs() { [[ $(job_state "$owner") == running ]]; }
    wait_for 30 owner_runs
    tp cancel "$owner"
    wait_resumed
    tp cancel "$job"
    wait_for 10 same_run 1
    wait_for 10 same_run 2
    echo "preempted (reclaim) and resumed: run 1 $(wc -c <"$(local_log 1)") bytes, run 2 (resumed at step $resumed_at) $(wc -c <"$(local_log 2)") bytes, each the same on the server"
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
