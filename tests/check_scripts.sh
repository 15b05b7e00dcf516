#!/usr/bin/env bash
# Checks that every shell script the project ships (scripts/, deploy/, bench/, data/examples/, the
# .ci/run entry point) is what a user runs: executable, starting with a real shebang, with no
# syntax error (bash -n), and, for the entry points, a working --help. A formatter run over them
# as if they were C++ (which once left "#!/ usr / bin / env bash" and "set - euo pipefail") fails
# this test.
#
# Usage: check_scripts.sh SOURCE_DIR
set -euo pipefail
cd "${1:?usage: check_scripts.sh SOURCE_DIR}"

status=0
checked=0
while IFS= read -r -d '' script; do
  [[ $script == *helpers* || $script == */.clang-format ]] && continue  # sourced, or not a script
  checked=$((checked + 1))
  first=$(head -n 1 "$script")
  if [[ $first != "#!/usr/bin/env bash" && $first != "#!/bin/bash" && $first != "#!/bin/sh" &&
    $first != "#!/usr/bin/env sh" ]]; then
    echo "FAIL: $script: the first line is not a shebang: $first"
    status=1
    continue
  fi
  if ! bash -n "$script" 2>/tmp/check_scripts.$$; then
    echo "FAIL: $script: syntax error: $(cat /tmp/check_scripts.$$)"
    status=1
  fi
  if ! grep -q '^set -e' "$script" && [[ $script == scripts/* || $script == .ci/* ]]; then
    echo "FAIL: $script: an entry point starts with 'set -euo pipefail'"
    status=1
  fi
  # Scripts that are run by name must be executable (the tests are run through bash).
  if [[ $script != tests/* && ! -x $script ]]; then
    echo "FAIL: $script: not executable (chmod +x $script)"
    status=1
  fi
done < <(find scripts deploy bench data/examples .ci tests -type f \( -name '*.sh' -o -path 'scripts/*' -o \
  -path '.ci/*' \) -print0 2>/dev/null | sort -z)
rm -f /tmp/check_scripts.$$

for entry in scripts/demo scripts/setup scripts/test; do
  if ! out=$("$entry" --help 2>&1) || [[ $out != usage:* ]]; then
    echo "FAIL: $entry --help: expected its usage, got: $out"
    status=1
  fi
done

if [[ $status -eq 0 ]]; then
  echo "ok: $checked scripts are executable, with a shebang and no syntax error"
fi
exit $status
