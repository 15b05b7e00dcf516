#include "core/pricing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/pool.h"
#include "core/test_units.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

using test_support::kDay;
using test_support::kHour;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TimeOfDayBand band(Seconds opens, Seconds closes, Ppm multiplier = 1'200'000) {
  return TimeOfDayBand{.opens = opens, .closes = closes, .multiplier = multiplier};
}

// x1.2 from 09:00 to 18:00, x0.8 from 00:00 to 07:00 (the header's example).
PriceSchedule office_hours() {
  PriceSchedule s;
  s.bands = {band(9 * kHour, 18 * kHour, 1'200'000), band(0, 7 * kHour, 800'000)};
  return s;
}

// The field of make_price_schedule's error, or "" when the schedule is valid.
std::string failing_schedule_field(const PriceSchedule& s) {
  auto made = make_price_schedule(s);
  return made ? std::string() : made.error().field;
}

std::string failing_schedule_field(std::vector<TimeOfDayBand> bands) {
  PriceSchedule s;
  s.bands = std::move(bands);
  return failing_schedule_field(s);
}

TEST(PricingTest, PriceClassNames) {
  EXPECT_EQ(price_class_name(PriceClass::kStandard), "standard");
  EXPECT_EQ(price_class_name(PriceClass::kPreemptible), "preemptible");
  EXPECT_EQ(price_class_name(PriceClass::kEmergency), "emergency");
}

TEST(PricingTest, DefaultAndExampleSchedulesAreValid) {
  auto made = make_price_schedule(PriceSchedule{});
  ASSERT_TRUE(made.has_value()) << made.error().message();
  EXPECT_EQ(made->curve.size(), 3U);
  EXPECT_EQ(made->period, 300);
  auto office = make_price_schedule(office_hours());
  ASSERT_TRUE(office.has_value()) << office.error().message();
  EXPECT_EQ(office->bands, office_hours().bands);
}

TEST(PricingTest, CurveValidationNamesThePoint) {
  auto with_curve = [](std::vector<UtilisationPoint> curve) {
    PriceSchedule s;
    s.curve = std::move(curve);
    return failing_schedule_field(s);
  };
  EXPECT_EQ(with_curve({{0, kPpmOne}, {kPpmOne, kPpmOne}}), "");  // flat
  EXPECT_EQ(with_curve({}), "curve");
  EXPECT_EQ(with_curve({{0, kPpmOne}}), "curve");
  EXPECT_EQ(with_curve({{1, kPpmOne}, {kPpmOne, kPpmOne}}), "curve[0].utilisation");
  EXPECT_EQ(with_curve({{0, kPpmOne}, {999'999, kPpmOne}}), "curve[1].utilisation");
  EXPECT_EQ(with_curve({{0, kPpmOne}, {kPpmOne + 1, kPpmOne}}), "curve[1].utilisation");
  EXPECT_EQ(with_curve({{-1, kPpmOne}, {kPpmOne, kPpmOne}}), "curve[0].utilisation");
  EXPECT_EQ(with_curve({{0, 1}, {500'000, 2}, {500'000, 3}, {kPpmOne, 4}}), "curve[2].utilisation");
  EXPECT_EQ(with_curve({{0, 1}, {600'000, 2}, {500'000, 3}, {kPpmOne, 4}}), "curve[2].utilisation");
  EXPECT_EQ(with_curve({{0, 0}, {kPpmOne, kPpmOne}}), "curve[0].multiplier");
  EXPECT_EQ(with_curve({{0, kPpmOne}, {kPpmOne, kMaxMultiplier + 1}}), "curve[1].multiplier");
  EXPECT_EQ(with_curve({{0, kPpmOne}, {kPpmOne, kMaxMultiplier}}), "");
  EXPECT_EQ(with_curve({{0, 2}, {500'000, 1}, {kPpmOne, 3}}), "curve[1].multiplier");
  PriceSchedule s;
  s.curve = {{0, kPpmOne}, {500'000, 900'000}, {kPpmOne, 2 * kPpmOne}};
  EXPECT_THAT(make_price_schedule(s).error().reason,
              HasSubstr("must not fall below the previous point's 1, got 0.9"));
}

TEST(PricingTest, OtherFieldsAreChecked) {
  auto spoiled = [](void (*spoil)(PriceSchedule&)) {
    PriceSchedule s;
    spoil(s);
    return failing_schedule_field(s);
  };
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.standard = 0; }), "standard");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.preemptible = -1; }), "preemptible");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.emergency = kMaxMultiplier + 1; }), "emergency");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.emergency = kMaxMultiplier; }), "");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.period = 0; }), "period");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.period = kDay + 1; }), "period");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.period = kDay; }), "");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.period = 1; }), "");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.lender_share = -1; }), "lender_share");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.lender_share = kPpmOne + 1; }), "lender_share");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.lender_share = 0; }), "");
  EXPECT_EQ(spoiled([](PriceSchedule& s) { s.lender_share = kPpmOne; }), "");
}

