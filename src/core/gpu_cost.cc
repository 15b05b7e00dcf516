#include "core/gpu_cost.h"

#include <fmt/format.h>

#include <cassert>

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

// Derived costs per hour are held to kMaxMoney, the most any amount may hold (core/money.h):
// only absurd inputs (a utilisation of a few ppm, an interruption share of 99.9999%) reach it.
Micros capped(Int128 amount) {
  return amount > kMaxMoney ? kMaxMoney : static_cast<Micros>(amount);
}

// The figures of the file comment, in 128 bits so that make_gpu_cost_inputs can check them before
// they are narrowed.
struct WideCost {
  Int128 amortisation = 0;
  Int128 power = 0;
  Int128 operations = 0;
  Int128 owned = 0;
  Int128 cost_base = 0;
};

WideCost wide_cost(const GpuCostInputs& in) {
  WideCost c;
  c.amortisation = div_round(in.purchase_price, Int128{in.amortisation_months} * kHoursPerMonth);
  // watts x PUE (milli) x credits per kWh: W -> kW is / 1000, PUE milli -> x1 is / 1000.
  c.power = div_round(Int128{in.power_watts} * in.pue_milli * in.electricity_per_kwh, 1'000'000);
  c.operations = div_round(in.operations_per_year, kHoursPerYear);
  c.owned = c.amortisation + c.power + c.operations;
  c.cost_base = div_round(c.owned * kPpmOne, in.target_utilisation);
  return c;
}

}  // namespace

Result<GpuCostInputs> make_gpu_cost_inputs(GpuCostInputs inputs) {
  const std::string& model = inputs.model;
  auto bad = [&](const char* field, std::string reason) {
    return fail(field, fmt::format("model {}: {}", model, reason));
  };
  if (model.empty()) return fail("model", "must name the GPU model");
  if (inputs.purchase_price <= 0 || inputs.purchase_price > kMaxMoney) {
    return bad("purchase_price",
               fmt::format("must be positive and at most {}, got {}", money_text(kMaxMoney),
                           exact_money_text(inputs.purchase_price)));
  }
  if (inputs.amortisation_months < 1 || inputs.amortisation_months > 240) {
    return bad("amortisation_months",
               fmt::format("must be 1..240 months, got {}", inputs.amortisation_months));
  }
  if (inputs.power_watts < 0 || inputs.power_watts > 100'000) {
    return bad("power_watts", fmt::format("must be 0..100000 W, got {}", inputs.power_watts));
  }
  if (inputs.pue_milli < 1000 || inputs.pue_milli > 5000) {
    return bad("pue", fmt::format("must be 1..5, got {}", ppm_text(inputs.pue_milli * 1000)));
  }
  if (inputs.electricity_per_kwh < 0 || inputs.electricity_per_kwh > kMaxMoney) {
    return bad("electricity_per_kwh", fmt::format("must be 0..{}, got {}", money_text(kMaxMoney),
                                                  exact_money_text(inputs.electricity_per_kwh)));
  }
  if (inputs.operations_per_year < 0 || inputs.operations_per_year > kMaxMoney) {
    return bad("operations_per_year", fmt::format("must be 0..{}, got {}", money_text(kMaxMoney),
                                                  exact_money_text(inputs.operations_per_year)));
  }
  if (inputs.target_utilisation <= 0 || inputs.target_utilisation > kPpmOne) {
    return bad("target_utilisation", fmt::format("must be above 0 and at most 1, got {}",
                                                 ppm_text(inputs.target_utilisation)));
  }
  for (const auto& [field, price] : {std::pair{"on_demand_per_hour", inputs.on_demand_per_hour},
                                     std::pair{"spot_per_hour", inputs.spot_per_hour}}) {
    if (price && (*price <= 0 || *price > kMaxMoney)) {
      return bad(field, fmt::format("must be positive and at most {}, got {}",
                                    money_text(kMaxMoney), exact_money_text(*price)));
    }
  }
  if (inputs.spot_interruption < 0 || inputs.spot_interruption >= kPpmOne) {
    return bad("spot_interruption", fmt::format("must be at least 0 and below 1, got {}",
                                                ppm_text(inputs.spot_interruption)));
  }
  // Each input is bounded, yet together they could make figures no amount can hold.
  const WideCost cost = wide_cost(inputs);
  if (cost.power > kMaxMoney) {
    return bad("electricity_per_kwh",
               fmt::format("power would cost more than {} an hour", money_text(kMaxMoney)));
  }
  if (cost.cost_base > kMaxMoney) {
    return bad("target_utilisation",
               fmt::format("a used GPU-hour would cost more than {}", money_text(kMaxMoney)));
  }
  return inputs;
}

GpuCost gpu_cost(const GpuCostInputs& inputs) {
  const WideCost c = wide_cost(inputs);
  assert(c.cost_base <= kMaxMoney);  // make_gpu_cost_inputs checks it
  return GpuCost{.amortisation_per_hour = static_cast<Micros>(c.amortisation),
                 .power_per_hour = static_cast<Micros>(c.power),
                 .operations_per_hour = static_cast<Micros>(c.operations),
                 .owned_per_hour = static_cast<Micros>(c.owned),
                 .cost_base = static_cast<Micros>(c.cost_base)};
}

Micros owned_cost_per_used_hour(const GpuCost& cost, Ppm utilisation) {
  assert(utilisation > 0 && utilisation <= kPpmOne);
  return capped(div_round(Int128{cost.owned_per_hour} * kPpmOne, utilisation));
}

Micros spot_cost_per_useful_hour(const GpuCostInputs& inputs) {
  assert(inputs.spot_per_hour.has_value());
  assert(inputs.spot_interruption >= 0 && inputs.spot_interruption < kPpmOne);
  return capped(div_round(Int128{inputs.spot_per_hour.value_or(0)} * kPpmOne,
                          kPpmOne - inputs.spot_interruption));
}

std::optional<Ppm> break_even_utilisation(const GpuCost& cost, Micros rented_per_hour) {
  assert(rented_per_hour > 0);
  const Int128 share = div_round(Int128{cost.owned_per_hour} * kPpmOne, rented_per_hour);
  if (share > kPpmOne) return std::nullopt;
  return static_cast<Ppm>(share);
}

}  // namespace tidepool
