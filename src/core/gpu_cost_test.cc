#include "core/gpu_cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kCredit;
using ::testing::HasSubstr;

// An H100 bought for 30000 credits (its share of the server included), written off over 48
// months, drawing 700 W at a PUE of 1.3 with power at 0.15 a kWh, 2000 a year to operate,
// planned 70% used; a cloud rents one for 2.50 an hour on demand and 1.00 spot, 10% lost.
GpuCostInputs h100_costs() {
  GpuCostInputs in;
  in.model = "H100";
  in.purchase_price = 30'000 * kCredit;
  in.amortisation_months = 48;
  in.power_watts = 700;
  in.pue_milli = 1300;
  in.electricity_per_kwh = 150'000;
  in.operations_per_year = 2'000 * kCredit;
  in.target_utilisation = 700'000;
  in.on_demand_per_hour = 2'500'000;
  in.spot_per_hour = 1'000'000;
  in.spot_interruption = 100'000;
  return in;
}

// The field of make_gpu_cost_inputs' error, or "" when the inputs are valid.
std::string failing_cost_field(const GpuCostInputs& in) {
  auto made = make_gpu_cost_inputs(in);
  return made ? std::string() : made.error().field;
}

TEST(GpuCostTest, WorkedExampleByHand) {
  // amortisation: 30000 / (48 x 730 h = 35040 h) = 0.85616438... -> 856164 micro-credits
  // power:        700 W x 1.3 = 0.91 kW x 0.15 a kWh = 0.1365       -> 136500
  // operations:   2000 / 8760 h = 0.22831050...                      -> 228311
  // owned:        856164 + 136500 + 228311                            =  1220975
  // cost base:    1220975 / 0.7 = 1744250 exactly
  const GpuCost cost = gpu_cost(make_gpu_cost_inputs(h100_costs()).value());
  EXPECT_EQ(cost.amortisation_per_hour, 856'164);
  EXPECT_EQ(cost.power_per_hour, 136'500);
  EXPECT_EQ(cost.operations_per_hour, 228'311);
  EXPECT_EQ(cost.owned_per_hour, 1'220'975);
  EXPECT_EQ(cost.cost_base, 1'744'250);
  EXPECT_EQ(money_text(cost.cost_base), "1.74");
}

TEST(GpuCostTest, OwnedCostPerUsedHour) {
  const GpuCost cost = gpu_cost(h100_costs());
  EXPECT_EQ(owned_cost_per_used_hour(cost, kPpmOne), 1'220'975);
  EXPECT_EQ(owned_cost_per_used_hour(cost, 700'000), cost.cost_base);
  EXPECT_EQ(owned_cost_per_used_hour(cost, 500'000), 2'441'950);
  EXPECT_EQ(owned_cost_per_used_hour(cost, 300'000), 4'069'917);  // 4069916.67
  // Cheaper the more it is used.
  Micros previous = owned_cost_per_used_hour(cost, 1);
  for (Ppm u = 1000; u <= kPpmOne; u += 1000) {
    const Micros now = owned_cost_per_used_hour(cost, u);
    EXPECT_LE(now, previous) << u;
    previous = now;
  }
  // Held to kMaxMoney for absurd utilisations of a huge cost.
  EXPECT_EQ(owned_cost_per_used_hour(GpuCost{.amortisation_per_hour = 0,
                                             .power_per_hour = 0,
                                             .operations_per_hour = 0,
                                             .owned_per_hour = kMaxMoney,
                                             .cost_base = kMaxMoney},
                                     1),
            kMaxMoney);
}

TEST(GpuCostTest, SpotCostPerUsefulHour) {
  GpuCostInputs in = h100_costs();
  EXPECT_EQ(spot_cost_per_useful_hour(in), 1'111'111);  // 1 / 0.9 = 1.1111111
  in.spot_per_hour = 900'000;
  EXPECT_EQ(spot_cost_per_useful_hour(in), kCredit);
  in.spot_interruption = 0;
  EXPECT_EQ(spot_cost_per_useful_hour(in), 900'000);
  in.spot_per_hour = 1;
  in.spot_interruption = 333'333;  // 1 / 0.666667 = 1.4999993 -> 1
  EXPECT_EQ(spot_cost_per_useful_hour(in), 1);
  in.spot_interruption = 500'000;  // 1 / 0.5 = 2
  EXPECT_EQ(spot_cost_per_useful_hour(in), 2);
  in.spot_per_hour = 1;
  in.spot_interruption = 600'000;  // 2.5 -> 3
  EXPECT_EQ(spot_cost_per_useful_hour(in), 3);
}

TEST(GpuCostTest, BreakEvenUtilisation) {
  const GpuCost cost = gpu_cost(h100_costs());
  // 1.220975 / 2.50 = 48.839%
  EXPECT_EQ(break_even_utilisation(cost, 2'500'000), 488'390);
  EXPECT_EQ(break_even_utilisation(cost, cost.owned_per_hour), kPpmOne);
  // Renting for less than owning costs fully used: owning never pays.
  EXPECT_EQ(break_even_utilisation(cost, 1'200'000), std::nullopt);
  EXPECT_EQ(break_even_utilisation(cost, spot_cost_per_useful_hour(h100_costs())), std::nullopt);
  // 1220975 / 1220976 = 0.99999918 -> 999999 ppm; 1220975 / 1220974 = 1.0000008: above 1.
  EXPECT_EQ(break_even_utilisation(cost, cost.owned_per_hour + 1), 999'999);
  EXPECT_EQ(break_even_utilisation(cost, cost.owned_per_hour - 1), std::nullopt);
  EXPECT_EQ(break_even_utilisation(cost, kMaxMoney), 0);
}

TEST(GpuCostTest, EveryDivisionRoundsHalfAwayFromZero) {
  GpuCostInputs in = h100_costs();
  in.amortisation_months = 1;
  in.purchase_price = 365;  // / 730 = 0.5 -> 1
  in.power_watts = 0;
  in.operations_per_year = 4380;  // / 8760 = 0.5 -> 1
  in.target_utilisation = 800'000;
  GpuCost cost = gpu_cost(make_gpu_cost_inputs(in).value());
  EXPECT_EQ(cost.amortisation_per_hour, 1);
  EXPECT_EQ(cost.power_per_hour, 0);
  EXPECT_EQ(cost.operations_per_hour, 1);
  EXPECT_EQ(cost.owned_per_hour, 2);
  EXPECT_EQ(cost.cost_base, 3);  // 2 / 0.8 = 2.5 -> 3
  in.purchase_price = 364;       // 0.4986 -> 0
  in.operations_per_year = 4379;
  cost = gpu_cost(in);
  EXPECT_EQ(cost.amortisation_per_hour, 0);
  EXPECT_EQ(cost.operations_per_hour, 0);
  in.power_watts = 1000;
  in.pue_milli = 1500;
  in.electricity_per_kwh = 1;  // 1000 x 1500 x 1 / 1e6 = 1.5 -> 2
  EXPECT_EQ(gpu_cost(in).power_per_hour, 2);
}

TEST(GpuCostTest, ValidInputsAreReturnedUnchanged) {
  auto made = make_gpu_cost_inputs(h100_costs());
  ASSERT_TRUE(made.has_value()) << made.error().message();
  EXPECT_EQ(made->model, "H100");
  EXPECT_EQ(made->purchase_price, 30'000 * kCredit);
  EXPECT_EQ(made->on_demand_per_hour, 2'500'000);
  GpuCostInputs edges = h100_costs();
  edges.amortisation_months = 240;
  edges.power_watts = 0;
  edges.pue_milli = 5000;
  edges.electricity_per_kwh = 0;
  edges.operations_per_year = 0;
  edges.target_utilisation = kPpmOne;
  edges.on_demand_per_hour.reset();
  edges.spot_per_hour.reset();
  edges.spot_interruption = 0;
  EXPECT_EQ(failing_cost_field(edges), "");
  edges.amortisation_months = 1;
  edges.power_watts = 100'000;
  edges.pue_milli = 1000;
  edges.spot_interruption = kPpmOne - 1;
  EXPECT_EQ(failing_cost_field(edges), "");
}

TEST(GpuCostTest, ValidationNamesTheFieldAndTheModel) {
  struct Case {
    const char* field;
    void (*spoil)(GpuCostInputs&);
  };
  const Case cases[] = {
      {"model", [](GpuCostInputs& in) { in.model.clear(); }},
      {"purchase_price", [](GpuCostInputs& in) { in.purchase_price = 0; }},
      {"purchase_price", [](GpuCostInputs& in) { in.purchase_price = kMaxMoney + 1; }},
      {"amortisation_months", [](GpuCostInputs& in) { in.amortisation_months = 0; }},
      {"amortisation_months", [](GpuCostInputs& in) { in.amortisation_months = 241; }},
      {"power_watts", [](GpuCostInputs& in) { in.power_watts = -1; }},
      {"power_watts", [](GpuCostInputs& in) { in.power_watts = 100'001; }},
      {"pue", [](GpuCostInputs& in) { in.pue_milli = 999; }},
      {"pue", [](GpuCostInputs& in) { in.pue_milli = 5001; }},
      {"electricity_per_kwh", [](GpuCostInputs& in) { in.electricity_per_kwh = -1; }},
      {"electricity_per_kwh", [](GpuCostInputs& in) { in.electricity_per_kwh = kMaxMoney + 1; }},
      {"operations_per_year", [](GpuCostInputs& in) { in.operations_per_year = -1; }},
      {"operations_per_year", [](GpuCostInputs& in) { in.operations_per_year = kMaxMoney + 1; }},
      {"target_utilisation", [](GpuCostInputs& in) { in.target_utilisation = 0; }},
      {"target_utilisation", [](GpuCostInputs& in) { in.target_utilisation = kPpmOne + 1; }},
      {"on_demand_per_hour", [](GpuCostInputs& in) { in.on_demand_per_hour = 0; }},
      {"on_demand_per_hour", [](GpuCostInputs& in) { in.on_demand_per_hour = kMaxMoney + 1; }},
      {"spot_per_hour", [](GpuCostInputs& in) { in.spot_per_hour = -5; }},
      {"spot_interruption", [](GpuCostInputs& in) { in.spot_interruption = -1; }},
      {"spot_interruption", [](GpuCostInputs& in) { in.spot_interruption = kPpmOne; }},
      // Bounded inputs that together make figures no amount may hold.
      {"electricity_per_kwh",
       [](GpuCostInputs& in) {
         in.power_watts = 100'000;
         in.pue_milli = 5000;
         in.electricity_per_kwh = kMaxMoney;
       }},
      {"target_utilisation",
       [](GpuCostInputs& in) {
         in.purchase_price = kMaxMoney;
         in.amortisation_months = 1;
         in.target_utilisation = 1;
       }},
  };
  for (const Case& c : cases) {
    GpuCostInputs in = h100_costs();
    c.spoil(in);
    auto made = make_gpu_cost_inputs(in);
    ASSERT_FALSE(made.has_value()) << c.field;
    EXPECT_EQ(made.error().field, c.field);
    if (std::string(c.field) != "model") {
      EXPECT_THAT(made.error().reason, HasSubstr("model H100: ")) << c.field;
    }
  }
  GpuCostInputs in = h100_costs();
  in.purchase_price = 0;
  EXPECT_EQ(make_gpu_cost_inputs(in).error().message(),
            "purchase_price: model H100: must be positive and at most 1000000000000.00, got 0");
  in = h100_costs();
  in.pue_milli = 900;
  EXPECT_THAT(make_gpu_cost_inputs(in).error().reason, HasSubstr("got 0.9"));
}

TEST(GpuCostTest, TheLargestValidInputsFit) {
  GpuCostInputs in = h100_costs();
  in.purchase_price = kMaxMoney;
  in.amortisation_months = 1;
  in.operations_per_year = kMaxMoney;
  in.power_watts = 100'000;
  in.pue_milli = 5000;
  in.electricity_per_kwh = 2'000'000'000'000;  // 500 kW x 2e6 credits = 1e9 credits an hour
  in.target_utilisation = kPpmOne;
  ASSERT_EQ(failing_cost_field(in), "");
  const GpuCost cost = gpu_cost(in);
  EXPECT_EQ(cost.power_per_hour, 1'000'000'000'000'000);
  EXPECT_EQ(cost.owned_per_hour,
            cost.amortisation_per_hour + cost.power_per_hour + cost.operations_per_hour);
  EXPECT_EQ(cost.cost_base, cost.owned_per_hour);
  EXPECT_LE(cost.cost_base, kMaxMoney);
}

}  // namespace
}  // namespace tidepool
