#include "core/market_desk.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pool.h"
#include "core/tenants.h"
#include "core/test_pool.h"
#include "core/test_prices.h"

namespace tidepool {
namespace {

using test_support::flat_price_schedule;

using ::testing::HasSubstr;

constexpr GpuModelId kH100{0};
constexpr TenantId kA{0};
constexpr TenantId kB{1};
constexpr Micros kUnit = kMicrosPerUnit;
// 3.6 credits per GPU-hour: one milli-credit per GPU-second.
constexpr Micros kCost = 3'600'000;
// 2026-10-01T00:00:00Z, the first second of 2026-Q4.
constexpr std::int64_t kQ4 = 1'790'812'800;

// Two nodes of 8 H100; tenants A and B guaranteed 8 GPUs each.
struct Fixture {
  Pool pool = test_support::make_test_pool();
  TenantBook book = test_support::two_tenant_book(test_support::one_model_catalog("H100"), 8);
};

BurstOffer offer() {
  return BurstOffer{.name = "cloud",
                    .provider = "p",
                    .model = kH100,
                    .spot = false,
                    .price_per_gpu_hour = 3600 * kUnit,  // one credit per GPU-second
                    .startup_delay = 0,
                    .max_gpus = 64,
                    .interruption_per_hour = 0};
}

MarketDesk make_desk(const Fixture& f, std::int64_t epoch = kQ4, Seconds start = 0,
                     std::vector<std::pair<std::string, Budget>> budgets = {}) {
  auto desk = MarketDesk::create({.prices = flat_price_schedule(),
                                  .cost_base = {kCost},
                                  .epoch = epoch,
                                  .budgets = std::move(budgets),
                                  .offers = {offer()}},
                                 f.pool, f.book, start);
  EXPECT_TRUE(desk.has_value()) << desk.error().message();
  return std::move(desk).value();
}

// `count` one-GPU tasks on node `node`.
std::vector<Assignment> on_node(std::uint32_t node, int count) {
  return std::vector<Assignment>(static_cast<std::size_t>(count), Assignment{NodeId{node}, 0});
}

TEST(MarketDesk, ChargesARunningJobAndKeepsItsTotalsByTenantDayAndQuarter) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  ASSERT_TRUE(desk.start(JobId{1}, kA, on_node(0, 8), 1000, f.pool, PriceClass::kStandard, 0));
  EXPECT_TRUE(desk.running(JobId{1}));
  EXPECT_EQ(desk.running_milli(), 8000);
  ASSERT_TRUE(desk.advance(3600, f.pool));
  // Not posted yet: the job's cost counts it, the totals do not.
  EXPECT_EQ(desk.job_cost(JobId{1}), Micros{8 * 3600 * 1000});
  EXPECT_EQ(desk.tenant_totals(kA), MoneyTotals{});
  ASSERT_TRUE(desk.stop(JobId{1}, 3600));
  EXPECT_FALSE(desk.running(JobId{1}));
  EXPECT_EQ(desk.running_milli(), 0);
  const Micros charged = 8 * 3600 * 1000;  // 8 GPU-hours at 3.6
  EXPECT_EQ(desk.job_cost(JobId{1}), charged);
  EXPECT_EQ(desk.tenant_totals(kA).charges, charged);
  EXPECT_EQ(desk.tenant_totals(kB), MoneyTotals{});
  EXPECT_EQ(desk.quarter_totals(kA, desk.quarter(0)).charges, charged);
  EXPECT_EQ(desk.daily_charges(kA, desk.day(0), 2), (std::vector<Micros>{charged, 0}));
  EXPECT_EQ(desk.charged_days(kA, desk.first_day(), desk.first_day() + 10),
            (std::vector<std::pair<std::int64_t, Micros>>{{desk.first_day(), charged}}));
  // The ledger balances: what A paid, the pool received.
  EXPECT_EQ(desk.ledger().balance(Account::tenant(kA)), -charged);
  EXPECT_EQ(desk.ledger().balance(Account::pool()), charged);
}

TEST(MarketDesk, JobsWithoutGpusAndUnknownStopsAreNotMetered) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  ASSERT_TRUE(desk.start(JobId{1}, kA, on_node(0, 2), 0, f.pool, PriceClass::kStandard, 0));
  EXPECT_FALSE(desk.running(JobId{1}));
  ASSERT_TRUE(desk.advance(100, f.pool));
  EXPECT_TRUE(desk.stop(JobId{1}, 100).has_value());
  EXPECT_TRUE(desk.stop(JobId{7}, 100).has_value());
  EXPECT_TRUE(desk.ledger().entries().empty());
}

TEST(MarketDesk, AClockThatWentBackIsHeldWhereItWas) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  ASSERT_TRUE(desk.start(JobId{1}, kA, on_node(0, 1), 1000, f.pool, PriceClass::kStandard, 0));
  ASSERT_TRUE(desk.advance(100, f.pool));
  EXPECT_TRUE(desk.advance(50, f.pool).has_value());
  EXPECT_EQ(desk.now(), 100);
  ASSERT_TRUE(desk.post(40));
  EXPECT_TRUE(desk.stop(JobId{1}, 60).has_value());
  // 100 GPU-seconds, charged once.
  EXPECT_EQ(desk.tenant_totals(kA).charges, 100 * 1000);
}

