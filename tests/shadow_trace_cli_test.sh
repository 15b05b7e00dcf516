#!/usr/bin/env bash
# End-to-end checks of `tidepool shadow --trace` (shadow mode on a saved job stream, no Slurm
# needed): the report's forms and files, tenants from a tenants file, and bad input.
#
# Usage: shadow_trace_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: report, tenants, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup shadow "$@"

# Two nodes of 4 GPUs under one leaf.
cat >"$work/cluster.yaml" <<'YAML'
site: s
spines:
  - name: sp
    leaves:
      - name: l
        nodes:
          - {name: tp1, gpus: 4, gpu_model: H100, cpus: 16, memory_gib: 64}
          - {name: tp2, gpus: 4, gpu_model: H100, cpus: 16, memory_gib: 64}
YAML
# Slurm ran job 2 after job 1 on tp1 although tp2 was idle; job 3 (ads) waited for both.
cat >"$work/jobs.csv" <<'CSV'
id,tenant,submit,gpus,start,end,nodes
1,vision,1000,4,1000,1100,tp1
2,speech,1000,4,1100,1200,tp1
3,ads,1000,2,1200,1300,tp2
CSV
cat >"$work/tenants.yaml" <<'YAML'
orgs:
  - name: all
    tenants:
      - name: vision
        quota: {H100: {guaranteed_gpus: 6, borrowing_limit_gpus: 0}}
      - name: speech
        quota: {H100: {guaranteed_gpus: 0, borrowing_limit_gpus: 0}}
      - name: ads
        quota: {H100: {guaranteed_gpus: 2, borrowing_limit_gpus: 0}}
YAML
shadow() {
  "$tidepool" shadow --trace "$work/jobs.csv" --cluster "$work/cluster.yaml" "$@"
}

case "$case_name" in
  report)
    shadow --out "$work/files" >"$work/out"
    expect_out "Shadow of observed" "3 jobs, 3 compared" "on 2 nodes / 8 GPUs" \
      "Tenants: derived from the stream"
    for file in report.txt report.json jobs.csv; do
      [[ -s "$work/files/$file" ]] || fail "--out has no $file"
    done
    shadow --format json >"$work/out"
    # Derived tenants: jobs 1 and 2 start at once on the two nodes, job 3 when job 1 ends.
    [[ $(json '[j["tidepool"]["start"] for j in d["jobs"]]') == "[1000, 1000, 1100]" ]] ||
      fail "the starts should be 1000, 1000, 1100: $(json 'd["jobs"]')"
    [[ $(json 'd["tenants_file"]') == "None" ]] || fail "tenants_file should be null"
    [[ $(json 'd["summary"]["observed"]["wait_max_s"]') == "200" ]] ||
      fail "Slurm's longest wait is 200 s: $(json 'd["summary"]')"
    ;;
  tenants)
    shadow --tenants "$work/tenants.yaml" --format json >"$work/out"
    [[ $(json 'd["tenants_file"]') == "$work/tenants.yaml" ]] || fail "tenants_file not named"
    # speech is guaranteed nothing and may borrow nothing: Tidepool never starts its job.
    [[ $(json '[j["tidepool"]["start"] for j in d["jobs"]]') == "[1000, None, 1000]" ]] ||
      fail "speech's job should not start: $(json 'd["jobs"]')"
    shadow --tenants "$work/tenants.yaml" --summary-only >"$work/out"
    expect_out "Tenants: from $work/tenants.yaml"
    ;;
  bad-input)
    grep -v ads "$work/tenants.yaml" | grep -v "guaranteed_gpus: 2" >"$work/no-ads.yaml"
    expect_error "job 3" "tenant 'ads' unknown: it is not in the tenants file" -- \
      shadow --trace "$work/jobs.csv" --cluster "$work/cluster.yaml" \
      --tenants "$work/no-ads.yaml"
    # Quotas of a model the pool lacks only: nothing could ever start.
    sed 's/H100/A100/' "$work/tenants.yaml" >"$work/a100.yaml"
    expect_error "--tenants" "guarantees no GPU of the pool's models (H100)" "name A100" -- \
      shadow --trace "$work/jobs.csv" --cluster "$work/cluster.yaml" --tenants "$work/a100.yaml"
    printf 'orgs: 5\n' >"$work/bad.yaml"
    expect_error "--tenants" -- shadow --trace "$work/jobs.csv" --cluster "$work/cluster.yaml" \
      --tenants "$work/bad.yaml"
    expect_error "--tenants" -- shadow --trace "$work/jobs.csv" --cluster "$work/cluster.yaml" \
      --tenants "$work/missing.yaml"
    expect_error "--cluster" -- shadow --trace "$work/jobs.csv"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS: $case_name"
