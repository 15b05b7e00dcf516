#!/usr/bin/env bash
# End-to-end checks of the tasks' logs and of checkpoint reports against a real `tidepool server`
# on 127.0.0.1: a node's agent ships a task's output with curl (POST /v1/jobs/{id}/logs, as the
# agents do), users read it with `tidepool logs` (and GET /v1/jobs/{id}/logs), and a job reports
# checkpoints with `tidepool checkpoint`, to the server or to the agent's report file.
#
# Usage: logs_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: post, logs, follow, checkpoint, folder.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup logs "$@"
examples="$source_dir/data/examples"

server_pid=""
follower_pid=""
cleanup() {
  local pid
  for pid in "$follower_pid" "$server_pid"; do
    if [[ -n $pid ]]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

# No config file of the user running the tests: only what each case sets.
export XDG_CONFIG_HOME="$work/xdg"
unset TIDEPOOL_CONFIG TIDEPOOL_SERVER TIDEPOOL_TOKEN TIDEPOOL_CA_CERT TIDEPOOL_JOB_ID \
  TIDEPOOL_CHECKPOINT_REPORT

# json FILE EXPRESSION: evaluates a Python expression on the JSON in FILE (bound to `d`).
json() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$1" "$2"
}

# running_job: submits the notebook example (vision, 1 task), waits until it runs, and sets $job,
# $node (where it runs) and $agent_token (an agent token of that node).
running_job() {
  job=$(submit "$examples/notebook.yaml")
  wait_state "$job" running
  tp job "$job" -o json >/dev/null
  node=$(json "$work/out" 'd["placement"][0]["node"]')
  tp token create --role agent --node "$node" -o json >/dev/null
  agent_token=$(json "$work/out" 'd["secret"]')
}

# post_log ID TASK OFFSET FILE [TOKEN]: POSTs FILE's bytes as the log of task TASK of the job's
# run $LOG_RUN (default 1) from OFFSET (the agent's token by default); prints the HTTP status, the
# reply body is in $work/reply.
post_log() {
  curl -sS -o "$work/reply" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer ${5:-$agent_token}" -H 'Content-Type: application/octet-stream' \
    --data-binary "@$4" "$TIDEPOOL_SERVER/v1/jobs/$1/logs?task=$2&run=${LOG_RUN:-1}&offset=$3"
}

# expect_post STATUS ID TASK OFFSET FILE [TOKEN]: post_log, expecting STATUS.
expect_post() {
  local want=$1 status
  shift
  status=$(post_log "$@")
  [[ $status == "$want" ]] ||
    fail "POST logs of job $1 task $2 at offset $3: HTTP $status, expected $want: $(cat "$work/reply")"
}

# get_log QUERY [TOKEN]: GETs the log with QUERY (e.g. task=0&offset=2); prints the HTTP status,
# the body is in $work/log, the headers in $work/headers.
get_log() {
  curl -sS -o "$work/log" -D "$work/headers" -w '%{http_code}' \
    -H "Authorization: Bearer ${2:-$TIDEPOOL_TOKEN}" "$TIDEPOOL_SERVER/v1/jobs/$job/logs?$1"
}

# size_of FILE: its size in bytes.
size_of() { wc -c <"$1" | tr -d ' '; }