TEST(MarketDesk, AnEntryCountsOnTheDayOfItsLastSecond) {
  LedgerEntry e;
  e.from = 86'400 - 60;
  e.to = 86'400;  // ends at midnight: the day before
  EXPECT_EQ(entry_day(e, 0), 0);
  e.to = 86'401;
  EXPECT_EQ(entry_day(e, 0), 1);
  e.from = e.to = 86'400;  // an instant at midnight: that day
  EXPECT_EQ(entry_day(e, 0), 1);
  // With an epoch: time 0 is 2026-10-01T00:00:00Z.
  e.from = 0;
  e.to = 3600;
  EXPECT_EQ(entry_day(e, kQ4), utc_day(kQ4));
}

TEST(MarketDesk, QuartersSplitWhereTheirDaysDo) {
  Fixture f;
  // Time 0 is an hour before 2026-Q4 starts.
  MarketDesk desk = make_desk(f, kQ4 - 3600);
  ASSERT_TRUE(desk.start(JobId{1}, kA, on_node(0, 1), 1000, f.pool, PriceClass::kStandard, 0));
  ASSERT_TRUE(desk.advance(3600, f.pool));
  ASSERT_TRUE(desk.post(3600));  // [0, 3600) ends at midnight: Q3
  ASSERT_TRUE(desk.advance(7200, f.pool));
  ASSERT_TRUE(desk.stop(JobId{1}, 7200));  // [3600, 7200): Q4
  EXPECT_EQ(desk.quarter(3599), quarter_of(kQ4 - 1));
  EXPECT_EQ(desk.quarter(3600), quarter_of(kQ4));
  EXPECT_EQ(desk.quarter_totals(kA, desk.quarter(0)).charges, 3600 * 1000);
  EXPECT_EQ(desk.quarter_totals(kA, desk.quarter(3600)).charges, 3600 * 1000);
  EXPECT_EQ(desk.tenant_totals(kA).charges, 2 * 3600 * 1000);
}

TEST(MarketDesk, LendersAreCreditedWhenOthersUseTheirIdleGuarantee) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  // B runs 16 GPUs: 8 of them are A's idle guarantee.
  ASSERT_TRUE(desk.start(JobId{1}, kB, on_node(0, 8), 1000, f.pool, PriceClass::kStandard, 0));
  ASSERT_TRUE(desk.start(JobId{2}, kB, on_node(1, 8), 1000, f.pool, PriceClass::kStandard, 0));
  ASSERT_TRUE(desk.advance(3600, f.pool));
  ASSERT_TRUE(desk.post(3600));
  EXPECT_EQ(desk.tenant_totals(kB).charges, 16 * 3600 * 1000);
  // The lender's share (default 0.8) of 8 GPU-hours.
  EXPECT_EQ(desk.tenant_totals(kA).credits, 8 * 3600 * 800);
  // Quotas change: the running jobs' usage is recorded in the new book, so they stop cleanly and
  // A is still credited for what B borrows.
  ASSERT_TRUE(
      desk.replace_book(test_support::two_tenant_book(test_support::one_model_catalog("H100"), 8)));
  ASSERT_TRUE(desk.advance(7200, f.pool));
  ASSERT_TRUE(desk.post(7200));
  EXPECT_EQ(desk.tenant_totals(kA).credits, 2 * 8 * 3600 * 800);
  EXPECT_TRUE(desk.stop(JobId{1}, 7200).has_value());
  EXPECT_TRUE(desk.stop(JobId{2}, 7200).has_value());
}

TEST(MarketDesk, BudgetsNameTenantsAndGiveWhatIsLeftInTheQuarter) {
  Fixture f;
  auto refused = MarketDesk::create({.prices = flat_price_schedule(),
                                     .cost_base = {kCost},
                                     .epoch = kQ4,
                                     .budgets = {{"nobody", Budget{.quarterly = kUnit}}},
                                     .offers = {}},
                                    f.pool, f.book, 0);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "budgets.nobody");
  EXPECT_THAT(refused.error().reason, HasSubstr("no tenant 'nobody'"));

  MarketDesk desk = make_desk(f, kQ4, 0, {{"A", Budget{.quarterly = 100 * kUnit}}});
  EXPECT_EQ(desk.budget(kA)->quarterly, 100 * kUnit);
  EXPECT_FALSE(desk.budget(kB).has_value());
  EXPECT_FALSE(desk.budget_status(kB, 0).has_value());
  ASSERT_TRUE(desk.charge_burst(JobId{1}, kA, 0, 1, 0, 30, 30));
  const BudgetStatus status = *desk.budget_status(kA, 30);
  EXPECT_EQ(status.spend, 30 * kUnit);
  EXPECT_EQ(status.remaining, 70 * kUnit);
  EXPECT_EQ(desk.remaining_budgets(30), (std::vector<std::optional<Micros>>{70 * kUnit, {}}));
  // The next quarter starts afresh.
  const Seconds next = quarter_of(kQ4).end - kQ4;
  EXPECT_EQ(desk.remaining_budgets(next)[0], 100 * kUnit);
}

