#!/usr/bin/env bash
# The inference-service demo's two scripts together (data/examples/demo): service_replica.py and
# load_generator.py, with the system's Python, on 127.0.0.1 only.
#   1. A slow replica stopped (SIGTERM) while a request is in flight says "draining" on /healthz,
#      answers that request and exits 0.
#   2. Two replicas on free ports under a stepped load (20, 60, 20 requests a second, 2 s each),
#      the load generator reading its targets from a file. At 3 s one replica leaves the file; 1.5 s
#      later it gets SIGTERM and must exit 0 within its drain time, having got no request after
#      a scrape just before the signal (its final --metrics-file tells). No request may fail; on
#      the replica left vllm:request_success_total is positive and equals the latency histogram's
#      _count, and the two replicas answered the 200 requests sent between them.
# Every wait is bounded; the processes the test started are stopped by their PIDs.
#
# Usage: demo_service_test.sh SOURCE_DIR [PYTHON]   (PYTHON: default /usr/bin/python3)
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $(basename "$0") SOURCE_DIR [PYTHON]" >&2
  exit 2
fi
demo=$1/data/examples/demo
python=${2:-/usr/bin/python3}
drain_seconds=5

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ -x $python ]] || fail "no Python at '$python' (the scripts run with the system's python3)"
[[ -f $demo/service_replica.py && -f $demo/load_generator.py ]] ||
  fail "the scripts are not in $demo"

work=$(mktemp -d "${TMPDIR:-/tmp}/tidepool-demo-service-test.XXXXXX")
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
export PYTHONDONTWRITEBYTECODE=1

# show_logs: the outputs of every process so far, for a failure's reader.
show_logs() {
  local file
  for file in "$work"/*.out "$work"/*.log; do
    [[ -f $file ]] && printf -- '--- %s\n%s\n' "${file##*/}" "$(cat "$file")"
  done
  return 0
}

# start_replica NAME ARGS...: starts a replica on a free port; sets $replica_pid, $replica_port.
start_replica() {
  local name=$1
  shift
  "$python" "$demo/service_replica.py" --port 0 --drain-seconds "$drain_seconds" "$@" \
    >"$work/$name.out" 2>"$work/$name.log" &
  replica_pid=$!
  pids+=("$replica_pid")
  replica_port=""
  for _ in $(seq 1 100); do
    # The file may not be there yet (the background shell opens it): not a failure under set -e.
    replica_port=$(head -n 1 "$work/$name.out" 2>/dev/null || true)
    [[ $replica_port =~ ^[0-9]+$ ]] && return 0
    kill -0 "$replica_pid" 2>/dev/null || { show_logs; fail "replica $name exited at start"; }
    sleep 0.1
  done
  fail "replica $name printed no port in 10 s"
}