case "$case_name" in
  post)
    start_server
    running_job
    # Output with bytes that are not text: kept as they are.
    printf 'epoch 1 loss 0.93\n\x00\xff\x1b[31mred\x1b[0m\r\n' >"$work/a"
    printf 'epoch 2 loss 0.71\n' >"$work/b"
    cat "$work/a" "$work/b" >"$work/expected"
    size_a=$(size_of "$work/a")
    total=$(size_of "$work/expected")
    expect_post 200 "$job" 0 0 "$work/a"
    [[ $(json "$work/reply" 'd["size"]') == "$size_a" ]] || fail "size after the first chunk"
    [[ $(json "$work/reply" '(d["job"], d["task"])') == "($job, 0)" ]] || fail "job and task"
    # A resend (the reply was lost) is stored once.
    expect_post 200 "$job" 0 0 "$work/a"
    [[ $(json "$work/reply" 'd["size"]') == "$size_a" ]] || fail "a resend should not grow the log"
    # A chunk that overlaps the stored end: only its new part is appended.
    { tail -c 5 "$work/a"; cat "$work/b"; } >"$work/overlap"
    expect_post 200 "$job" 0 $((size_a - 5)) "$work/overlap"
    [[ $(json "$work/reply" 'd["size"]') == "$total" ]] || fail "size after the overlap"
    cmp "$work/tidepool.db.logs/$job/task-0.run-1.log" "$work/expected" ||
      fail "the log file should hold the bytes once, in order"
    # A gap: 409, with the size to send from.
    expect_post 409 "$job" 0 $((total + 7)) "$work/b"
    [[ $(json "$work/reply" 'd["field"]') == offset ]] || fail "the gap's field"
    [[ $(json "$work/reply" 'd["reason"]') == "the log of run 1 of task 0 has $total bytes; send from there" ]] ||
      fail "the gap's reason: $(cat "$work/reply")"
    [[ $(json "$work/reply" 'd["size"]') == "$total" ]] || fail "the gap's size"
    cmp "$work/tidepool.db.logs/$job/task-0.run-1.log" "$work/expected" || fail "a gap stores nothing"
    # Bad tasks and offsets.
    expect_post 400 "$job" 1 0 "$work/b"
    [[ $(json "$work/reply" 'd["reason"]') == "job $job has 1 task, task 0" ]] ||
      fail "task 1 of a 1-task job: $(cat "$work/reply")"
    expect_post 400 "$job" -1 0 "$work/b"
    [[ $(json "$work/reply" 'd["field"]') == task ]] || fail "task -1"
    expect_post 400 "$job" x 0 "$work/b"
    [[ $(json "$work/reply" 'd["field"]') == task ]] || fail "task x"
    expect_post 400 "$job" 0 -3 "$work/b"
    [[ $(json "$work/reply" 'd["field"]') == offset ]] || fail "offset -3"
    status=$(curl -sS -o "$work/reply" -w '%{http_code}' -X POST --data-binary "@$work/b" \
      -H "Authorization: Bearer $agent_token" "$TIDEPOOL_SERVER/v1/jobs/$job/logs?task=0")
    [[ $status == 400 && $(json "$work/reply" 'd["field"]') == offset ]] ||
      fail "a POST without an offset: HTTP $status $(cat "$work/reply")"
    status=$(curl -sS -o "$work/reply" -w '%{http_code}' -X POST -F "log=@$work/b" \
      -H "Authorization: Bearer $agent_token" "$TIDEPOOL_SERVER/v1/jobs/$job/logs?offset=$total")
    [[ $status == 415 ]] || fail "a multipart body: HTTP $status $(cat "$work/reply")"
    # Who may write: the agent of the job's node and admins; not users, not other nodes' agents.
    tp token create --role user --tenant vision -o json >/dev/null
    vision_token=$(json "$work/out" 'd["secret"]')
    expect_post 403 "$job" 0 "$total" "$work/b" "$vision_token"
    other=h100-a-01
    [[ $node == "$other" ]] && other=a100-b-03
    tp token create --role agent --node "$other" -o json >/dev/null
    expect_post 404 "$job" 0 "$total" "$work/b" "$(json "$work/out" 'd["secret"]')"
    expect_post 401 "$job" 0 "$total" "$work/b" tp_wrong
    expect_post 404 999 0 0 "$work/b"
    cmp "$work/tidepool.db.logs/$job/task-0.run-1.log" "$work/expected" || fail "refused posts store nothing"
    # GET: the bytes as text/plain with the log's size; ranges.
    [[ $(get_log "task=0") == 200 ]] || fail "GET the log: $(cat "$work/log")"
    cmp "$work/log" "$work/expected" || fail "GET should give the bytes as they are"
    grep -qi '^Content-Type: text/plain; charset=utf-8' "$work/headers" || fail "Content-Type"
    grep -qi "^X-Tidepool-Log-Size: $total"$'\r'"\$" "$work/headers" || fail "X-Tidepool-Log-Size"
    grep -qi "^X-Tidepool-Log-Runs: 1:$total"$'\r'"\$" "$work/headers" || fail "X-Tidepool-Log-Runs"
    [[ $(get_log "task=0&run=1") == 200 ]] && cmp -s "$work/log" "$work/expected" ||
      fail "GET run 1: $(cat "$work/log")"
    [[ $(get_log "task=0&run=2") == 200 && ! -s $work/log ]] || fail "run 2 has no log yet"
    [[ $(get_log "task=0&run=-1") == 400 ]] || fail "GET run -1"
    [[ $(get_log "offset=6&limit=4" "$vision_token") == 200 ]] || fail "a user of the tenant reads"
    [[ $(cat "$work/log") == "1 lo" ]] || fail "offset 6 limit 4: '$(cat "$work/log")'"
    [[ $(get_log "offset=$total") == 200 && ! -s $work/log ]] || fail "reading at the end: nothing"
    [[ $(get_log "limit=8388609") == 400 ]] || fail "limit over 8 MiB"
    [[ $(get_log "task=2") == 400 ]] || fail "GET task 2 of a 1-task job"
    ;;

  logs)
    start_server "logs: $work/task-logs"
    running_job
    # Nothing shipped yet: nothing printed.
    tp logs "$job"
    [[ ! -s $work/out ]] || fail "a log not shipped yet should print nothing"
    # 1.5 MiB in two chunks (a POST carries at most 1 MiB; a GET at most 1 MiB by default).
    python3 -c '
