#include "config/market_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A file with one model, H100, with its required keys; `extra` follows (model keys at 4 spaces,
// sections at none).
std::string one_model(const std::string& extra = "") {
  return "models:\n"
         "  H100:\n"
         "    purchase_price: 30000\n"
         "    power_watts: 1000\n"
         "    electricity_per_kwh: 0.12\n"
         "    operations_per_year: 3000\n" +
         extra;
}

MarketSpec parse(const std::string& text) {
  auto spec = read_market_yaml(text, "m.yaml");
  EXPECT_TRUE(spec.has_value()) << text << (spec ? "" : spec.error().message());
  return spec ? *spec : MarketSpec{};
}

// The error for `text`, which must not parse.
Error market_error(const std::string& text) {
  auto spec = read_market_yaml(text, "m.yaml");
  EXPECT_FALSE(spec.has_value()) << text;
  return spec ? Error{} : spec.error();
}

TEST(MarketFileTest, ReadsExactFiguresAndDefaults) {
  const MarketSpec spec = parse(one_model());
  EXPECT_EQ(spec.currency, "credits");
  ASSERT_EQ(spec.models.size(), 1U);
  const GpuCostInputs& h100 = spec.models[0];
  EXPECT_EQ(h100.model, "H100");
  EXPECT_EQ(h100.purchase_price, 30'000'000'000);
  EXPECT_EQ(h100.amortisation_months, 48);
  EXPECT_EQ(h100.power_watts, 1000);
  EXPECT_EQ(h100.pue_milli, 1300);
  EXPECT_EQ(h100.electricity_per_kwh, 120'000);  // 0.12 exactly, no floating point
  EXPECT_EQ(h100.operations_per_year, 3'000'000'000);
  EXPECT_EQ(h100.target_utilisation, 700'000);
  EXPECT_EQ(h100.on_demand_per_hour, std::nullopt);
  EXPECT_EQ(h100.spot_per_hour, std::nullopt);
  EXPECT_EQ(h100.spot_interruption, 100'000);
  const PriceSchedule defaults;
  EXPECT_EQ(spec.prices.curve, defaults.curve);
  EXPECT_TRUE(spec.prices.bands.empty());
  EXPECT_EQ(spec.prices.period, 300);
  EXPECT_EQ(spec.prices.standard, kPpmOne);
  EXPECT_EQ(spec.prices.preemptible, 600'000);
  EXPECT_EQ(spec.prices.emergency, 1'500'000);
  EXPECT_EQ(spec.prices.lender_share, 800'000);
  EXPECT_TRUE(spec.budgets.empty());
}

TEST(MarketFileTest, ReadsEveryKey) {
  const MarketSpec spec = parse("currency: USD\n" + one_model() +
                                "    amortisation_years: 3.5\n"
                                "    pue: 1.125\n"
                                "    target_utilisation: 0.65\n"
                                "    on_demand_per_hour: 3.999999\n"
                                "    spot_per_hour: 2\n"
                                "    spot_interruption: 0.05\n"
                                "  P100:\n"
                                "    purchase_price: \"6000.5\"\n"
                                "    amortisation_months: 60\n"
                                "    power_watts: 300\n"
                                "    electricity_per_kwh: 0\n"
                                "    operations_per_year: 1000\n"
                                "prices:\n"
                                "  period: 1h\n"
                                "  utilisation_curve: [[0, 0.5], [0.5, 0.9], [0.8, 1.1], [1, 2]]\n"
                                "  time_of_day:\n"
                                "    - {from: \"09:00\", to: \"18:00\", multiplier: 1.2}\n"
                                "    - {from: 22:30, to: 7:00, multiplier: 0.8}\n"
                                "    - {from: \"18:00\", to: \"22:30\", multiplier: 1}\n"
                                "  classes: {preemptible: 0.5, emergency: 2}\n"
                                "  lender_share: 1\n"
                                "budgets:\n"
                                "  vision: {quarterly: 250000, soft_alert: 0.9}\n"
                                "  ads: {quarterly: 0.000001}\n");
  EXPECT_EQ(spec.currency, "USD");
  ASSERT_EQ(spec.models.size(), 2U);
  const GpuCostInputs& h100 = spec.models[0];
  EXPECT_EQ(h100.amortisation_months, 42);
  EXPECT_EQ(h100.pue_milli, 1125);
  EXPECT_EQ(h100.target_utilisation, 650'000);
  EXPECT_EQ(h100.on_demand_per_hour, 3'999'999);
  EXPECT_EQ(h100.spot_per_hour, 2'000'000);
  EXPECT_EQ(h100.spot_interruption, 50'000);
  const GpuCostInputs& p100 = spec.models[1];
  EXPECT_EQ(p100.model, "P100");
  EXPECT_EQ(p100.purchase_price, 6'000'500'000);
  EXPECT_EQ(p100.amortisation_months, 60);
  EXPECT_EQ(p100.electricity_per_kwh, 0);

  EXPECT_EQ(spec.prices.period, 3600);
  EXPECT_EQ(spec.prices.curve,
            (std::vector<UtilisationPoint>{
                {0, 500'000}, {500'000, 900'000}, {800'000, 1'100'000}, {kPpmOne, 2'000'000}}));
  EXPECT_EQ(spec.prices.bands,
            (std::vector<TimeOfDayBand>{{9 * 3600, 18 * 3600, 1'200'000},
                                        {22 * 3600 + 1800, 7 * 3600, 800'000},
                                        {18 * 3600, 22 * 3600 + 1800, kPpmOne}}));
  EXPECT_EQ(spec.prices.standard, kPpmOne);
  EXPECT_EQ(spec.prices.preemptible, 500'000);
  EXPECT_EQ(spec.prices.emergency, 2'000'000);
  EXPECT_EQ(spec.prices.lender_share, kPpmOne);

  ASSERT_EQ(spec.budgets.size(), 2U);
  EXPECT_EQ(spec.budgets[0].first, "vision");
  EXPECT_EQ(spec.budgets[0].second.quarterly, 250'000'000'000);
  EXPECT_EQ(spec.budgets[0].second.soft_alert, 900'000);
  EXPECT_EQ(spec.budgets[1].first, "ads");
  EXPECT_EQ(spec.budgets[1].second.quarterly, 1);
  EXPECT_EQ(spec.budgets[1].second.soft_alert, 800'000);
}

TEST(MarketFileTest, PeriodsAndTimesOfDay) {
  for (const auto& [text, seconds] :
       {std::pair{"300", 300}, std::pair{"300s", 300}, std::pair{"5m", 300}, std::pair{"2h", 7200},
        std::pair{"1d", 86400}, std::pair{"1", 1},
        // The grammar of every other duration (config/duration_text.h), compound forms included.
        std::pair{"1h30m", 5400}, std::pair{"2m30s", 150}}) {
    EXPECT_EQ(parse(one_model(std::string("prices: {period: ") + text + "}\n")).prices.period,
              seconds)
        << text;
  }
  const MarketSpec all_day = parse(
      one_model("prices:\n  time_of_day: [{from: \"0:00\", to: \"24:00\", multiplier: 0.9}]\n"));
  EXPECT_EQ(all_day.prices.bands, (std::vector<TimeOfDayBand>{{0, 86400, 900'000}}));
}

TEST(MarketFileTest, CostBasesFollowTheCatalog) {
  const MarketSpec spec =
      parse(one_model("  A100:\n"
                      "    purchase_price: 15000\n"
                      "    power_watts: 500\n"
                      "    electricity_per_kwh: 0.1\n"
                      "    operations_per_year: 2000\n"
                      "    target_utilisation: 1\n"));
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("A100").has_value());
  ASSERT_TRUE(catalog.intern("H100").has_value());
  auto costs = gpu_costs_for(spec, catalog);
  ASSERT_TRUE(costs.has_value()) << costs.error().message();
  ASSERT_EQ(costs->size(), 2U);
  // H100: 30000 / (48 x 730 h) = 0.856164; 1 kW x 1.3 x 0.12 = 0.156; 3000 / 8760 h = 0.342466;
  // owned 1.354630 an hour; at 70% used, 1.935186 per used GPU-hour.
  const GpuCost& h100 = (*costs)[1];
  EXPECT_EQ(h100.amortisation_per_hour, 856'164);
  EXPECT_EQ(h100.power_per_hour, 156'000);
  EXPECT_EQ(h100.operations_per_hour, 342'466);
  EXPECT_EQ(h100.owned_per_hour, 1'354'630);
  EXPECT_EQ(h100.cost_base, 1'935'186);
  // A100: 15000 / 35040 = 0.428082; 0.5 x 1.3 x 0.1 = 0.065; 2000 / 8760 = 0.228311; fully used.
  EXPECT_EQ((*costs)[0].owned_per_hour, 428'082 + 65'000 + 228'311);
  EXPECT_EQ((*costs)[0].cost_base, (*costs)[0].owned_per_hour);

  auto bases = cost_bases_for(spec, catalog);
  ASSERT_TRUE(bases.has_value());
  EXPECT_EQ(*bases, (std::vector<Micros>{(*costs)[0].cost_base, 1'935'186}));

  ASSERT_TRUE(catalog.intern("T4").has_value());
  auto missing = cost_bases_for(spec, catalog);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().field, "models");
  EXPECT_THAT(missing.error().reason, HasSubstr("GPU model T4 of the pool is missing"));
  EXPECT_EQ(find_market_model(spec, "T4"), nullptr);
  ASSERT_NE(find_market_model(spec, "A100"), nullptr);
  EXPECT_EQ(find_market_model(spec, "A100")->purchase_price, 15'000'000'000);
}

TEST(MarketFileTest, ReadsBurstProvidersAndTheirOffers) {
  const MarketSpec spec = parse(
      one_model("burst:\n"
                "  threshold: 90m\n"
                "  providers:\n"
                "    - name: cloud\n"
                "      hook: /usr/libexec/burst-cloud\n"
                "      offers:\n"
                "        - {name: od, model: H100, price_per_gpu_hour: 6.88, startup_delay: 10m,\n"
                "           max_gpus: 64}\n"
                "        - {name: spot, model: A100, spot: true, price_per_gpu_hour: 1.2,\n"
                "           max_gpus: 32, interruption_per_hour: 0.05}\n"));
  ASSERT_EQ(spec.burst_threshold, 5400);
  ASSERT_EQ(spec.burst_providers.size(), 1U);
  EXPECT_EQ(spec.burst_providers[0].hook, "/usr/libexec/burst-cloud");
  ASSERT_EQ(spec.burst_offers.size(), 2U);
  EXPECT_EQ(spec.burst_offers[0].price_per_gpu_hour, 6'880'000);
  EXPECT_EQ(spec.burst_offers[0].startup_delay, 600);
  EXPECT_FALSE(spec.burst_offers[0].spot);
  EXPECT_TRUE(spec.burst_offers[1].spot);
  EXPECT_EQ(spec.burst_offers[1].interruption_per_hour, 50'000);
  EXPECT_EQ(spec.burst_offers[1].provider, "cloud");
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("H100").has_value());
  auto offers = burst_offers_for(spec, catalog);
  ASSERT_TRUE(offers.has_value());
  EXPECT_EQ((*offers)[0].model, GpuModelId{0});
  EXPECT_EQ((*offers)[1].model, GpuModelId{1});  // A100: past the pool's models
}

TEST(MarketFileTest, EveryErrorNamesItsPath) {
  struct Case {
    std::string text;
    std::string field;
    std::string reason;
  };
  const Case cases[] = {
      {"", "m.yaml", "the file is empty; expected models"},
      {"currency: USD\n", "m.yaml:1:1 models", "the key is missing"},
      {"models: {}\n", "m.yaml:1:9 models", "the file has no models"},
      {"models: [H100]\n", "m.yaml:1:9 models", "expected a map, got a list"},
      {one_model("burst: {threshold: 2h}\n"), "m.yaml:7:8 burst",
       "a threshold needs providers with offers to burst to"},
      {one_model("burst: {threshold: 0}\n"), "m.yaml:7:20 burst.threshold", "must be positive"},
      {one_model("burst:\n  providers:\n    - {name: c, offers: [{name: o, model: H100, "
                 "price_per_gpu_hour: 2, max_gpus: 8, interruption_per_hour: 0.1}]}\n"),
       "m.yaml:9:108 burst.providers[0].offers[0].interruption_per_hour",
       "only spot offers are interrupted"},
      {one_model("burst:\n  providers:\n    - {name: c, offers: [{name: o, model: H100, "
                 "price_per_gpu_hour: 2, max_gpus: 0}]}\n"),
       "m.yaml:9:82 burst.providers[0].offers[0].max_gpus",
       "expected a whole number 1..10000000, got '0'"},
      {one_model("burst:\n  providers:\n    - {name: c, offers: [{name: o, model: H100, "
                 "price_per_gpu_hour: 2, max_gpus: 8}, {name: o, model: H100, "
                 "price_per_gpu_hour: 2, max_gpus: 8}]}\n"),
       "m.yaml:9:86 burst.providers[0].offers[1].name",
       "offer 'o' is already defined at burst.providers[0].offers[0]"},
      {one_model("burst:\n  providers:\n    - {name: c, offers: [{name: o, model: H100}]}\n"),
       "m.yaml:9:26 burst.providers[0].offers[0].price_per_gpu_hour", "the key is missing"},
      {one_model("currency: ''\n"), "m.yaml:7:11 currency", "must not be empty"},
      {one_model("    pue: 1.3\n    pue: 1.4\n"), "m.yaml:8:5 models.H100.pue",
       "the key is given twice"},
      {one_model("    puee: 1.3\n"), "m.yaml:7:5 models.H100.puee",
       "unknown key; expected one of purchase_price, amortisation_years, amortisation_months, "
       "power_watts, pue, electricity_per_kwh, operations_per_year, target_utilisation, "
       "on_demand_per_hour, spot_per_hour, spot_interruption"},
      {"models:\n  H100: {power_watts: 1, electricity_per_kwh: 0, operations_per_year: 0}\n",
       "m.yaml:2:9 models.H100.purchase_price", "the key is missing"},
      {"models:\n  H100: {purchase_price: 1, electricity_per_kwh: 0, operations_per_year: 0}\n",
       "m.yaml:2:9 models.H100.power_watts", "the key is missing"},
      {"models:\n  H100: {purchase_price: 0, power_watts: 1, electricity_per_kwh: 0, "
       "operations_per_year: 0}\n",
       "m.yaml:2:26 models.H100.purchase_price",
       "must be positive and at most 1000000000000.00, "
       "got 0"},
      {one_model("    electricity_per_kwh: 0.12\n"), "m.yaml:7:5 models.H100.electricity_per_kwh",
       "the key is given twice"},
      {"models:\n  H100:\n    purchase_price: 1e4\n", "m.yaml:3:21 models.H100.purchase_price",
       "must be a number with at most 6 decimals, like 12.5, got '1e4'"},
      {"models:\n  H100:\n    purchase_price: -5\n", "m.yaml:3:21 models.H100.purchase_price",
       "must not be negative, got '-5'"},
      {"models:\n  H100:\n    purchase_price: {a: 1}\n", "m.yaml:3:21 models.H100.purchase_price",
       "expected a number, got a map"},
      // An empty value has no position of its own: yaml-cpp gives the next token's.
      {"models:\n  H100:\n    purchase_price:\n", "m.yaml:4:1 models.H100.purchase_price",
       "expected a number, got nothing"},
      {one_model("    amortisation_years: 4.1\n"), "m.yaml:7:25 models.H100.amortisation_years",
       "must come to whole months (years in steps of 0.25, like 3.5; or give "
       "amortisation_months), got '4.1'"},
      {one_model("    amortisation_years: 25\n"), "m.yaml:7:25 models.H100.amortisation_years",
       "must be 1..240 months, got 300"},
      {one_model("    amortisation_years: 4\n    amortisation_months: 48\n"),
       "m.yaml:8:26 models.H100.amortisation_months",
       "give amortisation_years or amortisation_months, not both"},
      {one_model("    amortisation_months: 0\n"), "m.yaml:7:26 models.H100.amortisation_months",
       "must be 1..240 months, got 0"},
      {one_model("    amortisation_months: 4.5\n"), "m.yaml:7:26 models.H100.amortisation_months",
       "expected whole months, got '4.5'"},
      {"models:\n  H100:\n    purchase_price: 1\n    power_watts: 700.5\n",
       "m.yaml:4:18 models.H100.power_watts", "expected whole watts, got '700.5'"},
      {one_model("    pue: 0.9\n"), "m.yaml:7:10 models.H100.pue", "must be 1..5, got 0.9"},
      {one_model("    pue: 1.2345\n"), "m.yaml:7:10 models.H100.pue",
       "expected a number with up to 3 decimals, like 1.3, got '1.2345'"},
      {one_model("    target_utilisation: 0\n"), "m.yaml:7:25 models.H100.target_utilisation",
       "must be above 0 and at most 1, got 0"},
      {one_model("    target_utilisation: 1.5\n"), "m.yaml:7:25 models.H100.target_utilisation",
       "must be above 0 and at most 1, got 1.5"},
      {one_model("    spot_per_hour: 0\n"), "m.yaml:7:20 models.H100.spot_per_hour",
       "must be positive and at most 1000000000000.00, got 0"},
      {one_model("    spot_interruption: 1\n"), "m.yaml:7:24 models.H100.spot_interruption",
       "must be at least 0 and below 1, got 1"},
      {one_model("  H100: {}\n"), "m.yaml:7:3 models.H100", "the key is given twice"},
      {one_model("prices: {periode: 5m}\n"), "m.yaml:7:10 prices.periode",
       "unknown key; expected one of period, utilisation_curve, time_of_day, classes, "
       "lender_share"},
      {one_model("prices: {period: 5 m}\n"), "m.yaml:7:18 prices.period",
       "'5 m' is not a duration; use e.g. 90s, 30m, 6h, 2d, 1h30m (units d, h, m, s in that "
       "order, each once) or whole seconds"},
      {one_model("prices: {period: 25h}\n"), "m.yaml:7:18 prices.period",
       "must be 1 second to 1 day, got '25h'"},
      {one_model("prices: {period: 0}\n"), "m.yaml:7:18 prices.period",
       "must be 1 second to 1 day, got '0'"},
      {one_model("prices: {lender_share: 1.1}\n"), "m.yaml:7:24 prices.lender_share",
       "must be 0..1, got 1.1"},
      {one_model("prices: {utilisation_curve: [[0, 1]]}\n"), "m.yaml:7:29 prices.utilisation_curve",
       "needs at least two points, at utilisation 0 and 1; got 1"},
      {one_model("prices: {utilisation_curve: [[0, 1], [0.9, 1.2, 3], [1, 2]]}\n"),
       "m.yaml:7:38 prices.utilisation_curve[1]",
       "expected a point [utilisation, multiplier], got a list"},
      {one_model("prices: {utilisation_curve: [[0, 1], [1, 0.5]]}\n"),
       "m.yaml:7:42 prices.utilisation_curve[1][1]",
       "must not fall below the previous point's 1, got 0.5"},
      {one_model("prices: {utilisation_curve: [[0.1, 1], [1, 1]]}\n"),
       "m.yaml:7:31 prices.utilisation_curve[0][0]", "the first point must be at 0, got 0.1"},
      {one_model("prices: {utilisation_curve: [[0, 1], [x, 1]]}\n"),
       "m.yaml:7:39 prices.utilisation_curve[1][0]",
       "must be a number with at most 6 decimals, like 12.5, got 'x'"},
      {one_model(
           "prices:\n  time_of_day:\n    - {from: \"25:00\", to: \"18:00\", multiplier: 1}\n"),
       "m.yaml:9:14 prices.time_of_day[0].from",
       "expected a time of day HH:MM (00:00..23:59), got '25:00'"},
      {one_model(
           "prices:\n  time_of_day:\n    - {from: \"24:00\", to: \"18:00\", multiplier: 1}\n"),
       "m.yaml:9:14 prices.time_of_day[0].from",
       "expected a time of day HH:MM (00:00..23:59), got '24:00'"},
      {one_model("prices:\n  time_of_day:\n    - {from: \"08:00\", to: \"8:0\", multiplier: 1}\n"),
       "m.yaml:9:27 prices.time_of_day[0].to",
       "expected a time of day HH:MM (00:00..24:00), got '8:0'"},
      {one_model(
           "prices:\n  time_of_day:\n    - {from: \"08:00\", to: \"08:00\", multiplier: 1}\n"),
       "m.yaml:9:27 prices.time_of_day[0].to",
       "must differ from opens (08:00); for a window open all day use 00:00-24:00"},
      {one_model("prices:\n  time_of_day:\n    - {from: \"08:00\", to: \"09:00\"}\n"),
       "m.yaml:9:7 prices.time_of_day[0].multiplier", "the key is missing"},
      {one_model(
           "prices:\n  time_of_day:\n    - {from: \"08:00\", to: \"09:00\", multiplier: 0}\n"),
       "m.yaml:9:48 prices.time_of_day[0].multiplier", "must be above 0 and at most 1000, got 0"},
      {one_model("prices:\n"
                 "  time_of_day:\n"
                 "    - {from: \"22:00\", to: \"06:00\", multiplier: 0.8}\n"
                 "    - {from: \"05:00\", to: \"09:00\", multiplier: 1.2}\n"),
       "m.yaml:10:7 prices.time_of_day[1]",
       "05:00-09:00 overlaps bands[0] (22:00-06:00); bands must not overlap"},
      {one_model("prices: {classes: {spot: 0.5}}\n"), "m.yaml:7:20 prices.classes.spot",
       "unknown key; expected one of standard, preemptible, emergency"},
      {one_model("prices: {classes: {emergency: 0}}\n"), "m.yaml:7:31 prices.classes.emergency",
       "must be above 0 and at most 1000, got 0"},
      {one_model("budgets: {vision: {soft_alert: 0.5}}\n"), "m.yaml:7:19 budgets.vision.quarterly",
       "the key is missing"},
      {one_model("budgets: {vision: {quarterly: 0}}\n"), "m.yaml:7:31 budgets.vision.quarterly",
       "must be positive and at most 1000000000000.00, got 0"},
      {one_model("budgets: {vision: {quarterly: 10, soft_alert: 1.5}}\n"),
       "m.yaml:7:47 budgets.vision.soft_alert", "must be above 0% and at most 100%, got 150%"},
      {one_model("budgets: {vision: {quarterly: 10}, vision: {quarterly: 20}}\n"),
       "m.yaml:7:36 budgets.vision", "the key is given twice"},
      {one_model("budgets: [vision]\n"), "m.yaml:7:10 budgets", "expected a map, got a list"},
      {one_model("---\nmodels: {}\n"), "m.yaml:7:1",
       "a second YAML document starts here; a market file holds one"},
  };
  for (const Case& c : cases) {
    const Error e = market_error(c.text);
    EXPECT_EQ(e.field, c.field) << c.text;
    EXPECT_EQ(e.reason, c.reason) << c.text;
  }
}

TEST(MarketFileTest, MalformedYamlGivesAPositionAndNoException) {
  for (const std::string text : {"models: [\n", "- a\n,", "{{{{", "models: *unknown\n",
                                 "models:\n  H100:\n   purchase_price: 1\n  x"}) {
    const Error e = market_error(text);
    EXPECT_THAT(e.field, StartsWith("m.yaml")) << text;
    EXPECT_FALSE(e.reason.empty()) << text;
  }
}

TEST(MarketFileTest, ReadsTheExampleFile) {
  auto spec = load_market_yaml(test_support::test_source_dir() + "/data/market/example.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  // The models of the shipped clusters and tenants, and of the openb traces.
  GpuModelCatalog catalog;
  for (const char* model : {"H100", "A100", "P100", "V100M16", "V100M32", "T4", "A10", "L4"}) {
    ASSERT_TRUE(catalog.intern(model).has_value());
  }
  auto bases = cost_bases_for(*spec, catalog);
  ASSERT_TRUE(bases.has_value()) << bases.error().message();
  for (Micros base : *bases) EXPECT_GT(base, 0);
  // Every tenant of data/tenants/example.yaml has a budget.
  for (const char* tenant : {"search", "vision", "ads", "assistant", "interns"}) {
    EXPECT_TRUE(std::any_of(spec->budgets.begin(), spec->budgets.end(), [&](const auto& budget) {
      return budget.first == tenant;
    })) << tenant;
  }
  EXPECT_FALSE(spec->prices.bands.empty());
}

TEST(MarketFileTest, MissingFileIsAnError) {
  auto spec = load_market_yaml(test_support::test_source_dir() + "/data/market/no-such-file.yaml");
  ASSERT_FALSE(spec.has_value());
  EXPECT_THAT(spec.error().message(), HasSubstr("cannot open the file"));
}

}  // namespace
}  // namespace tidepool