# wait_exit PID SECONDS WHAT: waits at most SECONDS for PID to end; its exit status is in $status.
# The PID leaves $pids once reaped: it may be another process's by the time the test ends.
wait_exit() {
  local pid=$1 limit=$2 p
  for _ in $(seq 1 $((limit * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && { show_logs; fail "$3 is still running after $limit s"; }
  status=0
  wait "$pid" || status=$?
  local -a left=()
  for p in "${pids[@]}"; do
    [[ $p == "$pid" ]] || left+=("$p")
  done
  pids=("${left[@]}")
}

# http_get URL: prints the status, a line, and the body of GET URL (no proxy, at most 5 s); the
# status is "error" when no answer came.
http_get() {
  "$python" - "$1" <<'EOF'
import sys
import urllib.error
import urllib.request

opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    with opener.open(sys.argv[1], timeout=5) as response:
        status, body = response.status, response.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
except OSError as e:
    status, body = "error", str(e).encode()
sys.stdout.write(f"{status}\n{body.decode()}")
EOF
}

# metric FILE NAME: the sum of the samples of NAME (any labels) in the exposition in FILE.
metric() {
  [[ -f $1 ]] || { echo 0; return 0; }  # no exposition: none of it (the check then says so)
  awk -v name="$2" '$1 == name || index($1, name "{") == 1 { sum += $NF } END { print sum + 0 }' \
    "$1"
}

# write_targets PORT...: the targets file, replaced at once (the load generator re-reads it).
write_targets() {
  printf '127.0.0.1:%s\n' "$@" >"$work/targets.tmp"
  mv "$work/targets.tmp" "$work/targets"
}

now_ms() {
  local t=${EPOCHREALTIME/./}
  echo $((10#$t / 1000))
}

echo "== a slow replica stopped with a request in flight"
start_replica slow --service-time-ms 1500
slow_pid=$replica_pid
"$python" "$demo/load_generator.py" --targets "127.0.0.1:$replica_port" --steps 1:1 --timeout 8 \
  >"$work/one-request.out" 2>&1 &
one_pid=$!
pids+=("$one_pid")
for _ in $(seq 1 50); do  # until the request is in flight (at most 5 s)
  http_get "http://127.0.0.1:$replica_port/metrics" >"$work/slow.prom"
  [[ $(metric "$work/slow.prom" vllm:num_requests_running) == 1 ]] && break
  sleep 0.1
done
[[ $(metric "$work/slow.prom" vllm:num_requests_running) == 1 ]] ||
  fail "the slow replica shows no request in flight: $(cat "$work/slow.prom")"
kill -TERM "$slow_pid"
sleep 0.3
http_get "http://127.0.0.1:$replica_port/healthz" >"$work/healthz.txt"
if [[ $(head -n 1 "$work/healthz.txt") != 503 ]] || ! grep -qx draining "$work/healthz.txt"; then
  fail "/healthz while draining: $(cat "$work/healthz.txt")"
fi
wait_exit "$one_pid" 15 "the load generator's single request"
[[ $status == 0 ]] || { show_logs; fail "the request in flight at SIGTERM was not answered"; }
wait_exit "$slow_pid" $((drain_seconds + 3)) "the slow replica"
[[ $status == 0 ]] || { show_logs; fail "the slow replica exited with status $status"; }
echo "ok: answered its request in flight, then exited 0"

echo "== two replicas under a stepped load, one taken out and drained"
start_replica a
a_pid=$replica_pid a_port=$replica_port
start_replica b --metrics-file "$work/b.prom"
b_pid=$replica_pid b_port=$replica_port
write_targets "$a_port" "$b_port"
"$python" "$demo/load_generator.py" --targets-file "$work/targets" \
  --steps 20:2,60:2,20:2 --json "$work/summary.json" >"$work/load.out" 2>"$work/load.log" &
load_pid=$!
pids+=("$load_pid")
sleep 3
write_targets "$a_port"
sleep 1.5
http_get "http://127.0.0.1:$b_port/metrics" >"$work/b-before.prom"
kill -TERM "$b_pid"
signalled=$(now_ms)
wait_exit "$b_pid" "$drain_seconds" "replica b, drained"
[[ $status == 0 ]] || { show_logs; fail "replica b exited with status $status after SIGTERM"; }
echo "ok: replica b exited 0, $(($(now_ms) - signalled)) ms after SIGTERM"
# The requests b had got at the signal: those answered and those in flight.
before=0
for name in request_success_total num_requests_running num_requests_waiting; do
  before=$((before + $(metric "$work/b-before.prom" "vllm:$name")))
done
after=$(metric "$work/b.prom" vllm:request_success_total)
[[ $before -gt 0 && $before == "$after" ]] ||
  fail "replica b had got $before requests at SIGTERM and answered $after in all: it got" \
    "requests 1.5 s after it left the targets file"

wait_exit "$load_pid" 30 "the load generator"
cat "$work/load.out"
[[ $status == 0 ]] || { show_logs; fail "the load generator exited with status $status"; }
grep -qE '^sent 200 ok 200 failed 0 p95_ms [0-9.]+$' "$work/load.out" ||
  fail "the summary line is not 'sent 200 ok 200 failed 0 p95_ms X'"
grep -qE '"failed": 0[,}]' "$work/summary.json" || fail "--json: $(cat "$work/summary.json")"

http_get "http://127.0.0.1:$a_port/metrics" >"$work/a.prom"
head -n 1 "$work/a.prom" | grep -qx 200 || fail "GET /metrics of replica a: $(cat "$work/a.prom")"
successes=$(metric "$work/a.prom" vllm:request_success_total)
count=$(metric "$work/a.prom" vllm:e2e_request_latency_seconds_count)
[[ $successes -gt 0 && $successes == "$count" ]] ||
  fail "replica a: vllm:request_success_total $successes, histogram _count $count"
[[ $((successes + after)) == 200 ]] ||
  fail "the replicas answered $successes + $after requests, not the 200 sent"
echo "ok: replica a answered $successes requests, replica b $after"

kill -TERM "$a_pid"
wait_exit "$a_pid" $((drain_seconds + 3)) "replica a"
[[ $status == 0 ]] || fail "replica a exited with status $status after SIGTERM"
echo "PASS"
