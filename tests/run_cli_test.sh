#!/usr/bin/env bash
# End-to-end checks of `tidepool sim run` on the Philly excerpt shipped in data/philly (the first
# 2,000 jobs of the trace) and the 512-GPU Philly cluster shape.
#
# Usage: run_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: outputs, determinism, compare, inference-loan, market, services, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup run "$@"
cluster="$source_dir/data/clusters/philly-512.yaml"
jobs="$source_dir/data/philly/philly-2017-09-10-first-2000.csv"

# The tenants of the excerpt: one per virtual cluster, guaranteed its share of the GPU time.
"$tidepool" sim tenants-from-trace --jobs "$jobs" --format philly --cluster "$cluster" \
  --out "$work/tenants.yaml" >/dev/null
tenants="$work/tenants.yaml"

# run_sim OUT ARGS...: tidepool sim run on the excerpt, stdout to OUT.stdout, stderr to OUT.stderr.
run_sim() {
  local out=$1
  shift
  "$tidepool" sim run --cluster "$cluster" --jobs "$jobs" --format philly --tenants "$tenants" \
    --out "$out" "$@" >"$out.stdout" 2>"$out.stderr" ||
    fail "sim run $* failed: $(cat "$out.stderr")"
}

# check_summary FILE POLICY: summary.json has every documented key and names its policy.
check_summary() {
  python3 - "$1" "$2" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
keys = """jobs finished never_started avg_queue_s p50_queue_s p95_queue_s p99_queue_s avg_jct_s
makespan_s gpu_allocation_avg comm_overhead_share est_mfu preemptions lost_gpu_hours_share
min_tenant_guarantee_ratio min_guarantee_tenant wall_seconds predictor_median_abs_error_s
baseline_median_abs_error_s backfilled pending_seconds class_gpu_hours_in_horizon
inference_max_wait_in_window_s loans policy cost""".split()
missing = [k for k in keys if k not in summary]
assert not missing, f"missing keys: {missing}"
assert summary["policy"] == sys.argv[2], summary["policy"]
assert set(summary["pending_seconds"]) == {"not-considered", "quota", "capacity", "topology",
                                           "reservation", "head-of-line", "window", "budget"}
assert set(summary["class_gpu_hours_in_horizon"]) == {"training", "inference", "dev", "batch"}
assert summary["jobs"] == 2000 and summary["finished"] + summary["never_started"] <= 2000
ratios = summary["tenant_guarantee_ratio"]
assert ratios and abs(min(ratios.values()) - summary["min_tenant_guarantee_ratio"]) < 1e-12, ratios
PY
}

case "$case_name" in
  outputs)
    run_sim "$work/out" --policy fifo-firstfit,tidepool --limit-jobs 2000
    cat "$work/out.stdout"
    for policy in fifo-firstfit tidepool; do
      dir="$work/out/$policy"
      for file in jobs.csv timeline.csv summary.json; do
        [[ -s "$dir/$file" ]] || fail "$policy/$file missing"
      done
      [[ $(wc -l <"$dir/jobs.csv") -eq 2001 ]] || fail "$policy/jobs.csv should have 2000 jobs"
      [[ $(head -1 "$dir/jobs.csv") == "job,name,tenant,class,gpus,submit_s,start_s,end_s,queue_s,preemptions,lost_gpu_seconds,nodes,leaves,slowdown,comm_overhead,est_mfu,predicted_runtime_s,main_pending_reason" ]] ||
        fail "$policy/jobs.csv header"
      grep -q '^0,philly-0,7f04ca,training,8,0,' "$dir/jobs.csv" || fail "$policy: first job row"
      head -1 "$dir/timeline.csv" | grep -q '^time_s,gpus_.*,allocated_gpus,queued,running,free_gpus,fragmented_gpus,fragmentation$' ||
        fail "$policy/timeline.csv header"
      [[ $(wc -l <"$dir/timeline.csv") -gt 2 ]] || fail "$policy/timeline.csv has no samples"
      check_summary "$dir/summary.json" "$policy" || fail "$policy/summary.json"
      grep -q "policy $policy: " "$work/out.stderr" || fail "no progress line for $policy"
    done
    grep -q '^figure  *fifo-firstfit  *tidepool$' "$work/out.stdout" || fail "table header"
    for row in "jobs" "avg queue (h)" "p99 queue (h)" "GPU allocation (%)" "est. MFU" \
      "min tenant guarantee ratio" "runtime MAE (h): predictor" "pending (h): quota" "wall (s)"; do
      grep -qF "$row " "$work/out.stdout" || fail "table row '$row' missing"
    done
    ;;
  determinism)
    run_sim "$work/a" --policy all --limit-jobs 500
    run_sim "$work/b" --policy all --limit-jobs 500
    for policy in fifo-firstfit quota-borrow tiresias tidepool; do
      [[ $(wc -l <"$work/a/$policy/jobs.csv") -eq 501 ]] || fail "--limit-jobs 500: $policy"
      for file in jobs.csv timeline.csv; do
        cmp "$work/a/$policy/$file" "$work/b/$policy/$file" || fail "$policy/$file differs"
      done
      # Everything but the wall time.
      diff <(grep -v wall_seconds "$work/a/$policy/summary.json") \
        <(grep -v wall_seconds "$work/b/$policy/summary.json") || fail "$policy/summary.json"
    done
    ;;
  compare)
    # The issue's comparison on the excerpt: tidepool against a plain FIFO/first-fit partition.
    run_sim "$work/out" --policy fifo-firstfit,tidepool
    python3 - "$work/out/fifo-firstfit/summary.json" "$work/out/tidepool/summary.json" <<'PY' ||
