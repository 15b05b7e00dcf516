#include "core/budget_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/scheduler.h"
#include "core/test_pool.h"
#include "core/test_prices.h"
#include "core/test_units.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

using test_support::flat_price_schedule;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using test_support::kA;
using test_support::kB;
using test_support::kDay;
using test_support::kH100;
constexpr Micros kUnit = kMicrosPerUnit;
// 2026-12-01T00:00:00Z: a month before 2027-Q1.
constexpr std::int64_t kDecemberFirst = 1'796'083'200;
constexpr Seconds kNextQuarter = 1'798'761'600 - kDecemberFirst;  // 2027-01-01T00:00:00Z

struct Fixture {
  Pool pool = test_support::make_test_pool();
  TenantBook book = test_support::two_tenant_book(test_support::one_model_catalog("H100"), 8);
};

// A budget of 100 for A (alert at 50), none for B; a burst offer at one credit per GPU-second,
// which charges exact amounts.
MarketDesk make_desk(const Fixture& f, Seconds start = 0) {
  auto desk = MarketDesk::create(
      {.prices = flat_price_schedule(),
       .cost_base = {3'600'000},
       .epoch = kDecemberFirst,
       .budgets = {{"A", Budget{.quarterly = 100 * kUnit, .soft_alert = 500'000}}},
       .offers = {BurstOffer{.name = "cloud",
                             .provider = "p",
                             .model = kH100,
                             .spot = false,
                             .price_per_gpu_hour = 3600 * kUnit,
                             .startup_delay = 0,
                             .max_gpus = 64,
                             .interruption_per_hour = 0}}},
      f.pool, f.book, start);
  EXPECT_TRUE(desk.has_value()) << desk.error().message();
  return std::move(desk).value();
}

// Charges `tenant` `credits` over the interval ending at `to`.
void spend(MarketDesk& desk, TenantId tenant, Micros credits, Seconds to) {
  ASSERT_TRUE(desk.charge_burst(JobId{99}, tenant, 0, 1, to - 1, to, credits / kUnit));
}

std::vector<MarketEventKind> kinds(const std::vector<MarketEvent>& events) {
  std::vector<MarketEventKind> out;
  for (const MarketEvent& e : events) out.push_back(e.kind);
  return out;
}

using K = MarketEventKind;

TEST(BudgetWatch, AlertsOncePerQuarterThenHoldsWhenExhausted) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  spend(desk, kA, 49 * kUnit, 10);
  EXPECT_THAT(watch.check_budgets(desk, 10), IsEmpty());
  spend(desk, kA, 1 * kUnit, 20);
  const auto alert = watch.check_budgets(desk, 20);
  ASSERT_THAT(kinds(alert), ElementsAre(K::kBudgetAlert));
  EXPECT_EQ(alert[0].tenant, kA);
  EXPECT_EQ(alert[0].tenant_name, "A");
  EXPECT_EQ(alert[0].quarter, "2026-Q4");
  EXPECT_EQ(alert[0].status.state, BudgetState::kAlert);
  EXPECT_EQ(alert[0].status.spend, 50 * kUnit);
  EXPECT_THAT(watch.check_budgets(desk, 30), IsEmpty());
  EXPECT_TRUE(watch.holds().empty());

  spend(desk, kA, 50 * kUnit, 40);
  const auto exhausted = watch.check_budgets(desk, 40);
  ASSERT_THAT(kinds(exhausted), ElementsAre(K::kBudgetExhausted));
  EXPECT_EQ(exhausted[0].status.state, BudgetState::kExhausted);
  EXPECT_THAT(exhausted[0].reason, HasSubstr("budget exhausted: tenant A spent 100.00"));
  ASSERT_TRUE(watch.holds().contains("A"));
  EXPECT_EQ(watch.holds().at("A").quarter, "2026-Q4");
  // Held: later checks say nothing new, but the reason follows the figures.
  spend(desk, kA, 10 * kUnit, 50);
  EXPECT_THAT(watch.check_budgets(desk, 50), IsEmpty());
  EXPECT_THAT(watch.holds().at("A").reason, HasSubstr("spent 110.00"));
  // B has no budget: never held, whatever it spends.
  spend(desk, kB, 1000 * kUnit, 60);
  EXPECT_THAT(watch.check_budgets(desk, 60), IsEmpty());
  EXPECT_FALSE(watch.holds().contains("B"));
}

TEST(BudgetWatch, AlertAndExhaustedInOneCheckComeInThatOrder) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  spend(desk, kA, 150 * kUnit, 10);
  EXPECT_THAT(kinds(watch.check_budgets(desk, 10)),
              ElementsAre(K::kBudgetAlert, K::kBudgetExhausted));
}

TEST(BudgetWatch, LendingCreditsThatBringTheSpendBackRestore) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  spend(desk, kA, 101 * kUnit, 10);
  EXPECT_THAT(kinds(watch.check_budgets(desk, 10)),
              ElementsAre(K::kBudgetAlert, K::kBudgetExhausted));
  // B runs on A's idle guarantee for an hour: A is credited 8 x 3.6 x 0.8 = 23.04.
  ASSERT_TRUE(desk.advance(10, f.pool));
  std::vector<Assignment> node0(8, Assignment{NodeId{0}, 0});
  std::vector<Assignment> node1(8, Assignment{NodeId{1}, 0});
  ASSERT_TRUE(desk.start(JobId{1}, kB, node0, 1000, f.pool, PriceClass::kStandard, 10));
  ASSERT_TRUE(desk.start(JobId{2}, kB, node1, 1000, f.pool, PriceClass::kStandard, 10));
  ASSERT_TRUE(desk.advance(3610, f.pool));
  ASSERT_TRUE(desk.post(3610));
  const auto restored = watch.check_budgets(desk, 3610);
  ASSERT_THAT(kinds(restored), ElementsAre(K::kBudgetRestored));
  EXPECT_EQ(restored[0].status.state, BudgetState::kAlert);
  EXPECT_EQ(restored[0].status.credits, 8 * 3600 * 800);
  EXPECT_TRUE(watch.holds().empty());
}

