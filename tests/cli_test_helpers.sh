# Helpers shared by the command-line test scripts (sourced, not run). Scripts call cli_test_setup
# first; the other helpers use the $tidepool (the binary) and $work (a scratch folder) it sets.

# cli_test_setup NAME ARGS...: checks that ARGS are TIDEPOOL_BINARY SOURCE_DIR CASE and sets
# $tidepool, $source_dir, $case_name and $work (a scratch folder removed when the script exits).
cli_test_setup() {
  local name=$1
  shift
  if [[ $# -ne 3 ]]; then
    echo "usage: $(basename "$0") TIDEPOOL_BINARY SOURCE_DIR CASE" >&2
    exit 2
  fi
  tidepool=$1
  source_dir=$2
  case_name=$3
  work=$(mktemp -d "${TMPDIR:-/tmp}/tidepool-${name}-test.XXXXXX")
  trap 'rm -rf "$work"' EXIT
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_out PATTERN...: every pattern (fixed strings) is in $work/out (scripts with another
# output file define their own).
expect_out() {
  local pattern
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$work/out" || fail "the output does not mention '$pattern'"
  done
}

# json EXPRESSION: evaluates a Python expression on the JSON in $work/out (bound to `d`).
json() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$work/out" "$1"
}

# expect_error PATTERN... -- ARGS...: runs tidepool ARGS, expecting a non-zero exit and every
# pattern (fixed strings) in its error output.
# expect_status STATUS ARGS...: runs tidepool ARGS, which must exit with STATUS; its error output
# is in $work/stderr.
expect_status() {
  local want=$1 status=0
  shift
  "$tidepool" "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
  [[ $status == "$want" ]] ||
    fail "tidepool $*: exit status $status, expected $want: $(cat "$work/stderr")"
}

expect_error() {
  local -a patterns=()
  while [[ $1 != "--" ]]; do
    patterns+=("$1")
    shift
  done
  shift
  local status=0
  "$tidepool" "$@" >"$work/stdout" 2>"$work/stderr" || status=$?
  echo "exit status $status; error output:"
  cat "$work/stderr"
  [[ $status -ne 0 ]] || fail "expected a non-zero exit status: tidepool $*"
  local pattern
  for pattern in "${patterns[@]}"; do
    grep -qF -- "$pattern" "$work/stderr" || fail "the error output does not mention '$pattern'"
  done
}

# client_test_setup: for scripts that start a server (start_server sets $server_pid): the EXIT
# trap stops it by its PID and removes $work; no config file of the user running the tests.
server_pid=""
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
client_test_setup() {
  trap 'stop_server; rm -rf "$work"' EXIT
  export XDG_CONFIG_HOME="$work/xdg"
  unset TIDEPOOL_CONFIG TIDEPOOL_SERVER TIDEPOOL_TOKEN TIDEPOOL_CA_CERT
}

# start_server [CONFIG_LINE...]: starts the server on a free port, with the lines added to its
# config; exports TIDEPOOL_SERVER and TIDEPOOL_TOKEN (its first admin token). Its nodes take jobs
# without agents unless $AGENTS_ONLY is set (simulate_unregistered_nodes).
start_server() {
  rm -f "$work/port"
  cat >"$work/server.yaml" <<EOF
cluster: $source_dir/data/clusters/example.yaml
tenants: $source_dir/data/tenants/example.yaml
database: $work/tidepool.db
tick: 1s
simulate_unregistered_nodes: $([[ -n ${AGENTS_ONLY:-} ]] && echo false || echo true)
EOF
  local line
  for line in "$@"; do echo "$line" >>"$work/server.yaml"; done
  "$tidepool" server --config "$work/server.yaml" --listen 127.0.0.1:0 \
    --port-file "$work/port" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    grep -qE '^[0-9]+$' "$work/port" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited: $(cat "$work/server.log")"
    sleep 0.1
  done
  grep -qE '^[0-9]+$' "$work/port" 2>/dev/null || fail "the server wrote no port file in 30 s"
  port=$(tr -d '[:space:]' <"$work/port")
  TIDEPOOL_SERVER="http://127.0.0.1:$port"
  TIDEPOOL_TOKEN=$(cat "$work/tidepool.db.admin-token")
  export TIDEPOOL_SERVER TIDEPOOL_TOKEN
}

# tp ARGS...: runs tidepool ARGS, which must succeed; its output is in $work/out (and shown).
tp() {
  "$tidepool" "$@" >"$work/out" 2>"$work/err" ||
    fail "tidepool $* failed: $(cat "$work/err")"
  cat "$work/out"
}

# submit FILE: submits FILE and prints the job id.
submit() {
  "$tidepool" submit --parsable "$1" 2>"$work/err" || fail "submit $1 failed: $(cat "$work/err")"
}

# wait_state ID STATE: waits up to 20 s for the job to reach STATE.
wait_state() {
  local state=""
  for _ in $(seq 1 200); do
    state=$("$tidepool" job "$1" -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')
    [[ $state == "$2" ]] && return 0
    sleep 0.1
  done
  fail "job $1 is $state, not $2, after 20 s"
}
