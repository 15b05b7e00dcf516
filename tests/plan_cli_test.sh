#!/usr/bin/env bash
# End-to-end checks of `tidepool plan tco` on a small market file with hand-checked figures and on
# the shipped example (data/market/example.yaml).
#
# Usage: plan_cli_test.sh TIDEPOOL_BINARY SOURCE_DIR CASE
#   CASE is one of: table, csv-json, example, bad-input.
set -euo pipefail

# shellcheck source=cli_test_helpers.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_test_helpers.sh"
cli_test_setup plan "$@"

# H100: 30000 / (48 x 730 h) = 0.856164 + 1 kW x 1.3 x 0.12 = 0.156 + 3000 / 8760 h = 0.342466:
# owned 1.354630 an hour, cost base 1.354630 / 0.7 = 1.935186. Spot per useful hour 2 / 0.9 =
# 2.222222. Break-even 1.354630 / 4 = 33.87% vs on demand, 1.354630 / 2.222222 = 60.96% vs spot.
# OLD: owned 1 an hour (all operations), dearer than its on-demand price even fully used.
cat >"$work/market.yaml" <<'MARKET'
currency: EUR
models:
  H100:
    purchase_price: 30000
    amortisation_years: 4
    power_watts: 1000
    pue: 1.3
    electricity_per_kwh: 0.12
    operations_per_year: 3000
    on_demand_per_hour: 4
    spot_per_hour: 2
  OLD:
    purchase_price: 0.000001
    power_watts: 0
    electricity_per_kwh: 0
    operations_per_year: 8760
    on_demand_per_hour: 0.5
MARKET

case "$case_name" in
  table)
    "$tidepool" plan tco --market "$work/market.yaml" --utilisation 0.5,0.7 >"$work/stdout"
    cat "$work/stdout"
    grep -q "amounts in EUR" "$work/stdout" || fail "the currency label is missing"
    grep -Eq '^H100 +30000.00 +4 years +0.86 +0.16 +0.34 +1.35 +70% +1.94$' "$work/stdout" ||
      fail "H100's cost breakdown"
    grep -Eq '^H100 +50% +2.71 +4.00 +2.22 +spot$' "$work/stdout" || fail "H100 at 50%"
    grep -Eq '^H100 +70% +1.94 +4.00 +2.22 +owned$' "$work/stdout" || fail "H100 at 70%"
    grep -Eq '^OLD +70% +1.43 +0.50 +- +on-demand$' "$work/stdout" || fail "OLD at 70%"
    grep -Eq '^H100 +4.00 +33.87% +2.00 +10% +2.22 +60.96%$' "$work/stdout" ||
      fail "H100's break-even"
    grep -Eq '^OLD +0.50 +never +- +- +- +-$' "$work/stdout" || fail "OLD's break-even"
    grep -q "preemptible work that checkpoints" "$work/stdout" || fail "the spot caveat"
    # --model picks and orders the models.
    "$tidepool" plan tco --market "$work/market.yaml" --model OLD >"$work/old"
    ! grep -q '^H100' "$work/old" || fail "--model OLD should leave H100 out"
    [[ $(grep -c '^OLD ' "$work/old") -eq 6 ]] || fail "OLD: 1 + 4 utilisations + 1 rows"
    ;;
  csv-json)
    "$tidepool" plan tco --market "$work/market.yaml" --utilisation 0.5 -o csv >"$work/csv"
    cat "$work/csv"
    [[ $(wc -l <"$work/csv") -eq 3 ]] || fail "expected a header and one row per model"
    head -1 "$work/csv" | grep -q '^model,currency,purchase_price,' || fail "csv header"
    grep -qx 'H100,EUR,30000,48,1000,1.3,0.12,3000,0.856164,0.156,0.342466,1.35463,0.7,1.935186,4,2,0.1,2.222222,0.338658,0.609584,0.5,2.70926,spot' \
      "$work/csv" || fail "H100's csv row"
    grep -q '^OLD,.*,0.5,,,,never,,0.5,2,on-demand$' "$work/csv" || fail "OLD's csv row"
    "$tidepool" plan tco --market "$work/market.yaml" --utilisation 0.5 -o json >"$work/json"
    cat "$work/json"
    python3 - "$work/json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["currency"] == "EUR", doc
h100, old = doc["models"]
assert h100["model"] == "H100" and h100["cost_base"] == 1.935186, h100
assert h100["per_hour"]["owned"] == 1.35463, h100
assert h100["break_even_on_demand"] == 0.338658 and h100["break_even_spot"] == 0.609584, h100
assert h100["comparison"] == [
    {"utilisation": 0.5, "owned_per_used_hour": 2.70926, "cheapest": "spot"}], h100
assert old["break_even_on_demand"] is None and "spot_per_hour" not in old, old
PY
    ;;
  example)
    "$tidepool" plan tco --market "$source_dir/data/market/example.yaml" >"$work/stdout"
    cat "$work/stdout"
    for model in H100 A100 P100; do
      grep -q "^$model " "$work/stdout" || fail "the example should hold $model"
    done
    ;;
  bad-input)
    expect_error "--market" "required" -- plan tco
    expect_error "no-such.yaml" "cannot open the file" -- plan tco --market "$work/no-such.yaml"
    sed 's/pue: 1.3/pue: 0.9/' "$work/market.yaml" >"$work/bad.yaml"
    expect_error "bad.yaml:7:10 models.H100.pue" "must be 1..5, got 0.9" -- \
      plan tco --market "$work/bad.yaml"
    printf 'burst: {threshold: 2h}\n' >>"$work/bad-burst.yaml"
    cat "$work/market.yaml" >>"$work/bad-burst.yaml"
    expect_error "bad-burst.yaml:1:8 burst" "a threshold needs providers with offers" -- \
      plan tco --market "$work/bad-burst.yaml"
    expect_error "--model" "model 'A100' is not in the market file; it has H100, OLD" -- \
      plan tco --market "$work/market.yaml" --model A100
    expect_error "--utilisation" "'0'" -- plan tco --market "$work/market.yaml" --utilisation 0.5,0
    expect_error "--output" "xml" -- plan tco --market "$work/market.yaml" -o xml
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS: $case_name"