import sys
line = b"".join(b"step %06d loss 0.%04d \xe2\x9c\x93\n" % (i, i % 9973) for i in range(60000))
sys.stdout.buffer.write(line[: 3 << 19])' >"$work/expected"
    head -c 786432 "$work/expected" >"$work/first"
    tail -c +786433 "$work/expected" >"$work/second"
    expect_post 200 "$job" 0 0 "$work/first"
    expect_post 200 "$job" 0 786432 "$work/second"
    [[ -f $work/task-logs/$job/task-0.run-1.log ]] || fail "the logs should go to the configured folder"
    [[ ! -e $work/tidepool.db.logs ]] || fail "the default folder should not be used"
    "$tidepool" logs "$job" >"$work/printed" || fail "tidepool logs $job failed"
    cmp "$work/printed" "$work/expected" || fail "tidepool logs should print exactly the bytes"
    "$tidepool" logs "$job" --task 0 --tail 100 >"$work/printed"
    tail -c 100 "$work/expected" | cmp - "$work/printed" || fail "--tail 100: the last 100 bytes"
    "$tidepool" logs "$job" --tail 5000000 >"$work/printed"
    cmp "$work/printed" "$work/expected" || fail "--tail past the start: the whole log"
    # A user of the job's tenant reads it; another tenant's user does not even see the job.
    tp token create --role user --tenant vision -o json >/dev/null
    TIDEPOOL_TOKEN=$(json "$work/out" 'd["secret"]') "$tidepool" logs "$job" >"$work/printed"
    cmp "$work/printed" "$work/expected" || fail "a vision user should read the log"
    tp token create --role user --tenant search -o json >/dev/null
    search_token=$(json "$work/out" 'd["secret"]')
    expect_error "error: id: no job $job" -- logs "$job" --token "$search_token"
    expect_error "error: task: job $job has 1 task, task 0" -- logs "$job" --task 1
    expect_error "error: id: no job 999" -- logs 999
    expect_error "--task" -- logs "$job" --task -1
    expect_error "cannot reach the Tidepool server" -- logs "$job" --server http://127.0.0.1:1
    tp logs --help
    grep -qF -- "--follow" "$work/out" || fail "logs --help should show --follow"
    grep -qF "tidepool logs 42 --task 3 --follow" "$work/out" || fail "logs --help: examples"
    ;;

  follow)
    start_server
    running_job
    printf 'first line\n' >"$work/a"
    printf 'second line\n' >"$work/b"
    cat "$work/a" "$work/b" >"$work/expected"
    "$tidepool" logs "$job" --follow >"$work/followed" 2>"$work/follow-err" &
    follower_pid=$!
    sleep 1
    expect_post 200 "$job" 0 0 "$work/a"
    for _ in $(seq 1 50); do
      [[ $(size_of "$work/followed") == "$(size_of "$work/a")" ]] && break
      sleep 0.1
    done
    cmp "$work/followed" "$work/a" || fail "--follow should print the first chunk as it comes"
    kill -0 "$follower_pid" 2>/dev/null || fail "--follow should keep running while the job runs"
    expect_post 200 "$job" 0 "$(size_of "$work/a")" "$work/b"
    # The job resumes in run 2 (here written by an admin): its log follows run 1's.
    printf 'resumed line\n' >"$work/c"
    cat "$work/c" >>"$work/expected"
    LOG_RUN=2 expect_post 200 "$job" 0 0 "$work/c" "$TIDEPOOL_TOKEN"
    for _ in $(seq 1 50); do
      [[ $(size_of "$work/followed") == "$(size_of "$work/expected")" ]] && break
      sleep 0.1
    done
    cmp "$work/followed" "$work/expected" || fail "--follow should go on to the next run"
    kill -0 "$follower_pid" 2>/dev/null || fail "--follow should keep running while the job runs"
    # A follower whose reader has gone (| head) ends at its next write, as tail -f does.
    { timeout 30 "$tidepool" logs "$job" --follow; echo "$?" >"$work/piped-status"; } |
      head -n 1 >"$work/head" &
    piped=$!
    for _ in $(seq 1 100); do
      [[ -s $work/head ]] && break
      sleep 0.1
    done
    printf 'more line\n' >"$work/d"
    cat "$work/d" >>"$work/expected"
    LOG_RUN=2 expect_post 200 "$job" 0 "$(size_of "$work/c")" "$work/d" "$TIDEPOOL_TOKEN"
    wait "$piped"
    [[ $(cat "$work/piped-status") == 0 ]] ||
      fail "--follow into a closed pipe should end (status $(cat "$work/piped-status"), 124: timed out)"
    for _ in $(seq 1 50); do
      [[ $(size_of "$work/followed") == "$(size_of "$work/expected")" ]] && break
      sleep 0.1
    done
    tp cancel "$job"
    status=""
    for _ in $(seq 1 100); do
      if ! kill -0 "$follower_pid" 2>/dev/null; then
        status=0
        wait "$follower_pid" || status=$?
        break
      fi
      sleep 0.1
    done
    follower_pid=""
    [[ -n $status ]] || fail "--follow should end once the job ended"
    [[ $status == 0 ]] || fail "--follow exited with $status: $(cat "$work/follow-err")"
    cmp "$work/followed" "$work/expected" || fail "--follow should print every byte once"
    # An ended job's log: printed at once, --follow or not.
    timeout 10 "$tidepool" logs "$job" --follow >"$work/printed" || fail "--follow of an ended job"
    cmp "$work/printed" "$work/expected" || fail "--follow of an ended job: its whole log"
    "$tidepool" logs "$job" --run 2 >"$work/printed" || fail "logs --run 2"
    cat "$work/c" "$work/d" | cmp "$work/printed" - || fail "logs --run 2: that run's log alone"
    "$tidepool" logs "$job" --tail 5 >"$work/printed" || fail "logs --tail 5"
    [[ $(cat "$work/printed") == "line" ]] || fail "logs --tail 5 across runs: '$(cat "$work/printed")'"
    ;;

  checkpoint)
    start_server
    running_job
    tp checkpoint --job "$job" --step 5 --path /x
    [[ $(cat "$work/out") == "Recorded a checkpoint of job $job, step 5, /x" ]] ||
      fail "checkpoint should confirm in one line"
    tp job "$job" -o json >/dev/null
    [[ $(json "$work/out" 'd["checkpoint_step"]') == 5 ]] || fail "checkpoint_step should be 5"
    # The job id from the task's environment.
    TIDEPOOL_JOB_ID=$job tp checkpoint --step 6 --note "epoch 3"
    tp job "$job" -o json >/dev/null
    [[ $(json "$work/out" 'd["checkpoint_step"]') == 6 ]] || fail "checkpoint_step should be 6"
    expect_error "error: --job: which job?" -- checkpoint --step 1
    expect_error "error: --job: 'abc' is not a job id" -- checkpoint --job abc
    TIDEPOOL_JOB_ID=0 expect_error "error: TIDEPOOL_JOB_ID: '0' is not a job id" -- checkpoint
    expect_error "--step" -- checkpoint --job "$job" --step -1
    expect_error "error: --note:" -- checkpoint --job "$job" --note "$(head -c 5000 /dev/zero | tr '\0' n)"
    expect_error "error: id: no job 999" -- checkpoint --job 999 --step 1
    tp token create --role user --tenant search -o json >/dev/null
    expect_error "error: id: no job $job" -- \
      checkpoint --job "$job" --step 1 --token "$(json "$work/out" 'd["secret"]')"
    # Inside a task: one JSON line appended to the agent's report file, nothing printed, nothing
    # sent (the server given cannot be reached).
    report=$work/task/checkpoints.jsonl
    mkdir -p "$work/task"
    before=$(python3 -c 'import time; print(int(time.time() * 1000))')
    TIDEPOOL_CHECKPOINT_REPORT=$report TIDEPOOL_JOB_ID=$job TIDEPOOL_SERVER=http://127.0.0.1:1 \
      tp checkpoint --step 7 --path /ckpt/7 --note "epoch 4"
    [[ ! -s $work/out && ! -s $work/err ]] || fail "the report file mode should print nothing"
    TIDEPOOL_CHECKPOINT_REPORT=$report TIDEPOOL_SERVER=http://127.0.0.1:1 \
      tp checkpoint --job "$job" --path /ckpt/8
    after=$(python3 -c 'import time; print(int(time.time() * 1000))')
    cat "$report"
    [[ $(wc -l <"$report") == 2 ]] || fail "two reports should be two lines"
    python3 - "$report" "$job" "$before" "$after" <<'EOF' || fail "the report lines are wrong"