import json, sys
fifo, tide = (json.load(open(p)) for p in sys.argv[1:3])
assert tide["avg_queue_s"] <= fifo["avg_queue_s"] / 3, (tide["avg_queue_s"], fifo["avg_queue_s"])
assert tide["p95_queue_s"] <= fifo["p95_queue_s"] / 2, (tide["p95_queue_s"], fifo["p95_queue_s"])
assert tide["avg_jct_s"] <= 0.7 * fifo["avg_jct_s"], (tide["avg_jct_s"], fifo["avg_jct_s"])
assert tide["comm_overhead_share"] <= fifo["comm_overhead_share"] / 2
assert tide["comm_overhead_share"] < 0.12, tide["comm_overhead_share"]
assert tide["min_tenant_guarantee_ratio"] >= 0.95, tide["min_tenant_guarantee_ratio"]
assert tide["lost_gpu_hours_share"] <= 0.02, tide["lost_gpu_hours_share"]
assert tide["predictor_median_abs_error_s"] < tide["baseline_median_abs_error_s"]
PY
      fail "tidepool does not beat fifo-firstfit as the issue asks"
    ;;
  inference-loan)
    # 32 inference GPUs at the peak beside the trace, protected 08:00-24:00, and a loan of 64 GPUs
    # to tenant 6214e9 from day 2 for 6 hours.
    run_sim "$work/out" --policy tidepool --inference 32:4 \
      --window inference:08:00-24:00:32 --loan 6214e9:64:2d:6h
    cat "$work/out.stdout"
    grep -q "inference replicas" "$work/out.stderr" || fail "no inference replicas"
    python3 - "$work/out/tidepool/summary.json" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["class_gpu_hours_in_horizon"]["inference"] > 0, s["class_gpu_hours_in_horizon"]
# Replicas start within a minute inside their window; trace jobs are counted apart from them.
assert 0 <= s["inference_max_wait_in_window_s"] <= 60, s["inference_max_wait_in_window_s"]
assert s["jobs"] == 2000, s["jobs"]
[loan] = s["loans"]
assert loan["tenant"] == "6214e9" and loan["gpus"] == 64, loan
assert loan["start_s"] == 172800 and loan["duration_s"] == 21600, loan
# Served within 5 minutes, all of it returned at the end.
assert loan["served_after_s"] is not None and loan["served_after_s"] <= 300, loan
assert loan["end_s"] == 172800 + 21600 and loan["held_after_end_gpus"] == 0, loan
PY
    grep -q ',inference-0,inference,inference,1,0,' "$work/out/tidepool/jobs.csv" ||
      fail "first inference replica row"
    grep -q ',loan-1,6214e9,training,64,172800,' "$work/out/tidepool/jobs.csv" || fail "loan row"
    head -1 "$work/out/tidepool/timeline.csv" | grep -q ',gpus_inference,' ||
      fail "timeline lacks the inference tenant"
    ;;
  market)
    # The example market: every job charged, the ledger balanced, costs per tenant.
    run_sim "$work/out" --policy fifo-firstfit,tidepool --market "$source_dir/data/market/example.yaml"
    for policy in fifo-firstfit tidepool; do
      [[ -s $work/out/$policy/costs.csv ]] || fail "$policy/costs.csv is missing"
      head -1 "$work/out/$policy/costs.csv" | grep -q '^tenant,charges,lending_credits,net,' ||
        fail "$policy/costs.csv has no header"
      python3 - "$work/out/$policy/summary.json" <<'PY' || fail "$policy/summary.json cost"