TEST(BudgetWatch, ANewQuarterRestoresAndAlertsAgain) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  spend(desk, kA, 120 * kUnit, 10);
  (void)watch.check_budgets(desk, 10);
  ASSERT_TRUE(watch.holds().contains("A"));
  // The last second of 2026-Q4: still held.
  EXPECT_THAT(watch.check_budgets(desk, kNextQuarter - 1), IsEmpty());
  // The first check in 2027-Q1 lifts it, with the new quarter's figures.
  const auto restored = watch.check_budgets(desk, kNextQuarter);
  ASSERT_THAT(kinds(restored), ElementsAre(K::kBudgetRestored));
  EXPECT_EQ(restored[0].quarter, "2027-Q1");
  EXPECT_EQ(restored[0].status.spend, 0);
  EXPECT_TRUE(watch.holds().empty());
  // The alert comes again in the new quarter, once.
  spend(desk, kA, 60 * kUnit, kNextQuarter + 100);
  EXPECT_THAT(kinds(watch.check_budgets(desk, kNextQuarter + 100)), ElementsAre(K::kBudgetAlert));
  EXPECT_THAT(watch.check_budgets(desk, kNextQuarter + 200), IsEmpty());
}

TEST(BudgetWatch, ATenantSpentAgainAtTheNewQuartersFirstCheckIsRestoredThenHeldAgain) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  spend(desk, kA, 120 * kUnit, 10);
  (void)watch.check_budgets(desk, 10);
  spend(desk, kA, 120 * kUnit, kNextQuarter + 10);
  const auto events = watch.check_budgets(desk, kNextQuarter + 10);
  EXPECT_THAT(kinds(events), ElementsAre(K::kBudgetRestored, K::kBudgetAlert, K::kBudgetExhausted));
  EXPECT_EQ(watch.holds().at("A").quarter, "2027-Q1");
  EXPECT_THAT(watch.holds().at("A").reason, HasSubstr("2027-Q1"));
}

TEST(BudgetWatch, AnAlertKeptOverARestartIsNotRaisedAgain) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  spend(desk, kA, 60 * kUnit, 10);
  BudgetWatch watch;
  watch.set_alerted("A", "2026-Q4");
  EXPECT_THAT(watch.check_budgets(desk, 10), IsEmpty());
  BudgetWatch stale;
  stale.set_alerted("A", "2026-Q3");
  EXPECT_THAT(kinds(stale.check_budgets(desk, 10)), ElementsAre(K::kBudgetAlert));
}

TEST(BudgetWatch, TellsTheSchedulerWhoIsHeldAndLiftsTheRest) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  auto config = scheduler_policy("tidepool");
  ASSERT_TRUE(config.has_value());
  auto scheduler = Scheduler::create(f.pool, f.book, *config);
  ASSERT_TRUE(scheduler.has_value());
  BudgetWatch watch;
  ASSERT_TRUE(scheduler->set_budget_exhausted(kB, "stale"));
  spend(desk, kA, 120 * kUnit, 10);
  (void)watch.check_budgets(desk, 10);
  ASSERT_TRUE(watch.apply(*scheduler));
  EXPECT_TRUE(scheduler->budget_exhausted(kA));
  EXPECT_FALSE(scheduler->budget_exhausted(kB));
  (void)watch.check_budgets(desk, kNextQuarter);
  ASSERT_TRUE(watch.apply(*scheduler));
  EXPECT_FALSE(scheduler->budget_exhausted(kA));
}

