#!/usr/bin/env bash
# Checks that every C++ source under src/, bench/ and tests/ is formatted as .clang-format says.
#
# Usage: check_format.sh [SOURCE_DIR]   (default: the repository root above this script)
# Fails listing the offending files; run `clang-format -i FILE...` to fix them. Skips, with a
# message and exit status 0, only when clang-format is not installed.
set -euo pipefail

script_dir=${BASH_SOURCE[0]%/*}
[[ $script_dir == "${BASH_SOURCE[0]}" ]] && script_dir=.
root=${1:-"$script_dir/.."}
cd "$root"

if ! command -v clang-format >/dev/null 2>&1; then
  echo "SKIPPED: clang-format is not installed, so formatting was not checked" \
    "(install it with: apt-get install clang-format)"
  exit 0
fi

mapfile -d '' files < <(find src bench tests -type f \( -name '*.h' -o -name '*.cc' \) -print0 \
  2>/dev/null | sort -z)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "no C++ sources found under src/, bench/ or tests/"
  exit 0
fi

# One clang-format run over every file; its diagnostics start with "FILE:LINE:COLUMN: error:".
status=0
report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1) || status=$?
if [[ $status -eq 0 ]]; then
  echo "ok: ${#files[@]} files formatted ($(clang-format --version))"
  exit 0
fi
mapfile -t offenders < <(grep -E '^[^ ]+:[0-9]+:[0-9]+: error:' <<<"$report" | cut -d: -f1 | sort -u)
if [[ ${#offenders[@]} -eq 0 ]]; then
  echo "clang-format failed (exit status $status):"
  echo "$report"
  exit 1
fi
echo "${#offenders[@]} of ${#files[@]} files are not formatted as .clang-format says:"
printf '  %s\n' "${offenders[@]}"
echo "Fix them with: clang-format -i ${offenders[*]}"
exit 1