TEST(PricingTest, BandValidationNamesTheBand) {
  EXPECT_EQ(failing_schedule_field({band(0, kDay)}), "");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour)}), "");
  EXPECT_EQ(failing_schedule_field({band(-1, 10)}), "bands[0].opens");
  EXPECT_EQ(failing_schedule_field({band(kDay, 10)}), "bands[0].opens");
  EXPECT_EQ(failing_schedule_field({band(0, 10), band(20, 0)}), "bands[1].closes");
  EXPECT_EQ(failing_schedule_field({band(10, kDay + 1)}), "bands[0].closes");
  EXPECT_EQ(failing_schedule_field({band(10, 10)}), "bands[0].closes");
  EXPECT_EQ(failing_schedule_field({band(0, 10, 0)}), "bands[0].multiplier");
  EXPECT_EQ(failing_schedule_field({band(0, 10, kMaxMultiplier + 1)}), "bands[0].multiplier");
}

TEST(PricingTest, BandsMustNotOverlap) {
  // Touching is not overlapping: [opens, closes) intervals.
  EXPECT_EQ(failing_schedule_field({band(9 * kHour, 18 * kHour), band(18 * kHour, kDay)}), "");
  EXPECT_EQ(failing_schedule_field({band(9 * kHour, 18 * kHour), band(0, 9 * kHour)}), "");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(6 * kHour, 22 * kHour)}), "");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(12 * kHour, 13 * kHour),
                                    band(6 * kHour, 12 * kHour), band(13 * kHour, 22 * kHour)}),
            "");
  // One second in common is an overlap.
  EXPECT_EQ(failing_schedule_field({band(9 * kHour, 18 * kHour), band(18 * kHour - 1, kDay)}),
            "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(9 * kHour, 18 * kHour), band(10 * kHour, 11 * kHour)}),
            "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(10 * kHour, 11 * kHour), band(9 * kHour, 18 * kHour)}),
            "bands[1]");
  // Wrapping bands: past midnight on either side.
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(5 * kHour, 7 * kHour)}),
            "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(21 * kHour, 23 * kHour)}),
            "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(0, 1)}), "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(23 * kHour, 1 * kHour), band(kDay - 1, 2)}), "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(23 * kHour, kDay)}),
            "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(22 * kHour, 6 * kHour), band(21 * kHour, 22 * kHour)}),
            "");
  // Two wrapping bands both hold midnight.
  EXPECT_EQ(failing_schedule_field({band(23 * kHour, 1), band(kDay - 1, 2 * kHour)}), "bands[1]");
  // A band open all day overlaps any other.
  EXPECT_EQ(failing_schedule_field({band(0, kDay), band(kDay - 1, kDay)}), "bands[1]");
  EXPECT_EQ(failing_schedule_field({band(3 * kHour, 4 * kHour), band(0, kDay)}), "bands[1]");
  // The third band overlaps the first, not the second.
  EXPECT_EQ(
      failing_schedule_field({band(0, kHour), band(2 * kHour, 3 * kHour), band(kHour - 1, kHour)}),
      "bands[2]");
  PriceSchedule s;
  s.bands = {band(22 * kHour, 6 * kHour), band(5 * kHour, 7 * kHour)};
  EXPECT_THAT(make_price_schedule(s).error().reason,
              HasSubstr("05:00-07:00 overlaps bands[0] (22:00-06:00)"));
}

