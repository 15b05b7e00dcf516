// Property test of the market desk: after any sequence of advance, start, stop, post, burst
// charge and book replacement, over day and quarter boundaries,
//   - the ledger balances to zero and its balances rebuild from the entries alone;
//   - each tenant's totals are the sums of its entries, and so are its days' and its quarters';
//   - the desk's running usage is that of the jobs it runs;
//   - once everything has stopped and posted, the jobs' costs add up to the tenants' charges.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/market_desk.h"
#include "core/rng.h"
#include "core/test_pool.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

constexpr int kSeeds = 200;
constexpr int kSteps = 120;
constexpr int kTenants = 3;
// Two days before 2026-Q4: runs cross days and a quarter.
constexpr std::int64_t kEpoch = 1'790'812'800 - 2 * kSecondsPerDay;

TenantBook make_book(const GpuModelCatalog& models) {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (int t = 0; t < kTenants; ++t) {
    TenantSpec tenant;
    tenant.name = "t" + std::to_string(t);
    for (std::uint32_t m = 0; m < 2; ++m) {
      tenant.quotas.push_back({GpuModelId{m}, (t + 1) * 2000, std::nullopt, std::nullopt});
    }
    org.tenants.push_back(std::move(tenant));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), models);
  EXPECT_TRUE(book.has_value()) << book.error().message();
  return std::move(book).value();
}

struct Running {
  TenantId tenant;
  std::int64_t milli = 0;
};

void check_books(const MarketDesk& desk, const std::map<JobId, Running>& running,
                 std::uint64_t seed, int step) {
  const CostLedger& ledger = desk.ledger();
  Micros sum = 0;
  for (const auto& [account, balance] : ledger.balances()) sum += balance;
  ASSERT_EQ(sum, 0) << "seed " << seed << " step " << step;
  ASSERT_EQ(CostLedger::rebuild_balances(ledger.entries()), ledger.balances()) << "seed " << seed;
  std::vector<MoneyTotals> expected(kTenants);
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.kind == EntryKind::kLendingCredit) expected[e.tenant.value].credits += e.amount;
    if (e.kind == EntryKind::kCharge || e.kind == EntryKind::kBurstCharge) {
      expected[e.tenant.value].charges += e.amount;
    }
  }
  const Quarter q3 = quarter_of(kEpoch);
  const Quarter q4 = quarter_of(q3.end);
  for (std::uint32_t t = 0; t < kTenants; ++t) {
    const TenantId tenant{t};
    ASSERT_EQ(desk.tenant_totals(tenant), expected[t]) << "seed " << seed << " step " << step;
    Micros by_day = 0;
    for (Micros c : desk.daily_charges(tenant, desk.first_day(), 30)) by_day += c;
    ASSERT_EQ(by_day, expected[t].charges) << "seed " << seed << " step " << step;
    const MoneyTotals a = desk.quarter_totals(tenant, q3);
    const MoneyTotals b = desk.quarter_totals(tenant, q4);
    ASSERT_EQ(a.charges + b.charges, expected[t].charges) << "seed " << seed;
    ASSERT_EQ(a.credits + b.credits, expected[t].credits) << "seed " << seed;
  }
  std::int64_t milli = 0;
  for (const auto& [job, run] : running) milli += run.milli;
  ASSERT_EQ(desk.running_milli(), milli) << "seed " << seed << " step " << step;
}

// Seeds whose charges fell in both quarters: the split was exercised.
int seeds_over_quarters = 0;

