#!/usr/bin/env bash
# End-to-end checks of the internal market on the server (`market:` in its config): tidepool price
# and tidepool bill against a real `tidepool server` on 127.0.0.1, on the example cluster and
# tenants, with a market file written here (prices made large so that seconds of running show).
#
# Usage: market_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: price, bill, restart, budget, max-cost, errors.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup market "$@"

client_test_setup

# A GPU-hour of H100 costs about 1000 USD here (a flat price: no utilisation or time multiplier).
cat >"$work/market.yaml" <<'YAML'
currency: USD
models:
  H100: {purchase_price: 24000000, amortisation_months: 48, power_watts: 1000,
         electricity_per_kwh: 0.12, operations_per_year: 3000, target_utilisation: 0.7}
  A100: {purchase_price: 12000000, power_watts: 500, electricity_per_kwh: 0.12,
         operations_per_year: 2000}
prices: {period: 1h, utilisation_curve: [[0, 1], [1, 1]]}
budgets:
  vision: {quarterly: 1000000}
YAML

cat >"$work/train.yaml" <<'YAML'
name: train
tenant: vision
gpus_per_task: 8
gpu_model: H100
command: [python, train.py]
preemptible: false
labels: {project: cats}
YAML

today=$(date -u +%F)

# run_job: a job of vision runs for about two seconds and is cancelled; prints its id.
run_job() {
  local id
  id=$(submit "$work/train.yaml")
  wait_state "$id" running
  sleep 2
  "$tidepool" cancel "$id" >/dev/null 2>"$work/err" || fail "cancel failed: $(cat "$work/err")"
  echo "$id"
}

case "$case_name" in
  price)
    start_server "market: $work/market.yaml"
    tp price
    expect_out "Prices in force per GPU-hour (USD)" "MODEL" "STANDARD" "PREEMPTIBLE" "H100" "A100"
    tp price -o json
    [[ $(json 'd["currency"]') == USD ]] || fail "currency"
    [[ $(json 'len(d["models"])') == 2 ]] || fail "two models expected"
    [[ $(json 'abs(d["models"][0]["per_gpu_hour"]["preemptible"] - 0.6 * d["models"][0]["per_gpu_hour"]["standard"]) < 1e-6') == True ]] ||
      fail "preemptible should be 0.6 x standard"
    [[ $(json 'd["models"][0]["until"] - d["models"][0]["from"]') == 3600 ]] || fail "a 1h period"
    curl -sf "$TIDEPOOL_SERVER/metrics" >"$work/metrics" || fail "GET /metrics failed"
    grep -q 'tidepool_price_credits_per_gpu_hour{class="standard",model="H100"}' "$work/metrics" ||
      fail "no price metric"
    ;;

  bill)
    start_server "market: $work/market.yaml"
    id=$(run_job)
    tp bill --tenant vision --from "$today" --to "$today"
    expect_out "Bill of tenant vision, $today to $today (USD), by team" "default" "TOTAL"
    tp bill --tenant vision --from "$today" --to "$today" -o json
    [[ $(json 'd["total"]["charges"] > 1') == True ]] || fail "the job should have been charged"
    [[ $(json 'd["groups"][0]["group"]') == default ]] || fail "team group"
    tp bill --tenant vision --from "$today" --to "$today" --by label -o csv
    head -1 "$work/out" | grep -qx "label,gpu_hours,charges,credits,net,currency" ||
      fail "csv header"
    expect_out "project=cats,"
    tp bill --tenant vision --from "$today" --to "$today" --by job
    expect_out "$id train"
    tp bill --tenant vision --from "$today" --to "$today" --by model
    expect_out "H100"
    curl -sf "$TIDEPOOL_SERVER/metrics" >"$work/metrics" || fail "GET /metrics failed"
    grep -q 'tidepool_tenant_charged_credits_total{tenant="vision"}' "$work/metrics" ||
      fail "no charges metric"
    grep -q 'tidepool_tenant_budget_spend_ratio{tenant="vision"}' "$work/metrics" ||
      fail "no budget metric"
    if command -v promtool >/dev/null 2>&1; then
      promtool check metrics <"$work/metrics" || fail "promtool check metrics"
    fi
    # Days with nothing: an empty bill.
    tp bill --tenant vision --from 2020-01-01 --to 2020-01-31 -o json
    [[ $(json 'd["total"]["charges"]') == 0.0 ]] || fail "no charges in 2020"
    ;;

  restart)
    start_server "market: $work/market.yaml"
    run_job >/dev/null
    tp bill --tenant vision --from "$today" --to "$today" -o json
    before=$(json 'd["total"]')
    stop_server
    start_server "market: $work/market.yaml"
    tp bill --tenant vision --from "$today" --to "$today" -o json
    [[ $(json 'd["total"]') == "$before" ]] || fail "the bill changed over a restart"
    ;;

  budget)
    # A budget of 1 USD is spent in a second; postings every second check it.
    sed 's/  vision: {quarterly: 1000000}/  vision: {quarterly: 1}/' "$work/market.yaml" \
      >"$work/small.yaml"
    start_server "market: $work/small.yaml" "ledger_posting_interval: 1s"
    run_job >/dev/null
    sleep 2
    id=$(submit "$work/train.yaml")
    sleep 2
    tp why "$id"
    expect_out "budget exhausted: tenant vision spent"
    curl -sf -H "Authorization: Bearer $TIDEPOOL_TOKEN" "$TIDEPOOL_SERVER/v1/events?since=0&timeout=1s" \
      >"$work/events" || fail "GET /v1/events failed"
    grep -q '"kind":"budget.alert"' "$work/events" || fail "no budget.alert event"
    grep -q '"kind":"budget.exhausted"' "$work/events" || fail "no budget.exhausted event"
    ;;

  max-cost)
    # 8 H100 cost about 2.3 USD a second here: a cap of 3 USD stops the job within seconds.
    start_server "market: $work/market.yaml"
    printf 'max_cost: 3\n' >>"$work/train.yaml"
    id=$(submit "$work/train.yaml")
    wait_state "$id" failed
    tp why "$id"
    expect_out "reaching its max_cost of 3.00 USD"
    ;;

  errors)
    start_server "market: $work/market.yaml"
    expect_error "--from: must be a date like" -- bill --tenant vision --from 2026-13-01 --to 2026-12-01
    expect_error "to: must not be before from" -- \
      bill --tenant vision --from 2026-12-02 --to 2026-12-01
    expect_error "tenant: no tenant 'nobody'" -- bill --tenant nobody --from "$today" --to "$today"
    stop_server
    # A budget for a tenant the tenants file lacks is refused at start.
    sed 's/  vision: {quarterly: 1000000}/  visoin: {quarterly: 5}/' "$work/market.yaml" \
      >"$work/typo.yaml"
    cat >"$work/server.yaml" <<YAML
cluster: $source_dir/data/clusters/example.yaml
tenants: $source_dir/data/tenants/example.yaml
database: $work/typo.db
market: $work/typo.yaml
YAML
    expect_error "budgets.visoin" "no tenant 'visoin'" -- server --config "$work/server.yaml" \
      --listen 127.0.0.1:0
    # Without a market, the commands say how to get one.
    start_server
    expect_error "market:" "market: PATH" -- price
    ;;

  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "PASS: market_cli $case_name"
