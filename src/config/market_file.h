// The market file: the internal market's inputs as YAML — what one GPU of each model costs to own
// (core/gpu_cost.h), how the price of a GPU-hour moves with utilisation, time of day and class
// (core/pricing.h), and the tenants' quarterly budgets (core/budget.h). `tidepool plan tco` and
// the simulator's market read it.
//
// Example (data/market/example.yaml is a complete, commented one):
//
//   currency: USD
//   models:
//     H100:
//       purchase_price: 30000        # per GPU, its share of server and network included
//       amortisation_years: 4
//       power_watts: 1000
//       pue: 1.3
//       electricity_per_kwh: 0.12
//       operations_per_year: 3000
//       target_utilisation: 0.7
//       on_demand_per_hour: 4.00
//       spot_per_hour: 2.00
//       spot_interruption: 0.1
//   prices:
//     period: 5m
//     utilisation_curve: [[0, 0.6], [0.7, 1.0], [1.0, 1.5]]
//     time_of_day:
//       - {from: "09:00", to: "18:00", multiplier: 1.2}
//       - {from: "00:00", to: "07:00", multiplier: 0.8}
//     classes: {standard: 1.0, preemptible: 0.6, emergency: 1.5}
//     lender_share: 0.8
//   budgets:
//     vision: {quarterly: 250000, soft_alert: 0.8}
//
// Keys (all optional but `models`):
//   currency                 a label printed with amounts (default "credits"); amounts are in it.
//   models                   required, a non-empty map from GPU model name to its TCO inputs, in
//                            file order:
//     purchase_price         required, money: one GPU with its share of server, network, storage.
//     amortisation_years     decimal years, a whole number of months (4, 3.5, 2.25), or
//     | amortisation_months  whole months; at most one of the two (default 4 years); 1..240 months.
//     power_watts            required, whole watts per GPU at typical load (its share of the
//                            server's power included), 0..100000.
//     pue                    power usage effectiveness, 1..5 with up to 3 decimals (default 1.3).
//     electricity_per_kwh    required, money per kWh.
//     operations_per_year    required, money per GPU and year: staff, space, support contracts.
//     target_utilisation     the share of its hours a GPU is planned to be used, (0, 1]
//                            (default 0.7): the cost base is the cost of a used GPU-hour then.
//     on_demand_per_hour     optional, money: a cloud's on-demand price of one GPU-hour.
//     spot_per_hour          optional, money: a cloud's spot price of one GPU-hour.
//     spot_interruption      the share of spot hours lost to interruptions, [0, 1) (default 0.1).
//   prices                   the price schedule (PriceSchedule in core/pricing.h; each key
//                            optional, defaults from there):
//     period                 how often prices change: seconds ("300"), or with a unit ("300s",
//                            "5m", "1h", "1d"); 1 s..1 day (default 5m).
//     utilisation_curve      a list of [utilisation, multiplier] points from 0 to 1, utilisation
//                            rising, multipliers non-decreasing (default [[0, 0.6], [0.7, 1],
//                            [1, 1.5]]).
//     time_of_day            a list of bands {from: "HH:MM", to: "HH:MM", multiplier: M}, all three
//                            keys required: [from, to) of the time of day, wrapping past midnight
//                            when to < from; "24:00" only as `to`; bands must not overlap; x1
//                            outside every band (default: none). Hours 0..24 (one or two digits),
//                            minutes 00..59.
//     classes                {standard, preemptible, emergency}: class multipliers, each optional
//                            (defaults 1, 0.6, 1.5).
//     lender_share           the share of lent capacity's price credited to its lenders, [0, 1]
//                            (default 0.8).
//   budgets                  a map from tenant name to {quarterly: money (required), soft_alert:
//                            share of it that raises the alert, (0, 1] (default 0.8)}, in file
//                            order. Names are not checked against a tenants file here.
//   burst                    hybrid bursting (core/burst.h):
//     threshold              a job that waited this long may run on rented capacity: seconds or
//                            with a unit (90m, 2h, 1d); bursting is off without it.
//     providers              a list of {name (unique), hook (the executable the server runs with
//                            `up` / `down`; optional for the simulator), offers}.
//     providers[].offers     a list of {name (unique over all providers), model (a GPU model
//                            name), price_per_gpu_hour (money), startup_delay (time, default 0),
//                            max_gpus (1..10000000), spot (true/false, default false),
//                            interruption_per_hour (spot only: the chance an hour of it is
//                            interrupted, [0, 1), default 0)}.
//
// Numbers are read from the scalar's text, never through floating point, so that they are exact:
// money as a decimal with up to 6 places ("0.12" is 120000 micro-credits, core/money.h), shares
// and multipliers likewise in parts per million. No sign, no exponent. Unknown or repeated keys
// are errors (a typo must not be ignored), and so is a file with more than one YAML document.
//
// Errors: the Error's field is "<source>:<line>:<column> <path>", the path in the YAML tree of the
// bad value (e.g. "market.yaml:7:10 models.H100.pue", "m.yaml:12:24
// prices.time_of_day[1].to"); the reason says what is wrong ("must be 1..5, got 0.9"). Checks of
// the core's constructors (make_gpu_cost_inputs, make_price_schedule, make_budget) are reported at
// the key they concern. No exception escapes these functions. A MarketSpec that reads without
// error holds values those constructors accept.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/budget.h"
#include "core/burst.h"
#include "core/error.h"
#include "core/gpu_cost.h"
#include "core/gpu_model.h"
#include "core/money.h"
#include "core/pricing.h"

