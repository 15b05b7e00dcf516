#!/usr/bin/env bash
# End-to-end checks of the user commands (tidepool submit, jobs, job, cancel, why, nodes, drain,
# undrain, queues, tenants, top, token, events) against a real `tidepool server` on 127.0.0.1,
# started in a scratch folder on the example cluster and tenants (data/clusters/example.yaml,
# data/tenants/example.yaml) with the example job specs of data/examples (tenant vision).
#
# Usage: client_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: submit, jobs, job, cancel, control (hold, release, requeue, update), why,
#   nodes, drain, queues, tenants, top, tokens, events, errors, config.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup client "$@"
examples="$source_dir/data/examples"

client_test_setup

start_server
case "$case_name" in
  submit)
    tp submit "$examples/notebook.yaml"
    grep -qE '^Submitted job [0-9]+$' "$work/out" || fail "expected 'Submitted job N'"
    id=$(submit "$examples/batch.json")
    [[ $id =~ ^[0-9]+$ ]] || fail "--parsable should print only the id, got '$id'"
    # - reads the spec from the standard input.
    "$tidepool" submit --parsable - <"$examples/inference.yaml" >"$work/out" ||
      fail "submit - failed"
    grep -qE '^[0-9]+$' "$work/out" || fail "submit - should print the id"
    # The same idempotency key gives the same job back, a new spec with it a conflict.
    tp submit --parsable --idempotency-key nightly-1 "$examples/notebook.yaml"
    first=$(cat "$work/out")
    # The server's log says where each job went, one line each.
    for _ in $(seq 1 50); do
      grep -q "job.started job $first (" "$work/server.log" && break
      sleep 0.1
    done
    grep -q "job.started job $first (notebook-alice, vision/default): placed on" \
      "$work/server.log" || fail "the server log should show the job's start: $(cat "$work/server.log")"
    grep -q "state loaded from the store" "$work/server.log" || fail "the server log says what it loaded"
    tp submit --idempotency-key nightly-1 "$examples/notebook.yaml"
    expect_out "Job $first was already submitted with idempotency key nightly-1"
    expect_error "error:" "Idempotency-Key: key already used for job $first" -- \
      submit --idempotency-key nightly-1 "$examples/batch.json"
    # Several files at once; -o json gives the jobs.
    tp submit -o json "$examples/notebook.yaml" "$examples/batch.json"
    [[ $(json 'len(d)') == 2 ]] || fail "-o json of two submissions should be a list of 2"
    [[ $(json 'd[1]["spec"]["name"]') == embed-images ]] || fail "wrong job in -o json"
    # The server's error with field and reason, naming the file.
    printf 'name: bad\ntenant: vision\ntasks: 0\n' >"$work/bad.yaml"
    expect_error "error: $work/bad.yaml: tasks:" "out of range" -- submit "$work/bad.yaml"
    printf 'name: bad\ntenant: nobody\n' >"$work/bad.yaml"
    expect_error "tenant: unknown tenant 'nobody'" -- submit "$work/bad.yaml"
    expect_error "error: $work/missing.yaml: cannot open the file" -- submit "$work/missing.yaml"
    expect_error "--idempotency-key" "single FILE" -- \
      submit --idempotency-key k "$examples/notebook.yaml" "$examples/batch.json"
    ;;

  jobs)
    running=$(submit "$examples/notebook.yaml")
    wait_state "$running" running
    ended=$(submit "$examples/notebook.yaml")
    tp cancel "$ended"
    tp jobs
    expect_out ID NAME TENANT QUEUE STATE GPUS AGE TIME NODES REASON notebook-alice running 0.5
    grep -qE "^ *$running +notebook-alice" "$work/out" || fail "job $running not listed"
    grep -qE "^ *$ended " "$work/out" && fail "the cancelled job $ended is not live"
    tp jobs --all
    grep -qE "^ *$ended .*cancelled" "$work/out" || fail "--all should list cancelled job $ended"
    tp jobs --state cancelled -o json
    [[ $(json '[j["id"] for j in d["jobs"]]') == "[$ended]" ]] || fail "--state cancelled"
    tp jobs --tenant vision --queue default -o json
    [[ $(json 'len(d["jobs"])') == 1 ]] || fail "--tenant vision --queue default: one live job"
    tp jobs --queue detection -o json
    [[ $(json 'len(d["jobs"])') == 0 ]] || fail "--queue detection: no jobs"
    node=$("$tidepool" job "$running" -o json |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["placement"][0]["node"])')
    tp jobs --node "$node" -o yaml
    grep -qE "^ +id: $running\$" "$work/out" || fail "--node $node -o yaml should list job $running"
    [[ $(grep -cE '^ +id: ' "$work/out") == 1 ]] || fail "--node $node: one job"
    tp jobs --all --limit 1 -o json
    [[ $(json '[j["id"] for j in d["jobs"]]') == "[$ended]" ]] || fail "--limit 1: the newest job"
    # kubectl's forms: name, wide, csv, and --no-headers.
    tp jobs --all -o name
    [[ $(cat "$work/out") == "job/$ended"$'\n'"job/$running" || $(cat "$work/out") == "job/$running"$'\n'"job/$ended" ]] ||
      fail "-o name should print job/$running and job/$ended: $(cat "$work/out")"
    tp jobs -o wide
    expect_out PRIORITY CLASS MODELS SUBMITTED SUBMITTER dev
    tp jobs --all -o csv
    head -1 "$work/out" | grep -qx 'ID,NAME,TENANT,QUEUE,STATE,GPUS,AGE,TIME,ATTAINED,NODES,REASON,PRIORITY,CLASS,MODELS,SUBMITTED,SUBMITTER' ||
      fail "-o csv: the header of every column: $(head -1 "$work/out")"
    grep -qE "^$running,notebook-alice,vision,default,running,0.5," "$work/out" || fail "-o csv: job $running"
    tp jobs --no-headers -o csv
    grep -q '^ID,' "$work/out" && fail "--no-headers -o csv should drop the header"
    tp jobs --no-headers
    grep -q 'NAME' "$work/out" && fail "--no-headers should drop the header"
    grep -qE "^ *$running +notebook-alice" "$work/out" || fail "--no-headers still lists job $running"
    expect_error "--output: xml not in {table,wide,name,json,yaml,csv}" -- jobs -o xml
    tp submit -o name "$examples/notebook.yaml"
    grep -qE '^job/[0-9]+$' "$work/out" || fail "submit -o name should print job/ID"
    expect_error "-o" "csv" -- job "$running" -o csv
    # Job history (sacct): a window of time, every state unless --state.
    tp jobs --since 1h -o json
    [[ $(json "{$running, $ended} <= {j['id'] for j in d['jobs']}") == True ]] ||
      fail "--since 1h: both jobs, the cancelled one too"
    tp jobs --since now --state cancelled -o json
    [[ $(json 'len(d["jobs"])') == 0 ]] || fail "--since now: job $ended had ended before"
    tp jobs --until 2000-01-01 -o json
    [[ $(json 'len(d["jobs"])') == 0 ]] || fail "--until 2000-01-01: no job was submitted by then"
    tp jobs --since 2000-01-01T00:00Z --until now -o wide
    expect_out notebook-alice cancelled SUBMITTER
    expect_error "--since: 'yesterday' is not a time" -- jobs --since yesterday
    expect_error "until_ms" "is before since_ms" -- jobs --since now --until 1d
    expect_error "error: state: unknown job state 'sleeping'" -- jobs --state sleeping
    expect_error "--all" -- jobs --all --state running
    ;;

  job)
    id=$(submit "$examples/notebook.yaml")
    wait_state "$id" running
    tp job "$id"
    expect_out "Job $id: notebook-alice" "running" "vision, queue default" "dev, priority 0" \
      "0.5 of a GPU" "jupyter lab" "Transitions:" "submitted" "Placement:" "TASK" "NODE"
    tp job "$id" -o yaml
    expect_out "id: $id" "state: running" "spec:" "placement:" "transitions:"
    tp job "$id" -o json
    [[ $(json 'd["spec"]["gpu_milli"]') == 500 ]] || fail "-o json: spec.gpu_milli"
    expect_error "error: id: no job 999" -- job 999
    ;;

  cancel)
    a=$(submit "$examples/notebook.yaml")
    b=$(submit "$examples/batch.json")
    tp cancel "$a" "$b"
    expect_out "Cancelled job $a" "Cancelled job $b"
    tp job "$a" -o json
    [[ $(json 'd["state"]') == cancelled ]] || fail "job $a should be cancelled"
    c=$(submit "$examples/notebook.yaml")
    expect_error "error: id: job $a already ended: cancelled" "1 of 2 jobs not cancelled" -- \
      cancel "$a" "$c"
    grep -qF "Cancelled job $c" "$work/stdout" || fail "job $c should be cancelled all the same"
    expect_error "no job 999999" -- cancel 999999
    ;;

  why)
    run=$(submit "$examples/notebook.yaml")
    wait_state "$run" running
    tp why "$run"
    expect_out "Job $run is running: running since"
    tp cancel "$run"
    tp why "$run"
    expect_out "Job $run is cancelled: cancelled by token"
    # Vision's H100 guarantee is 32 GPUs and it may not borrow H100: a second 32-GPU gang waits.
    first=$(submit "$examples/train-resnet.yaml")
    wait_state "$first" running
    second=$(submit "$examples/train-resnet.yaml")
    sleep 2.5 # a scheduling pass or two
    tp why "$second"
    expect_out "Job $second is pending ("
    tp why "$second" -o json
    [[ $(json 'd["state"]') == pending ]] || fail "why -o json: state"
    [[ $(json 'd["kind"] in ("quota", "capacity", "topology", "reservation", "head-of-line", "window")') == True ]] ||
      fail "why -o json: the kind of a job after a pass"
    [[ $(json 'isinstance(d["waited_seconds"], dict)') == True ]] || fail "why: waited_seconds"
    kind=$(json 'd["kind"]')
    tp jobs
    grep -qE "^ *$second .*pending.* $kind\$" "$work/out" ||
      fail "jobs should show job $second's pending reason"
    ;;

  nodes)
    id=$(submit "$examples/notebook.yaml")
    wait_state "$id" running
    tp nodes
    expect_out NAME STATE MODEL GPUS USED LEAF AGENT HEARTBEAT JOBS h100-a-01 a100-b-03 cpu-login \
      leaf-1 H100 A100
    [[ $(grep -c ' ready ' "$work/out") == 23 ]] || fail "23 ready nodes expected"
    # No agent runs here (the server simulates them): AGENT and HEARTBEAT are "-".
    grep -qE " 0.5 +leaf-[0-9] +- +- +$id( |\$)" "$work/out" ||
      fail "the node of job $id: USED 0.5, no agent, JOBS $id"
    tp nodes -o json
    [[ $(json 'len(d["nodes"])') == 23 ]] || fail "nodes -o json: 23 nodes"
    tp nodes -o name
    [[ $(wc -l <"$work/out") == 23 ]] && grep -qx node/h100-a-01 "$work/out" || fail "nodes -o name"
    tp nodes -o wide --no-headers
    grep -q NAME "$work/out" && fail "nodes --no-headers should drop the header"
    grep -qE '^h100-a-01 .* spine-' "$work/out" || fail "nodes -o wide should show the spine"
    ;;

  drain)
    tp drain h100-a-01 --reason "bad GPU 3"
    expect_out "Node h100-a-01 drained (bad GPU 3)"
    tp nodes
    grep -qE '^h100-a-01 +drained .*bad GPU 3' "$work/out" || fail "h100-a-01 should be drained"
    tp top --once
    expect_out "h100-a-01 [xxxxxxxx] 0/8 drained" "nodes drained: 1"
    tp undrain h100-a-01 -o json
    [[ $(json 'd["nodes"][0]["state"]') == ready ]] || fail "undrain -o json: state ready"
    tp nodes
    grep -qE '^h100-a-01 +ready ' "$work/out" || fail "h100-a-01 should be ready again"
    expect_error "error: node: no node 'nowhere'" -- drain nowhere
    # Several nodes, as a hostlist; again with another reason replaces it.
    tp drain "h100-b-[01-02]" h100-c-01 --reason "rack 7 power"
    expect_out "Node h100-b-01 drained (rack 7 power)" "Node h100-b-02 drained" "Node h100-c-01 drained"
    tp drain h100-b-01 --reason "rack 7 power, PSU swapped"
    expect_out "Node h100-b-01 drained (rack 7 power, PSU swapped)"
    tp undrain "h100-b-[01-02]" h100-c-01 -o json
    [[ $(json '[n["state"] for n in d["nodes"]]') == "['ready', 'ready', 'ready']" ]] ||
      fail "undrain of a hostlist: every node ready"
    expect_status 1 drain "h100-b-[01-"
    # Draining is for admins.
    tp token create --role user --tenant vision -o json
    user_token=$(json 'd["secret"]')
    expect_error "error: role: an admin token is needed; this one is a user token" -- \
      drain h100-a-01 --token "$user_token"
    ;;

  queues)
    submit "$examples/notebook.yaml" >/dev/null
    tp queues
    expect_out TENANT QUEUE PENDING RUNNING search ranking retrieval ads ctr assistant inference \
      interns
    grep -qE '^vision +default +[01] +[01]$' "$work/out" || fail "vision/default should hold 1 job"
    tp queues -o yaml
    expect_out "queues:" "tenant: vision" "queue: detection"
    ;;

  tenants)
    tp tenants
    expect_out TENANT ORG WEIGHT MODEL GUARANTEED USED BORROWED BORROW-LIMIT LEND-LIMIT \
      research products unlimited
    grep -qE '^vision +research +1 +H100 +32 +0 +0 +0 +16 ' "$work/out" ||
      fail "vision: H100 guarantee 32, borrowing limit 0, lending limit 16"
    grep -qE '^ads .* H100 +16.5 ' "$work/out" || fail "ads: 16.5 H100 guaranteed"
    tp tenants vision -o json
    [[ $(json 'd["quota"]["H100"]["guaranteed_gpus"]') == 32 ]] || fail "tenants vision -o json"
    expect_error "error: tenant: no tenant 'nobody'" -- tenants nobody
    ;;

  top)
    id=$(submit "$examples/notebook.yaml")
    wait_state "$id" running
    submit "$examples/train-resnet.yaml" >/dev/null
    tp top --once
    expect_out "tidepool top  $TIDEPOOL_SERVER" "GPUs: " "of 176 allocated" "h100-a-01 [" \
      "a100-b-03 [" "B vision" ". free" "KEY" "TENANT" "PENDING BY QUEUE"
    grep -qF $'\x1b[' "$work/out" && fail "--once to a file should not use colors or clear"
    # The notebook's half GPU shows as a lower-case b (vision is the second tenant listed).
    grep -qE '\[\.*b\.*\]' "$work/out" || fail "a node should show the notebook's half GPU as b"
    expect_error "--interval" "not a refresh interval" -- top --once --interval 10ms
    # Without a terminal: one frame and the end; with --interval, frames one after another.
    timeout 10 "$tidepool" top >"$work/out" || fail "top to a file should print a frame and end"
    [[ $(grep -c '^tidepool top ' "$work/out") == 1 ]] || fail "top to a file: one frame"
    timeout 2 "$tidepool" top --interval 200ms >"$work/out" || true
    [[ $(grep -c '^tidepool top ' "$work/out") -ge 2 ]] || fail "top --interval to a file: frames"
    ;;

  tokens)
    tp token create --role user --tenant vision --description "alice's laptop"
    expect_out "Created token" "role user, tenant vision" "shown only this once" "tp_"
    tp token create --role user --tenant search -o json
    search_id=$(json 'd["id"]')
    search_token=$(json 'd["secret"]')
    [[ $search_token == tp_* ]] || fail "the secret should start with tp_"
    tp token list
    expect_out ID ROLE TENANT NODE CREATED STATE DESCRIPTION admin "alice's laptop" "$search_id"
    grep -qF "tp_" "$work/out" && fail "token list must not show secrets"
    tp token create --role agent --node h100-a-01 -o yaml
    expect_out "role: agent" "node: h100-a-01"
    # A user token sees its own tenant only.
    vision_job=$(submit "$examples/notebook.yaml")
    TIDEPOOL_TOKEN=$search_token tp jobs --all -o json
    [[ $(json 'len(d["jobs"])') == 0 ]] || fail "search's token should not see vision's jobs"
    expect_error "error: id: no job $vision_job" -- job "$vision_job" --token "$search_token"
    expect_error "tenant: this token acts for tenant 'search' only" -- \
      submit "$examples/notebook.yaml" --token "$search_token"
    expect_error "error: role: an admin token is needed" -- token list --token "$search_token"
    tp token revoke "$search_id"
    expect_out "Revoked token $search_id"
    tp token list -o json
    [[ $(json "[t['revoked'] for t in d['tokens'] if t['id'] == '$search_id']") == "[True]" ]] ||
      fail "token $search_id should be revoked"
    expect_error "error: Authorization: unknown or revoked token" -- jobs --token "$search_token"
    expect_error "error: token: no token 'nope'" -- token revoke nope
    expect_error "--tenant" "give --tenant NAME" -- token create --role user
    expect_error "--node" -- token create --role agent
    ;;

  control)
    # Vision may not borrow H100: a second 32-GPU gang waits for the first.
    first=$(submit "$examples/train-resnet.yaml")
    wait_state "$first" running
    second=$(submit "$examples/train-resnet.yaml")
    tp hold "$second"
    expect_out "Held job $second"
    tp why "$second"
    expect_out "Job $second is pending (held): held by token"
    tp jobs
    grep -qE "^ *$second .*pending.* held\$" "$work/out" || fail "jobs should say job $second is held"
    tp update "$second" --priority 5 --max-runtime none
    expect_out "Updated job $second"
    tp job "$second" -o json
    [[ $(json 'd["spec"]["priority"]') == 5 && $(json 'd["spec"]["max_runtime"]') == None ]] ||
      fail "update: priority 5 and no max_runtime"
    expect_error "job $first is running; only a pending job can be updated" -- \
      update "$first" --priority 1
    expect_error "nothing to update" -- update "$second"
    expect_error "priority" "out of range" -- update "$second" --priority 5000000
    # Requeued, the first runs again (from its checkpoint); the held one does not start.
    tp requeue "$first"
    expect_out "Requeued job $first"
    wait_state "$first" running
    tp job "$first" -o json
    [[ $(json 'd["starts"]') == 2 ]] || fail "requeue: job $first should have started twice"
    tp job "$second" -o json
    [[ $(json 'd["state"]') == pending ]] || fail "the held job $second should still wait"
    expect_error "job $second is pending (held); only a running job can be requeued" -- \
      requeue "$second"
    tp release "$second" -o name
    expect_out "job/$second"
    expect_error "job $second is pending and not held" -- release "$second"
    tp why "$second" -o json
    [[ $(json 'd["kind"]') != held ]] || fail "released: job $second is no longer held"
    expect_error "1 of 2 jobs not held" -- hold "$second" "$first"
    grep -qF "Held job $second" "$work/stdout" || fail "hold should hold job $second all the same"
    # Dependencies: a notebook after the first gang waits for it, and is cancelled with it.
    after=$("$tidepool" submit --parsable --after-ok "$first" "$examples/notebook.yaml")
    tp why "$after"
    expect_out "Job $after is pending (dependency): runs after job $first (running) succeeds"
    tp job "$after" -o json
    [[ $(json 'd["spec"]["after_ok"]') == "[$first]" ]] || fail "--after-ok: the spec's after_ok"
    expect_error "after_ok[0]: no job 999999" -- submit --after-ok 999999 "$examples/notebook.yaml"
    # An array: one job per index, each told its index.
    tp submit --array 0-2,7 "$examples/batch.json"
    grep -qE '^Submitted array job ([0-9]+) \(4 jobs, \1\.\.[0-9]+\)$' "$work/out" ||
      fail "submit --array should say what it submitted"
    array=$(sed -E 's/^Submitted array job ([0-9]+) .*/\1/' "$work/out")
    tp job "$((array + 3))" -o json
    [[ $(json 'd["spec"]["env"]["TIDEPOOL_ARRAY_INDEX"]') == 7 && $(json 'd["array_job"]') == "$array" ]] ||
      fail "the array's 4th job should have index 7"
    tp jobs --all
    grep -qE "^ *$((array + 3)) +embed-images\[7\] " "$work/out" || fail "jobs should name it embed-images[7]"
    expect_error "array:" "ends before it starts" -- submit --array 5-1 "$examples/batch.json"
    tp cancel "$first"
    tp job "$after" -o json
    [[ $(json 'd["state"]') == cancelled ]] || fail "job $after should be cancelled with job $first"
    expect_out "job $first that it runs after (after_ok) ended cancelled"
    ;;

  events)
    id=$(submit "$examples/notebook.yaml")
    wait_state "$id" running
    tp cancel "$id"
    tp drain h100-b-01 --reason "fan noise"
    tp events
    expect_out "job.submitted" "job.started" "job $id (notebook-alice, vision/default): placed on" \
      "job.cancelled" "node.drained" "node h100-b-01" "fan noise"
    grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}  job\.started +job '"$id" "$work/out" ||
      fail "events: a line is the local time, the kind and what happened"
    tp events --kind job.cancelled --kind job.started
    [[ $(wc -l <"$work/out") == 2 ]] || fail "--kind job.cancelled --kind job.started: 2 lines"
    tp events --kind node -o json
    [[ $(json 'len(d["events"]) > 0 and all(e["kind"].startswith("node.") for e in d["events"])') == True ]] ||
      fail "--kind node -o json: node events only"
    tp events --since 2000-01-01Z -o yaml
    expect_out "kind: job.submitted" "last_seq:"
    tp events --since now
    [[ ! -s $work/out ]] || fail "--since now: no event yet"
    grep -q "No events since" "$work/err" || fail "--since now should say there are none"
    expect_error "--since: 'soon' is not a time" -- events --since soon
    # --watch prints what happens from now on.
    "$tidepool" events --watch --since now --kind job.started >"$work/watched" 2>&1 &
    watcher=$!
    # Once it waits on the server (its long poll is parked), what happens next is new to it.
    # (Read whole before grep: grep -q leaving early would fail curl's write, and the pipe.)
    polling() {
      curl -sS "$TIDEPOOL_SERVER/metrics" >"$work/metrics" &&
        grep -qE '^tidepool_api_long_polls [1-9]' "$work/metrics"
    }
    for _ in $(seq 1 200); do
      polling && break
      sleep 0.1
    done
    polling || fail "events --watch should be waiting on the server"
    second=$(submit "$examples/notebook.yaml")
    for _ in $(seq 1 100); do
      grep -q "job $second " "$work/watched" && break
      sleep 0.1
    done
    kill "$watcher"
    wait "$watcher" 2>/dev/null || true
    grep -q "job.started .*job $second (notebook-alice" "$work/watched" ||
      fail "events --watch should print job $second's start: $(cat "$work/watched")"
    grep -q "job $id " "$work/watched" && fail "--since now: job $id started before"
    ;;

  errors)
    # Nothing listens on the port of a stopped server.
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    expect_error "error: cannot reach the Tidepool server at $TIDEPOOL_SERVER:" "is it running?" \
      "set --server or TIDEPOOL_SERVER" -- jobs
    expect_error "cannot reach the Tidepool server" -- top --once
    expect_error "cannot reach the Tidepool server" -- submit "$examples/notebook.yaml"
    expect_status 5 jobs
    start_server
    # Exit statuses (tidepool --help): 2 usage, 3 not found, 4 not allowed, 5 unreachable, 1
    # any other error.
    expect_status 2 jbos
    grep -qF "unknown command 'jbos'; did you mean 'jobs'" "$work/stderr" ||
      fail "an unknown command should suggest the nearest: $(cat "$work/stderr")"
    expect_status 2 jobs --bogus
    expect_status 2 cancel
    expect_status 3 job 999999
    expect_status 3 cancel 999999
    TIDEPOOL_TOKEN=tp_wrong expect_status 4 jobs
    expect_status 1 submit "$work/no-such-spec.yaml"
    expect_status 3 jobs --tenant nosuch
    grep -qF "no tenant 'nosuch'" "$work/stderr" || fail "jobs --tenant nosuch: $(cat "$work/stderr")"
    tp --help
    expect_out "Exit status: 0 ok, 1 error, 2 usage error"
    # An https:// URL to the plain HTTP server, and a peer that does not speak HTTP.
    expect_error "TLS handshake failed" -- jobs --server "https://${TIDEPOOL_SERVER#http://}"
    python3 -c '
