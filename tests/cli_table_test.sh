#!/usr/bin/env bash
# Checks the table of docs/cli.md against the tidepool binary: every command of `tidepool --help`
# (and of `tidepool token --help` and `tidepool admin --help`) has a row and every row is a
# command; each row's -o forms are those its --help offers; a usage error ends with 2, and a
# command listed with 5 ends with 5 against a server that is not there; and shell completion
# completes what the row says (options and -o values, or the name), in bash, and in zsh where zsh
# is installed.
#
# Usage: cli_table_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE   (CASE: table)
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup cli-table "$@"
[[ $case_name == table ]] || fail "unknown case '$case_name'"
table="$source_dir/docs/cli.md"

# The rows: "command|forms|statuses|completion".
python3 - "$table" >"$work/rows" <<'EOF'
import sys
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 4 and cells[0] not in ("command", "---"):
        print("|".join(cells))
EOF
[[ $(wc -l <"$work/rows") -ge 20 ]] || fail "docs/cli.md: the table has too few rows"

# The commands of a --help: the words of its "Subcommands:" part.
subcommands() {
  "$tidepool" "$@" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }'
}
{
  for command in $(subcommands); do
    if [[ $command == token || $command == admin ]]; then
      for sub in $(subcommands "$command"); do echo "$command $sub"; done
    else
      echo "$command"
    fi
  done
} | sort >"$work/commands"
cut -d'|' -f1 "$work/rows" | sort >"$work/listed"
diff "$work/commands" "$work/listed" >"$work/diff" ||
  fail "docs/cli.md and tidepool --help list other commands (< help, > table): $(cat "$work/diff")"

# Arguments with which a command gets as far as asking the server.
args_of() {
  case $1 in
    submit) echo "$source_dir/data/examples/notebook.yaml" ;;
    job | cancel | hold | release | requeue | why | advise | logs) echo 1 ;;
    update) echo "1 --priority 5" ;;
    checkpoint) echo "--job 1 --step 1" ;;
    drain | undrain) echo h100-a-01 ;;
    top) echo --once ;;
    "token create") echo "--role admin" ;;
    "token revoke") echo 1 ;;
    "admin backup") echo "$work/state.backup" ;;
    bill) echo "--tenant vision --from 2026-01-01 --to 2026-01-31" ;;
    *) echo "" ;;
  esac
}

# complete WORDS...: what bash completion offers for the last word of `tidepool WORDS...`.
"$tidepool" completion bash >"$work/completion.bash"
bash -n "$work/completion.bash" || fail "completion bash: not a valid bash script"
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=(tidepool "$@"); COMP_CWORD=$#; _tidepool
           for w in "${COMPREPLY[@]}"; do printf "%s\n" "$w"; done' _ "$work/completion.bash" "$@"
}

checked=0
while IFS='|' read -r command forms statuses completion; do
  read -ra words <<<"$command"
  "$tidepool" "${words[@]}" --help >"$work/help" || fail "$command --help failed"
  offered=$({ grep -oE -- '--output [A-Z]+:\{[a-z,]+\}' "$work/help" || true; } | head -1 |
    sed -E 's/.*\{(.*)\}/\1/; s/,/ /g')
  [[ ${offered:--} == "$forms" ]] ||
    fail "$command: docs/cli.md says -o '$forms', --help offers '${offered:--}'"
  if [[ " $statuses " == *" 2 "* ]]; then
    expect_status 2 "${words[@]}" --no-such-option
  fi
  if [[ " $statuses " == *" 5 "* ]]; then
    read -ra extra <<<"$(args_of "$command")"
    TIDEPOOL_TOKEN=tp_unused expect_status 5 "${words[@]}" "${extra[@]}" \
      --server http://127.0.0.1:1
  fi
  case $completion in
    options)
      complete_words "${words[@]}" --he >"$work/offered"
      grep -qx -- --help "$work/offered" || fail "$command: completion should offer --help"
      if [[ $forms != - ]]; then
        complete_words "${words[@]}" -o "" | tr '\n' ' ' | sed 's/ $//' >"$work/offered"
        [[ $(cat "$work/offered") == "$forms" ]] ||
          fail "$command -o: completion offers '$(cat "$work/offered")', not '$forms'"
      fi
      ;;
    name)
      # The last word, from its first two letters, after the group's name if there is one.
      last=${words[-1]}
      complete_words "${words[@]:0:${#words[@]}-1}" "${last:0:2}" >"$work/offered"
      grep -qx -- "$last" "$work/offered" || fail "completion should offer '$command'"
      ;;
    *) fail "$command: unknown completion '$completion'" ;;
  esac
  checked=$((checked + 1))
done <"$work/rows"

# A few more of what completion knows: the commands at the top, a group's subcommands, files.
complete_words jo | sort >"$work/offered"
[[ $(cat "$work/offered") == $'job\njobs' ]] || fail "tidepool jo<TAB>: $(cat "$work/offered")"
complete_words token "" | sort | tr '\n' ' ' >"$work/offered"
grep -q 'create list revoke' "$work/offered" || fail "tidepool token <TAB>: $(cat "$work/offered")"
touch "$work/train-xyz.yaml"
(cd "$work" && complete_words submit train-x) >"$work/offered"
grep -qx train-xyz.yaml "$work/offered" || fail "tidepool submit <TAB> should offer files"
complete_words jobs --server "" >"$work/offered"
[[ ! -s $work/offered ]] || fail "a URL is not completed from the options: $(cat "$work/offered")"
expect_status 2 completion fish

if command -v zsh >/dev/null; then
  "$tidepool" completion zsh >"$work/completion.zsh"
  HOME=$work zsh -f -c 'source "$1" && (( $+functions[_tidepool] )) && [[ $_comps[tidepool] == _bash_complete* ]]' \
    _ "$work/completion.zsh" || fail "completion zsh: the script does not register _tidepool"
  echo "zsh: the completion registers"
else
  echo "zsh is not installed: its script is checked as bash's only"
fi
echo "docs/cli.md: $checked commands checked"