namespace tidepool {

// A burst offer as the file names it (core/burst.h: BurstOffer).
struct BurstOfferSpec {
  std::string name;
  std::string provider;
  std::string model;
  bool spot = false;
  Micros price_per_gpu_hour = 0;
  Seconds startup_delay = 0;
  std::int64_t max_gpus = 0;
  Ppm interruption_per_hour = 0;
};

struct BurstProviderSpec {
  std::string name;
  std::string hook;  // empty when not given
};

struct MarketSpec {
  std::string currency = "credits";
  std::vector<GpuCostInputs> models;  // in file order; names unique
  PriceSchedule prices;
  std::vector<std::pair<std::string, Budget>> budgets;  // by tenant name, in file order
  std::optional<Seconds> burst_threshold;
  std::vector<BurstProviderSpec> burst_providers;
  std::vector<BurstOfferSpec> burst_offers;  // every provider's, in file order
};

// Parses a market file's text; `source` names it in errors (a path, or e.g. "<stdin>").
Result<MarketSpec> read_market_yaml(std::string_view text, const std::string& source);

// Reads and parses the file at `path`.
Result<MarketSpec> load_market_yaml(const std::string& path);

// The TCO inputs of `model`, or nullptr when the file has none.
const GpuCostInputs* find_market_model(const MarketSpec& market, std::string_view model);

// The cost figures (gpu_cost) of every model of a pool's catalog, indexed by model id. Fails with
// field "models" and a reason naming the first model of the catalog the market file lacks.
Result<std::vector<GpuCost>> gpu_costs_for(const MarketSpec& market,
                                           const GpuModelCatalog& catalog);

// The burst offers with their models interned into (a copy of) `catalog`: a model the pool lacks
// gets an id past the pool's, which tasks that accept any model accept.
Result<std::vector<BurstOffer>> burst_offers_for(const MarketSpec& market, GpuModelCatalog catalog);

// The cost base per used GPU-hour of every model of the catalog, indexed by model id (the
// cost_base of gpu_costs_for); fails as it does.
Result<std::vector<Micros>> cost_bases_for(const MarketSpec& market,
                                           const GpuModelCatalog& catalog);

}  // namespace tidepool
