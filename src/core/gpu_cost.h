// The cost base of a GPU-hour from the total cost of ownership (TCO) of one GPU of a model, and
// how owning compares with renting on demand or spot capacity.
//
// Per GPU of the model (its share of the server, network and storage included in each figure):
//   amortisation per hour = purchase_price / (amortisation_months x 730)        (730 h a month)
//   power per hour        = power_watts x PUE / 1000 kW x electricity_per_kwh
//   operations per hour   = operations_per_year / 8760                           (8760 h a year)
//   owned per hour        = the sum: what one GPU costs for every hour it exists, used or not
//   cost base             = owned per hour / target_utilisation: the cost of one *used* GPU-hour
//                           when the pool is used as much as planned; the price of the internal
//                           market starts from it (core/pricing.h)
// Owning at utilisation u costs owned per hour / u per used GPU-hour; renting costs the rented
// price whatever the utilisation, so owning is cheaper above the break-even utilisation
// owned per hour / rented price. Spot capacity can be taken back by its provider, so it suits only
// preemptible work that checkpoints; `spot_interruption` is the share of its hours lost to
// interruptions (work redone), which raises its cost per useful hour to
// spot / (1 - spot_interruption).
//
// All amounts are micro-credits per GPU (core/money.h); every division rounds half away from zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/money.h"

namespace tidepool {

inline constexpr std::int64_t kHoursPerMonth = 730;
inline constexpr std::int64_t kHoursPerYear = 8760;

struct GpuCostInputs {
  std::string model;
  Micros purchase_price = 0;         // per GPU, > 0
  int amortisation_months = 48;      // 1..240
  std::int64_t power_watts = 0;      // per GPU at typical load, 0..100'000
  std::int64_t pue_milli = 1300;     // power usage effectiveness x 1000, 1000..5000
  Micros electricity_per_kwh = 0;    // >= 0
  Micros operations_per_year = 0;    // per GPU: staff, space, support contracts; >= 0
  Ppm target_utilisation = 700'000;  // share of its hours a GPU is planned to be used, (0, 1]
  std::optional<Micros> on_demand_per_hour;  // a cloud's price of one GPU-hour, > 0
  std::optional<Micros> spot_per_hour;       // a cloud's spot price of one GPU-hour, > 0
  Ppm spot_interruption = 100'000;           // share of spot hours lost, [0, 1)
};

// Checks the bounds above; the error names the field ("purchase_price", "pue", ...) and the model.
Result<GpuCostInputs> make_gpu_cost_inputs(GpuCostInputs inputs);

struct GpuCost {
  Micros amortisation_per_hour = 0;
  Micros power_per_hour = 0;
  Micros operations_per_hour = 0;
  Micros owned_per_hour = 0;  // the sum of the three
  Micros cost_base = 0;       // per used GPU-hour at the target utilisation
};

// The figures of the file comment for valid inputs.
GpuCost gpu_cost(const GpuCostInputs& inputs);

// Owned cost per used GPU-hour at `utilisation` (0, 1].
Micros owned_cost_per_used_hour(const GpuCost& cost, Ppm utilisation);
// Spot's cost per useful GPU-hour (the price over the hours not lost to interruptions).
Micros spot_cost_per_useful_hour(const GpuCostInputs& inputs);
// The utilisation above which owning is cheaper than paying `rented_per_hour` (> 0), or nullopt
// when owning costs more even fully used.
std::optional<Ppm> break_even_utilisation(const GpuCost& cost, Micros rented_per_hour);

}  // namespace tidepool
