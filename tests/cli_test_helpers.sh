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

# expect_error PATTERN... -- ARGS...: runs tidepool ARGS, expecting a non-zero exit and every
# pattern (fixed strings) in its error output.
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