void run_seed(std::uint64_t seed) {
  Rng rng(seed);
  const Pool pool = test_support::make_two_model_pool();
  const TenantBook book = make_book(pool.models());
  auto created = MarketDesk::create(
      {.prices = PriceSchedule{},
       .cost_base = {2'000'000 + static_cast<Micros>(rng.below(1000)), 1'000'000},
       .epoch = kEpoch,
       .budgets = {},
       .offers = {BurstOffer{.name = "cloud",
                             .provider = "p",
                             .model = GpuModelId{0},
                             .spot = false,
                             .price_per_gpu_hour = 4'000'000,
                             .startup_delay = 600,
                             .max_gpus = 64,
                             .interruption_per_hour = 0}}},
      pool, book, 0);
  ASSERT_TRUE(created.has_value()) << created.error().message();
  MarketDesk& desk = *created;
  std::map<JobId, Running> running;
  std::uint32_t next_job = 0;
  Seconds now = 0;
  for (int step = 0; step < kSteps; ++step) {
    now += static_cast<Seconds>(rng.below(4) == 0 ? 0 : rng.below(7200));
    ASSERT_TRUE(desk.advance(now, pool));
    switch (rng.below(6)) {
      case 0:
      case 1: {  // a job starts on 1..3 nodes
        const TenantId tenant{static_cast<std::uint32_t>(rng.below(kTenants))};
        std::vector<Assignment> tasks;
        for (std::uint64_t i = 0, n = 1 + rng.below(3); i < n; ++i) {
          tasks.push_back({NodeId{static_cast<std::uint32_t>(rng.below(4))}, 0});
        }
        const std::int64_t milli_per_task = std::int64_t{250} << rng.below(5);
        const JobId job{next_job++};
        ASSERT_TRUE(desk.start(job, tenant, tasks, milli_per_task, pool,
                               static_cast<PriceClass>(rng.below(3)), now));
        running[job] = {tenant, milli_per_task * static_cast<std::int64_t>(tasks.size())};
        break;
      }
      case 2:  // a job stops
        if (!running.empty()) {
          auto it = running.begin();
          std::advance(it, static_cast<long>(rng.below(running.size())));
          ASSERT_TRUE(desk.stop(it->first, now));
          running.erase(it);
        }
        break;
      case 3:
        ASSERT_TRUE(desk.post(now));
        break;
      case 4: {  // a rental ends
        const Seconds from = std::max<Seconds>(0, now - static_cast<Seconds>(rng.below(20'000)));
        ASSERT_TRUE(desk.charge_burst(
            JobId{next_job++}, TenantId{static_cast<std::uint32_t>(rng.below(kTenants))}, 0,
            1 + static_cast<std::int64_t>(rng.below(8)), from, now, now - from + 600));
        break;
      }
      case 5:  // quotas change
        ASSERT_TRUE(desk.replace_book(book));
        break;
    }
    check_books(desk, running, seed, step);
    if (::testing::Test::HasFatalFailure()) return;
  }
  while (!running.empty()) {
    ASSERT_TRUE(desk.stop(running.begin()->first, now));
    running.erase(running.begin());
  }
  ASSERT_TRUE(desk.post(now));
  check_books(desk, running, seed, kSteps);
  Micros costs = 0;
  for (std::uint32_t j = 0; j < next_job; ++j) costs += desk.job_cost(JobId{j});
  Micros charges = 0;
  for (std::uint32_t t = 0; t < kTenants; ++t) charges += desk.tenant_totals(TenantId{t}).charges;
  EXPECT_EQ(costs, charges) << "seed " << seed;
  const Quarter q3 = quarter_of(kEpoch);
  if (desk.quarter_totals(TenantId{0}, q3).charges > 0 &&
      desk.quarter_totals(TenantId{0}, quarter_of(q3.end)).charges > 0) {
    ++seeds_over_quarters;
  }
}

TEST(MarketDeskProperty, LedgerBalancesAndTotalsAddUpAfterAnySequence) {
  for (int seed = 1; seed <= kSeeds; ++seed) {
    run_seed(static_cast<std::uint64_t>(seed));
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopped at seed " << seed;
      return;
    }
  }
  EXPECT_GT(seeds_over_quarters, kSeeds / 4);
}

}  // namespace
}  // namespace tidepool