import socket, sys
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
sys.stdout.close()
peer, _ = listener.accept()
peer.recv(65536)
peer.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
peer.close()
' >"$work/fake-port" &
    fake_pid=$!
    for _ in $(seq 1 50); do [[ -s $work/fake-port ]] && break; sleep 0.1; done
    expect_error "is not HTTP/1.x" "SSH-2.0" -- jobs --server "http://127.0.0.1:$(cat "$work/fake-port")"
    wait "$fake_pid"
    # tidepool server runs tidepool-server, found beside tidepool or else on PATH.
    mkdir -p "$work/lone"
    cp "$tidepool" "$work/lone/tidepool"
    PATH=/usr/bin:/bin tidepool="$work/lone/tidepool" expect_error \
      "runs the program tidepool-server, which is neither beside tidepool" -- server --help
    PATH="$(dirname "$tidepool"):/usr/bin:/bin" "$work/lone/tidepool" server --help >"$work/out"
    expect_out "--config" "--tls-cert"
    TIDEPOOL_TOKEN="" expect_error "error: Authorization: a bearer token is needed" -- nodes
    expect_error "error: --server: 'ftp://x' is not a server URL" -- jobs --server ftp://x
    expect_error "--output" -- jobs -o xml
    # Help texts show examples.
    tp submit --help
    expect_out "Examples:" "tidepool submit data/examples/train-resnet.yaml" "TIDEPOOL_SERVER"
    tp top --help
    expect_out "--interval" "--once"
    ;;

  config)
    # The config file gives server and token; the environment and flags win over it.
    mkdir -p "$work/xdg/tidepool"
    printf '%s\n' "$TIDEPOOL_TOKEN" >"$work/xdg/tidepool/admin.token"
    cat >"$work/xdg/tidepool/config.yaml" <<EOF