import json, sys
path, job, before, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lines = open(path).read().splitlines()
first, second = (json.loads(line) for line in lines)
assert list(first) == ["job", "step", "path", "note", "at_ms"], first
assert (first["job"], first["step"], first["path"], first["note"]) == (job, 7, "/ckpt/7", "epoch 4")
assert list(second) == ["job", "path", "at_ms"], second
assert (second["job"], second["path"]) == (job, "/ckpt/8"), second
for line in (first, second):
    assert before <= line["at_ms"] <= after, line
EOF
    # Nothing of it reached the server.
    tp job "$job" -o json >/dev/null
    [[ $(json "$work/out" 'd["checkpoint_step"]') == 6 ]] || fail "the file mode should not post"
    TIDEPOOL_CHECKPOINT_REPORT=$work/missing/dir/file TIDEPOOL_JOB_ID=$job expect_error \
      "error: TIDEPOOL_CHECKPOINT_REPORT: cannot open '$work/missing/dir/file'" -- checkpoint --step 1
    tp checkpoint --help
    grep -qF -- "--step" "$work/out" || fail "checkpoint --help should show --step"
    grep -qF "TIDEPOOL_CHECKPOINT_REPORT" "$work/out" ||
      fail "checkpoint --help should explain the report file"
    ;;

  folder)
    # The default log folder is the database path + ".logs"; one that cannot be created stops
    # the server with a clear error.
    start_server
    [[ -d $work/tidepool.db.logs ]] || fail "the server should create $work/tidepool.db.logs"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    status=0
    "$tidepool" server --config "$work/server.yaml" --listen 127.0.0.1:0 \
      --database "$work/other.db" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do [[ -d $work/other.db.logs ]] && break; sleep 0.1; done
    [[ -d $work/other.db.logs ]] || fail "--database should move the default log folder too"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    echo "logs: $work/server.yaml/logs" >>"$work/server.yaml"
    timeout 30 "$tidepool" server --config "$work/server.yaml" --listen 127.0.0.1:0 \
      >"$work/server.log" 2>&1 || status=$?
    cat "$work/server.log"
    [[ $status == 1 ]] || fail "the server should exit 1 when the log folder cannot be created"
    grep -qF "error: logs: cannot create the folder of the task logs '$work/server.yaml/logs'" \
      "$work/server.log" || fail "the error should name the log folder"
    ;;

  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "ok: $case_name"