import json, sys
cost = json.load(open(sys.argv[1]))["cost"]
assert cost["ledger_balanced"] is True, cost
assert float(cost["charged"]) > 0 and cost["useful_gpu_hours"] > 0, cost
total = sum(float(t["charges"]) for t in cost["tenants"].values())
assert abs(total - float(cost["charged"])) < 0.01 * len(cost["tenants"]), (total, cost["charged"])
PY
    done
    grep -q 'charged per useful GPU-hour' "$work/out.stdout" || fail "no cost rows in the table"
    # A burst sweep: one run per threshold, the trade-off table.
    run_sim "$work/sweep" --policy tidepool --market "$source_dir/data/market/example.yaml" \
      --burst-sweep off,1h
    grep -q 'Burst sweep, policy tidepool' "$work/sweep.stdout" || fail "no sweep table"
    [[ -d $work/sweep/tidepool-burst-1h && -d $work/sweep/tidepool-burst-off ]] ||
      fail "the sweep's folders are missing"
    expect_error "--burst-threshold" "needs --market" -- sim run --cluster "$cluster" --jobs "$jobs" \
      --tenants "$tenants" --policy tidepool --out "$work/x" --burst-threshold 1h
    expect_error "--burst-sweep" "'soon'" -- sim run --cluster "$cluster" --jobs "$jobs" \
      --tenants "$tenants" --policy tidepool --out "$work/x" \
      --market "$source_dir/data/market/example.yaml" --burst-sweep off,soon
    ;;
  services)
    # The example services over the excerpt's last two days (its busiest), a window by day.
    run_sim "$work/sv" --policy tidepool --services "$source_dir/data/services/example.yaml" \
      --services-from 19d --until 21d --window inference:06:00-24:00:48
    grep -q "^Services under tidepool" "$work/sv.stdout" || fail "no services table"
    grep -q "^Training GPU-hours outside tidal windows" "$work/sv.stdout" ||
      fail "no training comparison"
    python3 - "$work/sv/tidepool" <<'PY'
import csv, json, sys
folder = sys.argv[1]
summary = json.load(open(f"{folder}/summary.json"))
services = {s["name"]: s for s in summary["services"]}
assert set(services) == {"chat", "embed"}, services.keys()
for name, s in services.items():
    assert abs(s["hours"] - 48) < 1e-9, (name, s["hours"])
    assert s["above_target_share"] < 0.01, (name, s["above_target_share"])
    assert 1.0 <= s["replica_hours_over_oracle"] < 1.3, (name, s["replica_hours_over_oracle"])
rows = list(csv.DictReader(open(f"{folder}/services.csv")))
assert len(rows) == 2 * 48 * 360, len(rows)
# Within the example's replica range (2..64) at every tick.
assert all(2 <= int(r["wanted"]) <= 64 and 2 <= int(r["live"]) <= 64 for r in rows)
replicas = [r for r in csv.DictReader(open(f"{folder}/jobs.csv")) if r["name"].startswith("chat-")]
assert replicas and all(r["class"] == "inference" for r in replicas), len(replicas)
assert summary["tenant_training_gpu_hours_outside_windows"], summary.keys()
PY
    ;;
  bad-input)
    common=(sim run --cluster "$cluster" --jobs "$jobs" --tenants "$tenants" --out "$work/x")
    printf 'services:\n  - {name: a, tenant: t, replica: {service_time: 1s}, rate: {trough: 1, peak: 2}}\n' \
      >"$work/services.yaml"
    expect_error "--services" "services[0]" "target" -- "${common[@]}" --policy tidepool \
      --services "$work/services.yaml"
    expect_error "--services-from" -- "${common[@]}" --policy tidepool \
      --services "$source_dir/data/services/example.yaml" --services-from 30d --until 21d
    expect_error "--until" -- "${common[@]}" --policy tidepool --until soon
    expect_error "--policy" "unknown policy 'nope'" "fifo-firstfit" "tidepool" -- \
      "${common[@]}" --policy fifo-firstfit,nope
    expect_error "--jobs" "missing.csv" -- sim run --cluster "$cluster" --jobs "$work/missing.csv" \
      --tenants "$tenants" --policy tidepool --out "$work/x"
    expect_error "--tenants" "missing.yaml" -- sim run --cluster "$cluster" --jobs "$jobs" \
      --tenants "$work/missing.yaml" --policy tidepool --out "$work/x"
    expect_error "--format" "openb" -- "${common[@]}" --policy tidepool --format openb
    expect_error "--window" -- "${common[@]}" --policy tidepool --window inference:08:00-25:00:64
    expect_error "--window" -- "${common[@]}" --policy tidepool --window nonsense
    expect_error "--loan" "6214e9:64:2x:6h" -- "${common[@]}" --policy tidepool \
      --loan 6214e9:64:2x:6h
    expect_error "--loan" -- "${common[@]}" --policy tidepool --loan 6214e9:64
    expect_error "--loan" "duration" -- "${common[@]}" --policy tidepool --loan 6214e9:64:0:0
    expect_error "--loan" "unknown tenant 'nobody'" "6214e9" -- "${common[@]}" --policy tidepool \
      --loan nobody:64:0:1h
    expect_error "--inference" -- "${common[@]}" --policy tidepool --inference lots
    expect_error "--limit-jobs" -- "${common[@]}" --policy tidepool --limit-jobs -1
    # A tenants file without the trace's teams.
    printf 'orgs:\n  - name: o\n    tenants:\n      - name: someone\n' >"$work/other.yaml"
    expect_error "--jobs" "7f04ca" -- sim run --cluster "$cluster" --jobs "$jobs" \
      --tenants "$work/other.yaml" --policy tidepool --out "$work/x"
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS: $case_name"
