#!/bin/sh
# A burst provider hook for trying bursting on one machine (and for Tidepool's own tests): `up`
# "rents" each node of the request by starting a `tidepool agent` with fake GPUs here, under the
# node's name and with its token; `down` stops those agents. A real hook rents machines from a
# cloud instead, whose start-up runs the same agent command (README: "Bursting").
#
# The server runs it as `local-provider.sh up|down` with the request (one line of JSON) on stdin
# and TIDEPOOL_SERVER (the server's URL) and TIDEPOOL_PROVIDER in the environment. Also read:
#   TIDEPOOL_LOCAL_PROVIDER_DIR   state, agent logs and a log of the calls
#                                 (default ${TMPDIR:-/tmp}/tidepool-local-provider)
#   TIDEPOOL_BIN                  the tidepool program (default: tidepool on the PATH)
#   TIDEPOOL_LOCAL_PROVIDER_FAIL  when set, `up` fails with this message (to try a failing cloud)
set -u
# The server runs hooks with its own umask (077); the agents started here run each job's tasks as
# a uid of its own, which must be able to pass through these folders to reach its own.
umask 022
action=${1:-}
dir=${TIDEPOOL_LOCAL_PROVIDER_DIR:-${TMPDIR:-/tmp}/tidepool-local-provider}
bin=${TIDEPOOL_BIN:-tidepool}
mkdir -p "$dir" || exit 1
request=$(cat)
printf '%s %s\n' "$action" "$request" >> "$dir/calls.log"

# The values of a string field, in order ("node" is in each node's object only).
strings() { printf '%s' "$request" | grep -o "\"$1\":\"[^\"]*\"" | cut -d '"' -f 4; }

case "$action" in
  up)
    if [ -n "${TIDEPOOL_LOCAL_PROVIDER_FAIL:-}" ]; then
      echo "$TIDEPOOL_LOCAL_PROVIDER_FAIL" >&2
      exit 3
    fi
    model=$(strings model | head -n 1)
    gpus=$(printf '%s' "$request" | grep -o '"gpus":[0-9]*' | head -n 1 | cut -d : -f 2)
    # shellcheck disable=SC2046 # one word per token, on purpose
    set -- $(strings token)
    for node in $(strings node); do
      pidfile="$dir/agent-$node.pid"
      # Idempotent: a node whose agent still runs is left as it is.
      if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2> /dev/null; then shift; continue; fi
      setsid "$bin" agent --server "$TIDEPOOL_SERVER" --token "$1" --node "$node" \
        --gpus "fake:${gpus}x${model}" --state-dir "$dir/state-$node" \
        --checkpoint-root "$dir/checkpoints" --heartbeat-interval 1s --cgroups none \
        --stop-tasks-on-exit > "$dir/agent-$node.log" 2>&1 < /dev/null &
      echo $! > "$pidfile"
      echo "started agent $! for node $node"
      shift
    done
    ;;
  down)
    for node in $(strings node); do
      pidfile="$dir/agent-$node.pid"
      if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2> /dev/null
        rm -f "$pidfile"
        echo "stopped the agent of node $node"
      fi
    done
    ;;
  *)
    echo "usage: $0 up|down < request.json" >&2
    exit 2
    ;;
esac
exit 0
