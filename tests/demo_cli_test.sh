#!/usr/bin/env bash
# Checks of `tidepool demo`: the plan it prints with --dry-run, its input errors, and whole runs
# with the real tidepool-server and tidepool-agent (beside tidepool) on the shipped demo folder
# (data/examples/demo): to the end of the workload, and stopped by SIGINT. Each run's folder is
# made under a scratch TMPDIR, so that the test can check that no process of the demo (server,
# agents, jobs) is left afterwards: none may have the scratch folder in its command line or
# environment (the demo marks the jobs with DEMO_RUN_DIR=<run folder>).
#
# Usage: demo_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: dry-run, bad-input, end-to-end, interrupt.
# end-to-end and interrupt need tidepool-agent beside tidepool: without it they fail, saying so.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup demo "$@"

demo_pid=""
cleanup() {
  if [[ -n $demo_pid ]] && kill -0 "$demo_pid" 2>/dev/null; then
    kill -TERM "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
# As root the agents run the jobs as uids of their own, which pass through to their folders (as
# they do through /tmp): traversable, not listable.
chmod 0711 "$work" "$TMPDIR"
export TIDEPOOL_SOURCE_DIR="$source_dir"
unset TIDEPOOL_CONFIG TIDEPOOL_SERVER TIDEPOOL_TOKEN TIDEPOOL_CA_CERT

# expect_out FILE PATTERN...: every pattern (fixed strings) is in FILE.
expect_out() {
  local file=$1
  shift
  local pattern
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$file" || fail "the output does not mention '$pattern'"
  done
}

# expect_line FILE REGEX: some line of FILE matches the extended regular expression.
expect_line() {
  grep -qE -- "$2" "$1" || fail "no line of the output matches '$2'"
}

# need_agent: fails unless tidepool-agent and tidepool-server sit beside tidepool.
need_agent() {
  local dir program
  dir=$(dirname "$tidepool")
  for program in tidepool-agent tidepool-server; do
    [[ -x $dir/$program ]] ||
      fail "$program is not built: $dir/$program is missing; the demo runs it (build the" \
        "$program target)"
  done
}

# no_demo_processes: no process has the scratch TMPDIR in its command line or environment.
no_demo_processes() {
  local left="" file pid
  for file in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
    pid=${file#/proc/}
    pid=${pid%%/*}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if tr '\0' '\n' 2>/dev/null <"$file" | grep -qF -- "$TMPDIR/tidepool-demo."; then
      left+=" $pid($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
    fi
  done
  [[ -z $left ]] || fail "processes of the demo are left:$left"
}

# run_folders: the run folders left under the scratch TMPDIR.
run_folders() {
  find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'tidepool-demo.*' | sort
}

case "$case_name" in
  dry-run)
    "$tidepool" demo --dry-run >"$work/out" 2>"$work/err" ||
      fail "tidepool demo --dry-run failed: $(cat "$work/err")"
    cat "$work/out"
    expect_out "$work/out" "$TMPDIR/tidepool-demo.XXXXXX" \
      "--- $TMPDIR/tidepool-demo.XXXXXX/cluster.yaml" \
      "- name: leaf-1" "- name: leaf-2" \
      "{name: node-1, gpu_model: H100, gpus: 8" "{name: node-4, gpu_model: H100, gpus: 8" \
      "H100: {guaranteed_gpus: 16}" "H100: {guaranteed_gpus: 12}" "H100: {guaranteed_gpus: 4}" \
      "listen: 127.0.0.1:0" "heartbeat_timeout: 5s" "tick: 1s" \
      "tidepool-server server --config $TMPDIR/tidepool-demo.XXXXXX/server.yaml" \
      "--port-file $TMPDIR/tidepool-demo.XXXXXX/server.port" \
      "--checkpoint-root $TMPDIR/tidepool-demo.XXXXXX/checkpoints" \
      "--state-dir $TMPDIR/tidepool-demo.XXXXXX/agents/node-3" \
      "--node node-3 --leaf leaf-2 --spine spine-1 --gpus fake:8xH100" \
      "--heartbeat-interval 1s" "--stop-tasks-on-exit" \
      "Workload from $source_dir/data/examples/demo/workload.txt" \
      "DEMO_RUN_DIR=$TMPDIR/tidepool-demo.XXXXXX" \
      "sh $source_dir/data/examples/demo/train.sh"
    # One agent per node, the same checkpoint root for all.
    [[ $(grep -c -- "tidepool-agent agent --server" "$work/out") -eq 4 ]] ||
      fail "expected 4 agent commands"
    [[ $(grep -c -- "--checkpoint-root $TMPDIR/tidepool-demo.XXXXXX/checkpoints " "$work/out") -eq 4 ]] ||
      fail "the agents do not share one checkpoint root"
    expect_line "$work/out" '^  0s +train-gang +vision +training +2x4 +yes '
    expect_line "$work/out" '^  20s +finetune +ads +training +8 +no '
    # ${DEMO_DIR} and ${DEMO_STEP_SECONDS} are substituted.
    # shellcheck disable=SC2016  # a literal ${DEMO
    if grep -qF -- '${DEMO' "$work/out"; then fail "a placeholder is left in the plan"; fi
    [[ -z $(run_folders) ]] || fail "--dry-run made a run folder: $(run_folders)"

    # --nodes, --gpus and --speed change the plan; nodes split over the two leaves.
    "$tidepool" demo --dry-run --nodes 3 --gpus fake:16xA100 --speed 2 >"$work/out" \
      2>"$work/err" || fail "tidepool demo --dry-run --nodes 3 failed: $(cat "$work/err")"
    expect_out "$work/out" "--node node-2 --leaf leaf-1" "--node node-3 --leaf leaf-2" \
      "{name: node-3, gpu_model: A100, gpus: 16" "A100: {guaranteed_gpus: 24}" \
      "--gpus fake:16xA100"
    if grep -qF -- "--node node-4" "$work/out"; then fail "--nodes 3 planned a fourth agent"; fi
    expect_line "$work/out" '^  10s +finetune '

    # --jobs: a folder of its own, without workload.txt: every spec at once, in name order.
    mkdir -p "$work/jobs"
    cat >"$work/jobs/b.yaml" <<'EOF'
name: second
tenant: ads
command: [sh, "${DEMO_DIR}/run.sh", "${DEMO_STEP_SECONDS}"]
EOF
    cat >"$work/jobs/a.yaml" <<'EOF'
name: first
tenant: vision
gpus_per_task: 2
EOF
    "$tidepool" demo --dry-run --jobs "$work/jobs" --speed 4 >"$work/out" 2>"$work/err" ||
      fail "tidepool demo --dry-run --jobs failed: $(cat "$work/err")"
    expect_out "$work/out" "Workload from $work/jobs (every spec file)" \
      "sh $work/jobs/run.sh 0.25"
    expect_line "$work/out" '^  0s +first +vision +training +2 '
    first=$(grep -nE '^  0s +first ' "$work/out" | cut -d: -f1)
    second=$(grep -nE '^  0s +second ' "$work/out" | cut -d: -f1)
    [[ -n $first && -n $second && $first -lt $second ]] || fail "the specs are not in name order"
    ;;

  bad-input)
    expect_error "--gpus" "is not fake GPUs" -- demo --dry-run --gpus nvml
    expect_error "--gpus" "fake:COUNTxMODEL" -- demo --dry-run --gpus fake:0xH100
    expect_error "--nodes" "outside 1..64" -- demo --dry-run --nodes 0
    expect_error "--speed" "from 0.1 to 20" -- demo --dry-run --speed 0
    expect_error "--refresh" "200ms to 1h" -- demo --dry-run --refresh 10ms
    expect_error "--duration" "from 1s to 24h" -- demo --dry-run --duration soon
    expect_error "--jobs" "is not a folder" -- demo --dry-run --jobs "$work/missing"
    # A job that fits on no node of the pool is refused before anything starts.
    expect_error "train-gang.yaml" "needs 4 GPUs per task, more than a node has" \
      -- demo --dry-run --gpus fake:2xH100
    mkdir -p "$work/empty" "$work/badload" "$work/badspec"
    expect_error "$work/empty" "no job to submit" -- demo --dry-run --jobs "$work/empty"
    printf '0s a.yaml\nlater b.yaml\n' >"$work/badload/workload.txt"
    expect_error "$work/badload/workload.txt:2" "AT:" -- demo --dry-run --jobs "$work/badload"
    printf 'name: x\ntenant: vision\ntasks: 0\n' >"$work/badspec/x.yaml"
    expect_error "$work/badspec/x.yaml: tasks" "out of range" \
      -- demo --dry-run --jobs "$work/badspec"
    [[ -z $(run_folders) ]] || fail "a refused demo made a run folder: $(run_folders)"
    ;;

  end-to-end)
    need_agent
    status=0
    # Three times as fast: every time of the demo's plan is scaled, the same events happen.
    "$tidepool" demo --duration 120s --refresh 5s --speed 3 >"$work/out" 2>"$work/err" || status=$?
    cat "$work/out"
    cat "$work/err" >&2
    [[ $status -eq 0 ]] || fail "tidepool demo exited with status $status"
    expect_out "$work/out" "Tidepool demo: a control plane and 4 node agents" \
      "export TIDEPOOL_SERVER=http://127.0.0.1:" "In a browser: http://127.0.0.1:" \
      "Summary after" "(every job ended)" \
      "agents: node-1 stopped, node-2 stopped, node-3 stopped, node-4 stopped" \
      "server: stopped" "run folder removed: $TMPDIR/tidepool-demo."
    expect_line "$work/out" '^  jobs: 9 submitted: 9 succeeded, 0 failed, 0 cancelled, 0 unfinished$'
    expect_line "$work/out" '^  preemptions: [1-9]'
    expect_line "$work/out" '^    #[0-9]+ [a-z-]+ \(vision\): preempted \(reclaim\) for job [0-9]+ of tenant [a-z]+$'
    expect_line "$work/out" '^  checkpoints: [1-9][0-9]* reported$'
    expect_line "$work/out" '^  resumed from a checkpoint: [1-9]'
    expect_line "$work/out" ' resumed on node-[1-4] from its checkpoint at step [1-9]'
    # The view: bars of the nodes and the events.
    expect_line "$work/out" '^  node-1 \[[#.]{8}\] [0-8]/8'
    expect_line "$work/out" ' started on node-[1-4], within its quota$'
    expect_line "$work/out" ' succeeded$'
    no_demo_processes
    [[ -z $(run_folders) ]] || fail "the run folder is left: $(run_folders)"
    ;;

  interrupt)
    need_agent
    "$tidepool" demo --keep --refresh 1s >"$work/out" 2>"$work/err" &
    demo_pid=$!
    # Interrupt once the jobs run (a frame shows a running job).
    for _ in $(seq 1 600); do
      grep -qE '^--- .* running [1-9]' "$work/out" && break
      kill -0 "$demo_pid" 2>/dev/null || fail "the demo ended early: $(cat "$work/err")"
      sleep 0.1
    done
    grep -qE '^--- .* running [1-9]' "$work/out" || fail "no job ran within 60 s"
    sleep 3  # the agents have started the jobs' processes
    started=$(date +%s)
    kill -INT "$demo_pid"
    status=0
    wait "$demo_pid" || status=$?
    demo_pid=""
    took=$(($(date +%s) - started))
    cat "$work/out"
    cat "$work/err" >&2
    [[ $status -eq 130 ]] || fail "an interrupted demo exits with 130, not $status"
    [[ $took -le 25 ]] || fail "stopping took $took s"
    expect_out "$work/out" "Stopping the agents" "server: stopped" "(interrupted)" \
      "run folder kept: $TMPDIR/tidepool-demo."
    expect_line "$work/out" '^  agents: node-1 stopped, node-2 stopped, node-3 stopped, node-4 stopped$'
    no_demo_processes
    folder=$(run_folders)
    [[ -n $folder && -f $folder/server.log && -f $folder/tidepool.db && -d $folder/checkpoints ]] ||
      fail "--keep did not keep the run folder with its files"
    grep -qF "signal 15: shutting down" "$folder/server.log" ||
      fail "the server was not stopped with SIGTERM"
    ;;

  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "PASS: $case_name"
