#!/usr/bin/env bash
# End-to-end checks of `tidepool sim tenants-from-trace`.
#
# Usage: tenants_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: philly, nodes, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup tenants "$@"
cluster="$source_dir/data/clusters/philly-512.yaml"

# Three virtual clusters with 600, 300 and 100 GPU-seconds (shares 60%, 30%, 10% of 512 P100:
# 307.2, 153.6 and 51.2 GPUs) and one whose only job ran 0 s.
cat >"$work/jobs.csv" <<'JOBS'
timestamp,duration,num_gpus,gpu_time,cluster
2017-09-04 10:30:41,100.0,4,400.0,6214e9
2017-09-04 10:31:00,200,1,200,6214e9
2017-09-04 11:00:00,300.0,1,300.0,103959
2017-09-04 12:00:00,25.0,4,100.0,b436b2
2017-09-04 12:30:00,0.0,8,0.0,23dbec
JOBS

case "$case_name" in
  philly)
    "$tidepool" sim tenants-from-trace --jobs "$work/jobs.csv" --format philly \
      --cluster "$cluster" --out "$work/out/tenants.yaml" >"$work/stdout"
    cat "$work/stdout"
    yaml="$work/out/tenants.yaml"
    [[ $(head -c 2 "$yaml") == "# " ]] || fail "the file should start with a comment"
    grep -q "tenants-from-trace" "$yaml" || fail "the header should say how it was derived"
    grep -qx '  - name: "philly"' "$yaml" || fail "org philly missing"
    grep -qx '      - name: "6214e9"' "$yaml" || fail "tenant 6214e9 missing"
    grep -qx '          "P100": {guaranteed_gpus: 307.2}' "$yaml" || fail "6214e9 should have 307.2"
    grep -qx '          "P100": {guaranteed_gpus: 153.6}' "$yaml" || fail "103959 should have 153.6"
    grep -qx '          "P100": {guaranteed_gpus: 51.2}' "$yaml" || fail "b436b2 should have 51.2"
    [[ $(grep -c '      - name: ' "$yaml") -eq 4 ]] || fail "expected 4 tenants"
    [[ $(grep -c 'weight: 1$' "$yaml") -eq 4 ]] || fail "every tenant should have weight 1"
    ! grep -q 'borrowing_limit_gpus' "$yaml" || fail "borrowing should be unlimited"
    grep -q '6214e9 .* 2 .* 60.00 .* 307.200' "$work/stdout" || fail "table row of 6214e9"
    grep -q '23dbec .* 1 .* 0.00 .* 0.000' "$work/stdout" || fail "table row of 23dbec"
    grep -q 'total .* 5 .* 100.00 .* 512.000' "$work/stdout" || fail "table total"
    # The file is a valid tenants file: the tenants of a run with it exist and the derivation is
    # deterministic.
    "$tidepool" sim tenants-from-trace --jobs "$work/jobs.csv" --cluster "$cluster" \
      --out "$work/again.yaml" >/dev/null
    cmp -s "$yaml" "$work/again.yaml" || fail "a second derivation differs"
    ;;
  nodes)
    printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,8000,16384,8,V100\nn2,8000,16384,2,T4\n' \
      >"$work/nodes.csv"
    "$tidepool" sim tenants-from-trace --jobs "$work/jobs.csv" --nodes "$work/nodes.csv" \
      --out "$work/tenants.yaml" >"$work/stdout"
    cat "$work/stdout"
    grep -qx '          "V100": {guaranteed_gpus: 4.8}' "$work/tenants.yaml" || fail "V100 share"
    grep -qx '          "T4": {guaranteed_gpus: 1.2}' "$work/tenants.yaml" || fail "T4 share"
    ;;
  bad-input)
    expect_error "--format" "csv" "philly" -- sim tenants-from-trace --jobs "$work/jobs.csv" \
      --format csv --cluster "$cluster" --out "$work/x.yaml"
    [[ ! -e "$work/x.yaml" ]] || fail "nothing should be written on error"
    printf 'timestamp,duration,num_gpus,gpu_time,cluster\n2017-09-04 10:30:41,0,1,0,a\n' \
      >"$work/idle.csv"
    expect_error "--jobs" "no GPU time" -- sim tenants-from-trace --jobs "$work/idle.csv" \
      --cluster "$cluster" --out "$work/x.yaml"
    printf 'timestamp,duration,num_gpus,gpu_time,cluster\n2017-09-04 10:30:41,5,0,0,a\n' \
      >"$work/bad.csv"
    expect_error "num_gpus" -- sim tenants-from-trace --jobs "$work/bad.csv" \
      --cluster "$cluster" --out "$work/x.yaml"
    expect_error "--nodes" "--cluster" -- sim tenants-from-trace --jobs "$work/jobs.csv" \
      --out "$work/x.yaml"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS: $case_name"
