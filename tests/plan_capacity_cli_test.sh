#!/usr/bin/env bash
# End-to-end checks of `tidepool plan capacity` on the shipped 2000-job slice of the Philly trace
# (data/philly/philly-2017-09-10-first-2000.csv) with the fast fifo-firstfit policy: the answer
# meets the target and a pool one node smaller was probed and misses it, in both formats; the same
# from the job history of a real `tidepool server` on 127.0.0.1 (--from-server); and input errors.
#
# Usage: plan_capacity_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: answer, json, server, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup plan-capacity "$@"

client_test_setup

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
  server)
    # The example pool and tenants (start_server's): vision may hold 32 H100 at most (no
    # borrowing), so with its 32-GPU job running its later jobs wait.
    start_server
    spec() { # spec NAME TENANT TASKS GPUS_PER_TASK [MORE_YAML]: writes $work/NAME.yaml
      printf 'name: %s\ntenant: %s\ntasks: %s\ngpus_per_task: %s\ngpu_model: H100\ncommand: [sh, run.sh]\n%s' \
        "$1" "$2" "$3" "$4" "${5:-}" >"$work/$1.yaml"
    }
    spec finished vision 1 8
    spec stopped vision 1 8
    spec wide vision 4 8
    spec ranker search 1 4 $'queue: ranking\n'
    spec waits vision 1 8 $'runtime_estimate: 1h\n'
    spec unknown vision 1 8
    # One job succeeds after about a second (reported as its agent would), one is cancelled
    # while it runs; two keep running; two wait, one of them without a runtime estimate.
    finished_id=$(submit "$work/finished.yaml")
    wait_state "$finished_id" running
    sleep 1
    curl -sf -X POST -H "Authorization: Bearer $TIDEPOOL_TOKEN" \
      -H 'Content-Type: application/json' -d '{"state": "succeeded", "exit_code": 0}' \
      "$TIDEPOOL_SERVER/v1/jobs/$finished_id/status" >/dev/null || fail "status report refused"
    wait_state "$finished_id" succeeded
    stopped_id=$(submit "$work/stopped.yaml")
    wait_state "$stopped_id" running
    sleep 1
    "$tidepool" cancel "$stopped_id" >/dev/null || fail "cancel $stopped_id failed"
    wide_id=$(submit "$work/wide.yaml")
    wait_state "$wide_id" running
    ranker_id=$(submit "$work/ranker.yaml")
    wait_state "$ranker_id" running
    waits_id=$(submit "$work/waits.yaml")
    unknown_id=$(submit "$work/unknown.yaml")
    sleep 1
    [[ $("$tidepool" job "$waits_id" -o json | python3 -c \
      'import json, sys; print(json.load(sys.stdin)["state"])') == pending ]] ||
      fail "job $waits_id should wait for vision's quota"

    plan=(plan capacity --cluster "$source_dir/data/clusters/example.yaml"
      --tenants "$source_dir/data/tenants/example.yaml" --from-server --policy fifo-firstfit)
    "$tidepool" "${plan[@]}" --target-p95-queue 1h >"$work/out" 2>"$work/err" ||
      fail "plan capacity --from-server failed: $(cat "$work/err")"
    cat "$work/err" "$work/out"
    grep -qF "plan capacity: 5 jobs of the server at $TIDEPOOL_SERVER submitted in the last 30d, 2 still running (run time up to now), 1 never ran (run time from runtime_estimate, else max_runtime); 1 job left out: never ran, no runtime_estimate or max_runtime (job $unknown_id)" \
      "$work/err" || fail "the summary of the server's jobs on stderr"
    grep -Eq '^smallest pool meeting p95 queue <= 1h: [0-9]+ GPUs \([0-9]+ nodes? .* on [0-9]+ lea(f|ves)\): p95 queue ' \
      "$work/out" || fail "the answer line"
    # The same as JSON, with --server and --token given as flags and the whole history.
    env -u TIDEPOOL_SERVER -u TIDEPOOL_TOKEN "$tidepool" "${plan[@]}" --target-p95-queue 1h \
      --server "$TIDEPOOL_SERVER" --token "$TIDEPOOL_TOKEN" --since 0 -o json >"$work/json" \
      2>"$work/err" || fail "plan capacity --from-server -o json failed: $(cat "$work/err")"
    python3 - "$work/json" "$TIDEPOOL_SERVER" "$unknown_id" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
source = out["source"]
assert source["kind"] == "server" and source["server"] == sys.argv[2], source
assert source["since_s"] == 0 and source["older"] == 0, source
assert source["running"] == 2 and source["never_ran"] == 1, source
assert source["unknown_runtime"] == [int(sys.argv[3])], source
assert out["jobs"] == 5, out["jobs"]
answer, below = out["answer"], out["largest_missing"]
assert answer is not None and answer["meets"] and answer["never_started"] == 0, answer
assert answer["p95_queue_s"] <= 3600 and answer["finished"] == 5, answer
assert below is None or (not below["meets"] and below["nodes"] == answer["nodes"] - 1), below
print("answer", answer["gpus"], "GPUs")
PY
    # A window with none of the jobs.
    sleep 2
    expect_error "error: --from-server: the server at $TIDEPOOL_SERVER has no job to plan from submitted in the last 1s; 6 older jobs left out (--since)" \
      -- "${plan[@]}" --target-p95-queue 1h --since 1s
    # Jobs of a tenant the tenants file lacks: named with the job.
    printf 'orgs:\n  - name: o\n    tenants:\n      - name: vision\n' >"$work/tenants.yaml"
    expect_error "error: --from-server: the jobs of the server at $TIDEPOOL_SERVER: job $ranker_id tenant: 'search' is not a tenant of the tenants file" \
      -- plan capacity --cluster "$source_dir/data/clusters/example.yaml" \
      --tenants "$work/tenants.yaml" --from-server --target-p95-queue 1h
    ;;
  bad-input)
    expect_error "error: --jobs: give the jobs with --jobs TRACE or --from-server, not both" -- \
      "${common[@]}" --target-p95-queue 1h --from-server
    expect_error "error: --jobs: give the jobs with --jobs TRACE, or --from-server" -- \
      plan capacity --cluster "$cluster" --tenants "$tenants" --target-p95-queue 1h
    expect_error "error: --since: only with --from-server" -- "${common[@]}" \
      --target-p95-queue 1h --since 30d
    expect_error "error: --server: only with --from-server" -- "${common[@]}" \
      --target-p95-queue 1h --server http://127.0.0.1:1
    expect_error "error: --since: 'lately' is not a time span" -- plan capacity \
      --cluster "$cluster" --tenants "$tenants" --target-p95-queue 1h --from-server --since lately
    expect_error "error: cannot reach the Tidepool server at http://127.0.0.1:1" -- plan capacity \
      --cluster "$cluster" --tenants "$tenants" --target-p95-queue 1h --from-server \
      --server http://127.0.0.1:1
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