TEST(MarketDesk, BurstChargesPayTheOfferAndCountInTheJobsCost) {
  Fixture f;
  MarketDesk desk = make_desk(f);
  // 2 GPUs over [0, 100], 120 seconds paid (a start-up delay included).
  auto amount = desk.charge_burst(JobId{3}, kB, 0, 2, 0, 100, 120);
  ASSERT_TRUE(amount.has_value()) << amount.error().message();
  EXPECT_EQ(*amount, 240 * kUnit);
  ASSERT_EQ(desk.ledger().entries().size(), 2U);
  EXPECT_EQ(desk.ledger().entries()[0].kind, EntryKind::kBurstCharge);
  EXPECT_EQ(desk.ledger().entries()[1].kind, EntryKind::kBurstCost);
  EXPECT_EQ(desk.ledger().balance(Account::provider(0)), 240 * kUnit);
  EXPECT_EQ(desk.tenant_totals(kB).charges, 240 * kUnit);
  EXPECT_EQ(desk.job_cost(JobId{3}), 240 * kUnit);
  // Under a micro-credit: nothing appended.
  EXPECT_EQ(desk.charge_burst(JobId{3}, kB, 0, 1, 100, 100, 0).value(), 0);
  EXPECT_EQ(desk.ledger().entries().size(), 2U);
  EXPECT_FALSE(desk.charge_burst(JobId{3}, kB, 5, 1, 0, 1, 1).has_value());
}

TEST(MarketDesk, RestoredEntriesCountInTotalsCostsAndHistory) {
  Fixture f;
  MarketDesk first = make_desk(f, 0, 10 * 86'400);
  ASSERT_TRUE(
      first.start(JobId{1}, kA, on_node(0, 1), 1000, f.pool, PriceClass::kStandard, 10 * 86'400));
  ASSERT_TRUE(first.advance(10 * 86'400 + 3600, f.pool));
  ASSERT_TRUE(first.stop(JobId{1}, 10 * 86'400 + 3600));
  // A server that restarts two days later appends the entries again.
  MarketDesk again = make_desk(f, 0, 12 * 86'400);
  for (const LedgerEntry& e : first.ledger().entries()) ASSERT_TRUE(again.restore(e));
  EXPECT_EQ(again.tenant_totals(kA), first.tenant_totals(kA));
  EXPECT_EQ(again.job_cost(JobId{1}), first.job_cost(JobId{1}));
  EXPECT_EQ(again.first_day(), 10);
  EXPECT_EQ(again.daily_charges(kA, 10, 1).front(), 3600 * 1000);
  // An entry the ledger refuses changes nothing.
  LedgerEntry bad = first.ledger().entries().front();
  bad.amount = 0;
  EXPECT_FALSE(again.restore(bad).has_value());
  EXPECT_EQ(again.ledger().entries().size(), first.ledger().entries().size());
}

TEST(MarketDesk, ClosingTheBooksKeepsTotalsHistoryAndJobCostsAcrossARestart) {
  Fixture f;
  constexpr Seconds kDay = 86'400;
  MarketDesk desk = make_desk(f, 0, 10 * kDay);
  ASSERT_TRUE(
      desk.start(JobId{1}, kA, on_node(0, 2), 1000, f.pool, PriceClass::kStandard, 10 * kDay));
  for (Seconds t = 10 * kDay + 3600; t <= 13 * kDay + 7200; t += 3600) {
    ASSERT_TRUE(desk.advance(t, f.pool));
    ASSERT_TRUE(desk.post(t));
  }
  const MoneyTotals totals = desk.tenant_totals(kA);
  const std::vector<Micros> days = desk.daily_charges(kA, 10, 4);
  Micros charged = 0;  // what a restart counts as the job's cost: its posted charges
  for (const LedgerEntry& e : desk.ledger().entries()) {
    if (e.job == JobId{1}) charged += e.amount;
  }
  const std::size_t posted = desk.ledger().entries().size();
  int folds = 0;
  while (desk.close_books(13 * kDay + 7200, BookTerms{}, desk.ledger().entries().size(), 0, {})) {
    ++folds;
  }
  EXPECT_EQ(folds, 3);  // days 10, 11 and 12; day 13 is open
  EXPECT_LT(desk.ledger().entries().size(), posted / 4);
  EXPECT_EQ(desk.tenant_totals(kA), totals);
  EXPECT_EQ(desk.daily_charges(kA, 10, 4), days);
  // A restart reads the folded ledger back: the same totals, history and job cost.
  MarketDesk again = make_desk(f, 0, 14 * kDay);
  for (const LedgerEntry& e : desk.ledger().entries()) ASSERT_TRUE(again.restore(e));
  EXPECT_EQ(again.tenant_totals(kA), totals);
  EXPECT_EQ(again.daily_charges(kA, 10, 4), days);
  EXPECT_EQ(again.job_cost(JobId{1}), charged);
  EXPECT_EQ(again.ledger().next_seq(), desk.ledger().next_seq());
}

}  // namespace
}  // namespace tidepool