TEST(PricingTest, CurvePassesThroughEveryPoint) {
  const PriceSchedule s;
  EXPECT_EQ(utilisation_multiplier(s, 0), 600'000);
  EXPECT_EQ(utilisation_multiplier(s, 700'000), kPpmOne);
  EXPECT_EQ(utilisation_multiplier(s, kPpmOne), 1'500'000);
  PriceSchedule many;
  many.curve = {{0, 500'000},         {100'000, 500'000},   {333'333, 777'777},
                {500'000, 1'000'000}, {500'001, 3'000'000}, {kPpmOne, kMaxMultiplier}};
  ASSERT_EQ(failing_schedule_field(many), "");
  for (const UtilisationPoint& p : many.curve) {
    EXPECT_EQ(utilisation_multiplier(many, p.utilisation), p.multiplier) << p.utilisation;
  }
  // Flat between equal multipliers.
  EXPECT_EQ(utilisation_multiplier(many, 50'000), 500'000);
}

TEST(PricingTest, CurveFollowsSmoothstep) {
  const PriceSchedule s;
  // Halfway along a segment s(x) = 0.5: 0.6 + 0.4 x 0.5.
  EXPECT_EQ(utilisation_multiplier(s, 350'000), 800'000);
  EXPECT_EQ(utilisation_multiplier(s, 850'000), 1'250'000);
  // u = 0.1: x = 1/7 -> 142857 ppm; s = 3x^2 - 2x^3 = 0.055393; 0.6 + 0.4 x 0.055393.
  EXPECT_EQ(utilisation_multiplier(s, 100'000), 622'157);
  EXPECT_EQ(utilisation_multiplier(s, 500'000), 920'700);
  EXPECT_EQ(utilisation_multiplier(s, 900'000), 1'370'371);
  // Flat at the points: one ppm away, the rounded multiplier has not moved.
  EXPECT_EQ(utilisation_multiplier(s, 699'999), kPpmOne);
  EXPECT_EQ(utilisation_multiplier(s, 700'001), kPpmOne);
  EXPECT_EQ(utilisation_multiplier(s, 1), 600'000);
  EXPECT_EQ(utilisation_multiplier(s, 999'999), 1'500'000);
}

TEST(PricingTest, UtilisationIsClamped) {
  const PriceSchedule s;
  EXPECT_EQ(utilisation_multiplier(s, -5), 600'000);
  EXPECT_EQ(utilisation_multiplier(s, kPpmOne + 1), 1'500'000);
  EXPECT_EQ(utilisation_multiplier(s, std::numeric_limits<Ppm>::max()), 1'500'000);
  EXPECT_EQ(utilisation_multiplier(s, std::numeric_limits<Ppm>::min()), 600'000);
}

TEST(PricingTest, CurveIsMonotoneAndBoundedEverywhere) {
  PriceSchedule steep;
  steep.curve = {{0, 1}, {1, kMaxMultiplier}, {kPpmOne, kMaxMultiplier}};
  PriceSchedule uneven;
  uneven.curve = {{0, 100'000},         {3, 100'001},         {250'000, 2'000'000},
                  {250'007, 2'000'000}, {999'999, 9'000'000}, {kPpmOne, 9'000'001}};
  for (const PriceSchedule& s : {PriceSchedule{}, steep, uneven}) {
    ASSERT_EQ(failing_schedule_field(s), "");
    Ppm previous = utilisation_multiplier(s, 0);
    for (Ppm u = 1; u <= kPpmOne; u += 7) {
      const Ppm m = utilisation_multiplier(s, u);
      ASSERT_GE(m, previous) << u;
      ASSERT_GE(m, s.curve.front().multiplier);
      ASSERT_LE(m, s.curve.back().multiplier);
      previous = m;
    }
    EXPECT_EQ(utilisation_multiplier(s, kPpmOne), s.curve.back().multiplier);
  }
}

TEST(PricingTest, TimeOfDayMultiplierFromTheOpenBand) {
  const PriceSchedule s = office_hours();
  EXPECT_EQ(time_of_day_multiplier(s, 0, 0), 800'000);
  EXPECT_EQ(time_of_day_multiplier(s, 7 * kHour - 1, 0), 800'000);
  EXPECT_EQ(time_of_day_multiplier(s, 7 * kHour, 0), kPpmOne);
  EXPECT_EQ(time_of_day_multiplier(s, 9 * kHour - 1, 0), kPpmOne);
  EXPECT_EQ(time_of_day_multiplier(s, 9 * kHour, 0), 1'200'000);
  EXPECT_EQ(time_of_day_multiplier(s, 18 * kHour - 1, 0), 1'200'000);
  EXPECT_EQ(time_of_day_multiplier(s, 18 * kHour, 0), kPpmOne);
  // Every day alike, before time 0 too.
  EXPECT_EQ(time_of_day_multiplier(s, 40 * kDay + 10 * kHour, 0), 1'200'000);
  EXPECT_EQ(time_of_day_multiplier(s, -1, 0), kPpmOne);  // 23:59:59
  EXPECT_EQ(time_of_day_multiplier(s, -kDay + 3 * kHour, 0), 800'000);
  // day_offset: t = 0 is 09:00.
  EXPECT_EQ(time_of_day_multiplier(s, 0, 9 * kHour), 1'200'000);
  EXPECT_EQ(time_of_day_multiplier(s, 9 * kHour, 9 * kHour), kPpmOne);   // 18:00
  EXPECT_EQ(time_of_day_multiplier(s, 15 * kHour, 9 * kHour), 800'000);  // 00:00
  // No bands: x1.
  EXPECT_EQ(time_of_day_multiplier(PriceSchedule{}, 12345, 678), kPpmOne);
}

TEST(PricingTest, WrappingAndAllDayBands) {
  PriceSchedule night;
  night.bands = {band(22 * kHour, 6 * kHour, 500'000)};
  EXPECT_EQ(time_of_day_multiplier(night, 22 * kHour - 1, 0), kPpmOne);
  EXPECT_EQ(time_of_day_multiplier(night, 22 * kHour, 0), 500'000);
  EXPECT_EQ(time_of_day_multiplier(night, kDay - 1, 0), 500'000);
  EXPECT_EQ(time_of_day_multiplier(night, kDay, 0), 500'000);
  EXPECT_EQ(time_of_day_multiplier(night, kDay + 6 * kHour - 1, 0), 500'000);
  EXPECT_EQ(time_of_day_multiplier(night, kDay + 6 * kHour, 0), kPpmOne);
  PriceSchedule always;
  always.bands = {band(0, kDay, 2'000'000)};
  for (Seconds t : {Seconds{0}, Seconds{-1}, kDay - 1, 7 * kHour, -5 * kDay}) {
    EXPECT_EQ(time_of_day_multiplier(always, t, 5 * kHour), 2'000'000) << t;
  }
}

TEST(PricingTest, ClassMultipliersAndJobClasses) {
  const PriceSchedule s;
  EXPECT_EQ(class_multiplier(s, PriceClass::kStandard), kPpmOne);
  EXPECT_EQ(class_multiplier(s, PriceClass::kPreemptible), 600'000);
  EXPECT_EQ(class_multiplier(s, PriceClass::kEmergency), 1'500'000);
  Job job;
  job.preemptible = true;
  EXPECT_EQ(price_class_of(job), PriceClass::kPreemptible);
  job.preemptible = false;
  EXPECT_EQ(price_class_of(job), PriceClass::kStandard);
}

TEST(PricePeriodTest, FloorsToThePeriodAlsoBeforeTimeZero) {
  PriceSchedule s;
  s.period = 300;
  EXPECT_EQ(price_period_start(s, 0), 0);
  EXPECT_EQ(price_period_start(s, 299), 0);
  EXPECT_EQ(price_period_start(s, 300), 300);
  EXPECT_EQ(price_period_start(s, 301), 300);
  EXPECT_EQ(price_period_start(s, -1), -300);
  EXPECT_EQ(price_period_start(s, -300), -300);
  EXPECT_EQ(price_period_start(s, -301), -600);
  s.period = 1;
  EXPECT_EQ(price_period_start(s, -7), -7);
  s.period = kDay;
  EXPECT_EQ(price_period_start(s, 3 * kDay + 5), 3 * kDay);
  EXPECT_EQ(price_period_start(s, -kDay - 1), -2 * kDay);
  EXPECT_EQ(price_period_start(s, kMaxWindowTime), kMaxWindowTime - kMaxWindowTime % kDay);
}

TEST(PriceInForceTest, MadeAtThePeriodStart) {
  const PriceSchedule s = office_hours();  // period 300
  // Cost base 1.74425 at 35% utilisation (x0.8) at 09:01:40, in the x1.2 band:
  // 1744250 x 0.8 = 1395400; x 1.2 = 1674480.
  const Price price = price_in_force(s, 1'744'250, 350'000, 9 * kHour + 100, 0);
  EXPECT_EQ(price, (Price{.cost_base = 1'744'250,
                          .utilisation = 350'000,
                          .utilisation_multiplier = 800'000,
                          .time_multiplier = 1'200'000,
                          .standard_per_hour = 1'674'480,
                          .from = 9 * kHour,
                          .until = 9 * kHour + 300}));
  EXPECT_EQ(class_price(s, price, PriceClass::kStandard), 1'674'480);
  EXPECT_EQ(class_price(s, price, PriceClass::kPreemptible), 1'004'688);
  EXPECT_EQ(class_price(s, price, PriceClass::kEmergency), 2'511'720);
  // A second before 09:00 the period started at 08:55: outside the band until it ends.
  const Price before = price_in_force(s, 1'744'250, 350'000, 9 * kHour - 1, 0);
  EXPECT_EQ(before.from, 9 * kHour - 300);
  EXPECT_EQ(before.until, 9 * kHour);
  EXPECT_EQ(before.time_multiplier, kPpmOne);
  EXPECT_EQ(before.standard_per_hour, 1'395'400);
  // The time of day is that of the period start even when the period reaches into a band.
  PriceSchedule two_hours = office_hours();
  two_hours.period = 2 * kHour;
  const Price straddling = price_in_force(two_hours, 1'000'000, 700'000, 9 * kHour + 10, 0);
  EXPECT_EQ(straddling.from, 8 * kHour);
  EXPECT_EQ(straddling.time_multiplier, kPpmOne);
  EXPECT_EQ(straddling.standard_per_hour, kPpmOne);
  // day_offset shifts the time of day, not the period grid.
  const Price shifted = price_in_force(s, 1'000'000, 700'000, 10, 9 * kHour);
  EXPECT_EQ(shifted.from, 0);
  EXPECT_EQ(shifted.time_multiplier, 1'200'000);
  // Before time zero.
  const Price negative = price_in_force(s, 1'000'000, 0, -1, 0);
  EXPECT_EQ(negative.from, -300);
  EXPECT_EQ(negative.until, 0);
  EXPECT_EQ(negative.standard_per_hour, 600'000);  // x0.6, 23:55 is outside every band
}

TEST(PriceInForceTest, RoundsEachMultiplicationInOrder) {
  PriceSchedule s;
  s.curve = {{0, 1'500'000}, {kPpmOne, 1'500'000}};
  s.bands = {band(0, kDay, 1'500'000)};
  // 3 x 1.5 = 4.5 -> 5; 5 x 1.5 = 7.5 -> 8 (not 3 x 2.25 = 6.75 -> 7).
  const Price price = price_in_force(s, 3, 500'000, 0, 0);
  EXPECT_EQ(price.standard_per_hour, 8);
  EXPECT_EQ(class_price(s, price, PriceClass::kPreemptible), 5);  // 8 x 0.6 = 4.8
  // The same inputs give the same price.
  EXPECT_EQ(price, price_in_force(s, 3, 500'000, 0, 0));
  EXPECT_EQ(price, price_in_force(s, 3, 500'000, 299, 0));
}

TEST(PriceInForceTest, PricesAreHeldToTheLargestAmount) {
  PriceSchedule s;
  s.curve = {{0, kMaxMultiplier}, {kPpmOne, kMaxMultiplier}};
  s.bands = {band(0, kDay, kMaxMultiplier)};
  s.emergency = kMaxMultiplier;
  const Price price = price_in_force(s, kMaxMoney, kPpmOne, 0, 0);
  EXPECT_EQ(price.standard_per_hour, kMaxMoney);
  EXPECT_EQ(class_price(s, price, PriceClass::kEmergency), kMaxMoney);
  EXPECT_EQ(price_in_force(s, 1'000, kPpmOne, 0, 0).standard_per_hour, 1'000'000'000);
}

// Nodes of T4 (model 0) and A100 (model 1); V100 (model 2) has no nodes.
Pool three_model_pool() {
  GpuModelCatalog catalog;
  (void)catalog.intern("T4");
  (void)catalog.intern("A100");
  (void)catalog.intern("V100");
  std::vector<NodeSpec> nodes;
  for (auto [name, model, gpus] :
       {std::tuple{"t4-a", 0U, 4}, std::tuple{"a100-a", 1U, 8}, std::tuple{"t4-b", 0U, 4},
        std::tuple{"a100-b", 1U, 8}, std::tuple{"cpu", 0U, 0}}) {
    NodeSpec spec;
    spec.name = name;
    spec.model = GpuModelId{model};
    spec.gpu_count = gpus;
    spec.milli_cpu = 64'000;
    spec.memory_mib = 262'144;
    nodes.push_back(std::move(spec));
  }
  auto pool = Pool::create(std::move(catalog), Topology::single_leaf(), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

TaskShape task(int gpus, MilliGpu milli) {
  auto shape = make_task_shape(gpus, milli, 1000, 1024);
  EXPECT_TRUE(shape.has_value()) << shape.error().message();
  return shape.value();
}

TEST(PricingTest, ModelUtilisationOverSchedulableNodes) {
  Pool pool = three_model_pool();
  EXPECT_THAT(model_utilisation(pool), ElementsAre(0, 0, 0));
  // T4: 2 whole GPUs + 0.5 of one out of 8 GPUs = 31.25%; A100: 3 of 16 = 18.75%.
  ASSERT_TRUE(pool.allocate(task(2, 1000), {NodeId{0}, 0b0011}).has_value());
  ASSERT_TRUE(pool.allocate(task(1, 500), {NodeId{2}, 0b0001}).has_value());
  ASSERT_TRUE(pool.allocate(task(3, 1000), {NodeId{1}, 0b0111}).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(312'500, 187'500, 0));
  // A cordoned node counts for neither what is allocated nor the capacity.
  ASSERT_TRUE(pool.set_schedulable(NodeId{2}, false).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(500'000, 187'500, 0));
  ASSERT_TRUE(pool.set_schedulable(NodeId{1}, false).has_value());
  ASSERT_TRUE(pool.set_schedulable(NodeId{3}, false).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(500'000, 0, 0));
  ASSERT_TRUE(pool.set_schedulable(NodeId{1}, true).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(500'000, 375'000, 0));
}

TEST(PricingTest, ModelUtilisationRoundsHalfAwayFromZero) {
  Pool pool = three_model_pool();
  ASSERT_TRUE(pool.set_schedulable(NodeId{2}, false).has_value());
  ASSERT_TRUE(pool.set_schedulable(NodeId{3}, false).has_value());
  // 1 milli of 4000 = 250 ppm; 1 milli of 8000 = 125 ppm; 3 of 8000 = 375.
  ASSERT_TRUE(pool.allocate(task(1, 1), {NodeId{0}, 0b0001}).has_value());
  ASSERT_TRUE(pool.allocate(task(1, 3), {NodeId{1}, 0b0001}).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(250, 375, 0));
  // 1 milli of 16000 = 62.5 ppm -> 63.
  ASSERT_TRUE(pool.set_schedulable(NodeId{3}, true).has_value());
  ASSERT_TRUE(pool.release(task(1, 3), {NodeId{1}, 0b0001}).has_value());
  ASSERT_TRUE(pool.allocate(task(1, 1), {NodeId{1}, 0b0001}).has_value());
  EXPECT_THAT(model_utilisation(pool), ElementsAre(250, 63, 0));
}

}  // namespace
}  // namespace tidepool
