#!/usr/bin/env bash
# End-to-end checks of `tidepool plan capacity` on the shipped 2000-job slice of the Philly trace
# (data/philly/philly-2017-09-10-first-2000.csv) with the fast fifo-firstfit policy: the answer
# meets the target and a pool one node smaller was probed and misses it, in both formats; and
# input errors.
#
# Usage: plan_capacity_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: answer, json, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup plan-capacity "$@"

cluster=$source_dir/data/clusters/philly-512.yaml
tenants=$source_dir/data/tenants/philly-2017-09-10.yaml
jobs=$source_dir/data/philly/philly-2017-09-10-first-2000.csv
common=(plan capacity --cluster "$cluster" --tenants "$tenants" --jobs "$jobs"
  --policy fifo-firstfit)

# check_json FILE TARGET_S: the answer meets the target with every job started, the largest miss
# is one node smaller, and both were probed.
check_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
target = int(sys.argv[2])
answer, below = out["answer"], out["largest_missing"]
assert answer is not None, "no answer"
assert answer["meets"] and answer["p95_queue_s"] <= target, answer
assert answer["never_started"] == 0, answer
assert below is not None, "no miss below the answer"
assert not below["meets"], below
assert below["nodes"] == answer["nodes"] - 1, (below["nodes"], answer["nodes"])
assert below["p95_queue_s"] > target or below["never_started"] > 0, below
probes = out["probes"]
sizes = [p["nodes"] for p in probes]
assert len(sizes) == len(set(sizes)), "a size was probed twice"
assert answer in probes and below in probes
for p in probes:
    assert p["meets"] == (p["never_started"] == 0 and p["p95_queue_s"] <= target), p
    assert p["gpus"] == 8 * p["nodes"], p
    assert p["leaves"] == (p["nodes"] + 7) // 8, p
    if p["nodes"] < answer["nodes"]:
        assert not p["meets"], ("a smaller pool meets", p)
print("answer", answer["gpus"], "GPUs; miss at", below["gpus"], "GPUs;", len(probes), "probes")
PY
}

case "$case_name" in
  answer)
    "$tidepool" "${common[@]}" --target-p95-queue 30m >"$work/out" 2>"$work/err" ||
      fail "plan capacity failed: $(cat "$work/err")"
    cat "$work/out"
    grep -Eq '^round +nodes +GPUs +leaves +p95 queue \(h\) +avg queue \(h\) +never started +meets +wall \(s\)$' \
      "$work/out" || fail "the probe table's header"
    grep -Eq '^smallest pool meeting p95 queue <= 30m: [0-9]+ GPUs \([0-9]+ nodes of 8 P100 on [0-9]+ leaves\): p95 queue ' \
      "$work/out" || fail "the answer line"
    grep -q 'largest probed that misses: ' "$work/out" || fail "the largest miss"
    grep -Eq '^search: [0-9]+ probes in [0-9]+ rounds' "$work/out" || fail "the search line"
    grep -q '^round 1: ' "$work/err" || fail "progress lines on stderr"
    # The same search as JSON with one thread: the same answer (probes may differ).
    "$tidepool" "${common[@]}" --target-p95-queue 1800 --threads 1 -o json >"$work/json"
    check_json "$work/json" 1800
    answer=$(grep -Eo 'meeting p95 queue <= 30m: [0-9]+ GPUs' "$work/out" | grep -Eo '[0-9]+ GPUs')
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["answer"]["gpus"], "GPUs")' \
      "$work/json" | grep -qx "$answer" || fail "one thread and two disagree"
    ;;
  json)
    # 20% more load and three threads: a larger answer than without growth.
    "$tidepool" "${common[@]}" --target-p95-queue 30m -o json >"$work/base"
    "$tidepool" "${common[@]}" --target-p95-queue 30m --growth 0.2 --threads 3 -o json \
      >"$work/grown"
    check_json "$work/base" 1800
    check_json "$work/grown" 1800
    python3 - "$work/base" "$work/grown" <<'PY'
import json, sys
base, grown = (json.load(open(p)) for p in sys.argv[1:])
assert grown["growth"] == 0.2 and base["growth"] == 0, (base["growth"], grown["growth"])
assert grown["answer"]["gpus"] >= base["answer"]["gpus"], "more load, a smaller pool"
assert base["jobs"] == 2000
PY
    # A ceiling below the answer: no answer, said plainly.
    "$tidepool" "${common[@]}" --target-p95-queue 1m --max-gpus 64 >"$work/out" 2>"$work/err" ||
      fail "a search that reaches --max-gpus is not an error: $(cat "$work/err")"
    cat "$work/out"
    grep -q 'no pool up to 64 GPUs (8 nodes, --max-gpus) meets p95 queue <= 1m' "$work/out" ||
      fail "the message when --max-gpus misses"
    "$tidepool" "${common[@]}" --target-p95-queue 1m --max-gpus 64 -o json >"$work/none"
    python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); assert o["answer"] is None' \
      "$work/none" || fail "JSON answer should be null"
    ;;
  bad-input)
    expect_error "--target-p95-queue" "required" -- plan capacity --cluster "$cluster" \
      --tenants "$tenants" --jobs "$jobs"
    expect_error "error: --target-p95-queue: 'soon' is not a positive time" -- "${common[@]}" \
      --target-p95-queue soon
    expect_error "error: --target-p95-queue: '0h' is not a positive time" -- "${common[@]}" \
      --target-p95-queue 0h
    expect_error "error: --growth: '-0.1' is negative" -- "${common[@]}" --target-p95-queue 1h \
      --growth -0.1
    expect_error "error: --growth: '1000' is too large" -- "${common[@]}" --target-p95-queue 1h \
      --growth 1000
    expect_error "error: --growth: 'lots' is not a number" -- "${common[@]}" \
      --target-p95-queue 1h --growth lots
    expect_error "error: --policy: " -- plan capacity --cluster "$cluster" --tenants "$tenants" \
      --jobs "$jobs" --target-p95-queue 1h --policy nope
    expect_error "error: --threads: must be 1..64, got 0" -- "${common[@]}" \
      --target-p95-queue 1h --threads 0
    expect_error "error: --max-gpus: 4 is less than one node of the template (8 GPUs)" -- \
      "${common[@]}" --target-p95-queue 1h --max-gpus 4
    expect_error "error: --limit-jobs: must not be negative" -- "${common[@]}" \
      --target-p95-queue 1h --limit-jobs -1
    expect_error "error: --output: unknown format 'csv'" -- "${common[@]}" \
      --target-p95-queue 1h -o csv
    expect_error "--nodes: give the pool with --nodes or --cluster" -- plan capacity \
      --tenants "$tenants" --jobs "$jobs" --target-p95-queue 1h
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
