#!/usr/bin/env bash
# Runs the README's runnable blocks against the binary and compares what each command prints with
# the shape the README promises. A runnable block is a ```sh fence right after a line
# `<!-- runnable: NAME -->`; it runs as written, in a scratch folder laid out as the repository
# (data/ and deploy/server/server.yaml, on a free port of 127.0.0.1), with the built tidepool on
# PATH. The test waits only where a person would: after starting the server, until it answers, and
# after starting the agents, until their nodes are ready. `tidepool logs --follow` is stopped
# once it has printed a line of the job's progress. Every tidepool command of a block must have a shape below, and every shape
# must still be in the README, so that the two cannot drift.
#
# Usage: readme_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE   (CASE: the block's NAME: server)
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup readme "$@"

# The block, as the README has it.
python3 - "$source_dir/README.md" "$case_name" >"$work/block.sh" <<'EOF'
import sys
lines = open(sys.argv[1]).read().split("\n")
marker = f"<!-- runnable: {sys.argv[2]} -->"
for i, line in enumerate(lines):
    if line.strip() == marker:
        assert lines[i + 1].startswith("```sh"), f"{marker} must be followed by a ```sh fence"
        end = lines.index("```", i + 2)
        print("\n".join(lines[i + 2:end]))
        break
else:
    sys.exit(f"README.md has no block {marker}")
EOF

# The shapes: a command (an extended regex on the command as written) and a line its output must
# have (an extended regex). Background commands (server, agents) have none.
case $case_name in
  server)
    shapes=(
      '^tidepool token create --role agent ' '^Created token [0-9a-f]+ \(role agent, node h100-a-0[1-4]\)'
      '^tidepool nodes$' '^h100-a-0[1-4] +ready +H100 +8 '
      '^tidepool submit data/examples/train-resnet.yaml$' '^Submitted job 1$'
      '^tidepool jobs$' '^ *1 +train-resnet-50 +vision +default +running +32 '
      '^tidepool logs 1 --task 0 --follow$' '^rank 0 of 4 on GPUs 0,1,2,3,4,5,6,7: epoch [0-9]+/90$'
      '^tidepool why 1$' '^Job 1 is running: running since [0-9]+ s on h100-a-0[1-4]'
      '^tidepool advise 1$' '^No advice for job 1: no step times reported$'
      '^tidepool top$' '^tidepool top  http://127\.0\.0\.1:[0-9]+ '
    )
    ;;
  *) fail "unknown case '$case_name'" ;;
esac

# The scratch folder as the repository is laid out, the configuration on a free port.
run="$work/run"
mkdir -p "$run/deploy/server"
ln -s "$source_dir/data" "$run/data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed "s/^listen: .*/listen: 127.0.0.1:$port/" "$source_dir/deploy/server/server.yaml" \
  >"$run/deploy/server/server.yaml"
# As root the agents run tasks as uids of their own: the scratch folder must let them through.
chmod 0711 "$work" "$run"

# The block with the test's waits after the lines that start something in the background.
{
  cat <<EOF
set -euo pipefail
export PATH="$(dirname "$tidepool"):\$PATH" TIDEPOOL_SERVER="http://127.0.0.1:$port"
tidepool() {
  case "\${1:-}" in
    server | agent) exec "$tidepool" "\$@" ;;  # in the background, stopped at the end
    # A follow is stopped once it has printed a line of the job's progress (at most 60 s).
    logs) if [[ " \$* " == *" --follow "* ]]; then { timeout 60 "$tidepool" "\$@" || true; } | sed -u '/: epoch [0-9]*\/[0-9]*\$/q'; else tidepool_once "\$@"; fi ;;
    *) tidepool_once "\$@" ;;
  esac
}
tidepool_once() { timeout 30 "$tidepool" "\$@"; }
# Answered (any status but 5, unreachable), with its first admin token written.
__answers() { local rc=0; "$tidepool" nodes >/dev/null 2>&1 || rc=\$?; [[ \$rc != 5 && -s tidepool.db.admin-token ]]; }
__wait_server() { for _ in \$(seq 1 300); do __answers && return 0; sleep 0.1; done; echo "the server did not answer" >&2; exit 1; }
__wait_nodes() { for _ in \$(seq 1 300); do [[ \$("$tidepool" nodes | grep -cE '^h100-a-0[1-4] +ready ') == 4 ]] && return 0; sleep 0.1; done; echo "the agents' nodes are not ready" >&2; exit 1; }
trap 'echo "\\\$ \$BASH_COMMAND"' DEBUG
EOF
  while IFS= read -r line; do
    echo "$line"
    [[ $line == "tidepool server "*"&"* ]] && echo "__wait_server"
    [[ $line == "done" ]] && echo "__wait_nodes"
  done <"$work/block.sh"
  echo "trap - DEBUG"
} >"$work/run.sh"

# What the block started: the server and the agents, and the tasks the agents left running (an
# agent stopped without --stop-tasks-on-exit leaves them to the next one), all working in the
# scratch folder.
started_here() {
  local proc
  for proc in /proc/[0-9]*; do
    [[ $(readlink "$proc/cwd" 2>/dev/null) == "$run"* ]] && echo "${proc#/proc/}"
  done
  return 0
}
stop_started() {
  local pid
  for signal in TERM KILL; do
    for pid in $(started_here); do kill "-$signal" "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
      [[ -z $(started_here) ]] && return 0
      sleep 0.1
    done
  done
}
trap 'stop_started; rm -rf "$work"' EXIT

status=0
(cd "$run" && bash "$work/run.sh") >"$work/transcript" 2>&1 || status=$?
cat "$work/transcript"
[[ $status == 0 ]] || fail "the block failed (exit status $status)"

# Each command's output: from its "$ command" line to the next one.
python3 - "$work/transcript" "${shapes[@]}" <<'EOF' || fail "the README's outputs do not have their shapes"
import re, sys
transcript = open(sys.argv[1]).read().split("\n")
shapes = list(zip(sys.argv[2::2], sys.argv[3::2]))
runs = []  # (command, output lines)
for line in transcript:
    if line.startswith("$ "):
        runs.append((line[2:], []))
    elif runs:
        runs[-1][1].append(line)
ok = True
for command, _ in runs:
    if not command.startswith("tidepool "):
        continue
    if re.match(r"^tidepool (server|agent) ", command):
        continue
    if not any(re.search(pattern, command) for pattern, _ in shapes):
        print(f"no shape for the README's command: {command}")
        ok = False
for pattern, output in shapes:
    matching = [lines for command, lines in runs if re.search(pattern, command)]
    if not matching:
        print(f"the README no longer runs a command matching {pattern!r}")
        ok = False
    for lines in matching:
        if not any(re.search(output, line) for line in lines):
            print(f"{pattern!r}: no line of its output matches {output!r}")
            ok = False
print(f"{len(runs)} commands run, {len(shapes)} shapes checked")
sys.exit(0 if ok else 1)
EOF
