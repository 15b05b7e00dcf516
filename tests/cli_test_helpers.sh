# Helpers shared by the command-line test scripts (sourced, not run). They expect $tidepool (the
# binary) and $work (a scratch folder) to be set.

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