// --- spend anomalies ---------------------------------------------------------------------------

// Charges `tenant` `credits` on day `day` (counted from the epoch's day), ending at noon.
void spend_on_day(MarketDesk& desk, TenantId tenant, Micros credits, int day) {
  spend(desk, tenant, credits, day * kDay + kDay / 2);
}

TEST(SpendWatch, ADayAboveTwiceTheWeeksAverageIsAnAnomalyOnceItEnds) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  for (int day = 0; day < 7; ++day) spend_on_day(desk, kB, 10 * kUnit, day);
  spend_on_day(desk, kB, 21 * kUnit, 7);
  spend_on_day(desk, kA, 20 * kUnit, 7);  // no history before: new work, not an anomaly
  // Checked each day: nothing until day 7 has ended.
  for (int day = 1; day <= 7; ++day) {
    EXPECT_THAT(watch.check_spend(desk, day * kDay), IsEmpty()) << day;
  }
  EXPECT_THAT(watch.check_spend(desk, 7 * kDay + kDay - 1), IsEmpty());
  const auto events = watch.check_spend(desk, 8 * kDay);
  ASSERT_THAT(kinds(events), ElementsAre(K::kSpendAnomaly));
  EXPECT_EQ(events[0].tenant, kB);
  EXPECT_EQ(events[0].day, desk.first_day() + 7);
  EXPECT_EQ(events[0].anomaly.day_spend, 21 * kUnit);
  EXPECT_EQ(events[0].anomaly.trailing_average, 10 * kUnit);
  EXPECT_THAT(events[0].reason, HasSubstr("tenant B spent 21.00 on 2026-12-08"));
  EXPECT_EQ(watch.next_spend_day(), desk.first_day() + 8);
  // Each day once.
  EXPECT_THAT(watch.check_spend(desk, 8 * kDay + 10), IsEmpty());
}

TEST(SpendWatch, TwiceTheAverageIsNotAnAnomalyAndFewerThanSevenDaysAreNoHistory) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  for (int day = 0; day < 6; ++day) spend_on_day(desk, kB, 10 * kUnit, day);
  spend_on_day(desk, kB, 94 * kUnit, 6);  // six days before it only: no history yet
  spend_on_day(desk, kB, 10 * kUnit, 7);
  spend_on_day(desk, kB, 44 * kUnit, 8);  // the average of days 1..7 is 22: exactly twice
  EXPECT_THAT(watch.check_spend(desk, 9 * kDay), IsEmpty());
}

TEST(SpendWatch, EveryDayMissedIsCheckedInOrder) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  for (int day = 0; day < 7; ++day) {
    spend_on_day(desk, kA, 10 * kUnit, day);
    spend_on_day(desk, kB, 10 * kUnit, day);
  }
  spend_on_day(desk, kB, 30 * kUnit, 7);
  spend_on_day(desk, kA, 30 * kUnit, 8);
  // One check after a gap of days: both anomalies, oldest day first.
  const auto events = watch.check_spend(desk, 12 * kDay);
  ASSERT_THAT(kinds(events), ElementsAre(K::kSpendAnomaly, K::kSpendAnomaly));
  EXPECT_EQ(events[0].tenant, kB);
  EXPECT_EQ(events[0].day, desk.first_day() + 7);
  EXPECT_EQ(events[1].tenant, kA);
  EXPECT_EQ(events[1].day, desk.first_day() + 8);
}

TEST(SpendWatch, ChargesEndingAtMidnightBelongToTheDayBefore) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  BudgetWatch watch;
  for (int day = 0; day < 7; ++day) spend_on_day(desk, kB, 10 * kUnit, day);
  // [8d - 1, 8d): day 7's last second.
  spend(desk, kB, 30 * kUnit, 8 * kDay);
  const auto events = watch.check_spend(desk, 8 * kDay);
  ASSERT_THAT(kinds(events), ElementsAre(K::kSpendAnomaly));
  EXPECT_EQ(events[0].day, desk.first_day() + 7);
}

TEST(SpendWatch, DaysBeforeTheOneKeptAreNotCheckedAgain) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  for (int day = 0; day < 7; ++day) spend_on_day(desk, kB, 10 * kUnit, day);
  spend_on_day(desk, kB, 30 * kUnit, 7);
  BudgetWatch watch;
  watch.set_next_spend_day(desk.first_day() +
                           8);  // a server that checked day 7 before it restarted
  EXPECT_THAT(watch.check_spend(desk, 9 * kDay), IsEmpty());
}

}  // namespace
}  // namespace tidepool