server: $TIDEPOOL_SERVER
token_file: admin.token
EOF
    server=$TIDEPOOL_SERVER
    unset TIDEPOOL_SERVER TIDEPOOL_TOKEN
    tp queues
    expect_out "vision"
    TIDEPOOL_SERVER=http://127.0.0.1:1 expect_error "cannot reach the Tidepool server at http://127.0.0.1:1" -- queues
    expect_error "cannot reach the Tidepool server at http://127.0.0.1:1" -- \
      queues --server 127.0.0.1:1
    TIDEPOOL_SERVER=http://127.0.0.1:1 tp queues --server "$server"
    # A list of servers: the one that refuses connections is passed over; a bad URL is named.
    tp queues --server "http://127.0.0.1:1, $server"
    expect_out "vision"
    printf 'server: http://127.0.0.1:1,%s\ntoken_file: admin.token\n' "$server" \
      >"$work/xdg/tidepool/config.yaml"
    tp queues
    expect_out "vision"
    expect_error "error: --server: 'ftp://x' is not a server URL" -- \
      queues --server "$server,ftp://x"
    TIDEPOOL_SERVER="$server,,$server" expect_error "\$TIDEPOOL_SERVER:" "has an empty entry" -- queues
    TIDEPOOL_TOKEN=tp_wrong expect_error "unknown or revoked token" -- queues
    expect_error "unknown or revoked token" -- queues --token tp_wrong
    # $TIDEPOOL_CONFIG names another file; errors name the file and key.
    printf 'sever: x\n' >"$work/bad.yaml"
    TIDEPOOL_CONFIG=$work/bad.yaml expect_error "$work/bad.yaml:1:1" "sever" -- queues
    TIDEPOOL_CONFIG=$work/none.yaml expect_error "cannot read the config file" -- queues
    ;;

  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "ok: $case_name"
