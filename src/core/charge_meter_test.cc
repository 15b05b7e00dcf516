#include "core/charge_meter.h"

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

using test_support::kA;
using test_support::kB;
using test_support::kC;
using test_support::kD;
using test_support::kH100;

// 3.6 credits per GPU-hour: 1000 micro-credits per GPU-second, which keeps the hand computations
// short.
constexpr Micros kCost = 3'600'000;

// x1 when idle, x2 when full; smoothstep gives exactly x1.5 at half full.
PriceSchedule rising_schedule() {
  PriceSchedule s;
  s.curve = {{0, kPpmOne}, {kPpmOne, 2 * kPpmOne}};
  return s;
}

// One leaf, two nodes of 8 H100: 16 GPUs.
Pool two_node_pool() { return test_support::make_test_pool(); }

ChargeMeter make_meter(const Pool& pool, PriceSchedule schedule = flat_price_schedule(),
                       Micros cost = kCost, Seconds start = 0) {
  auto meter = ChargeMeter::create(std::move(schedule), {cost}, 0, start, pool);
  EXPECT_TRUE(meter.has_value()) << meter.error().message();
  return std::move(meter).value();
}

// Tenants with the given H100 guarantees (milli-GPUs), ids in order, in one org.
TenantBook book_with_guarantees(const std::vector<std::int64_t>& guarantees) {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (std::size_t i = 0; i < guarantees.size(); ++i) {
    TenantSpec t;
    t.name = "t" + std::to_string(i);
    t.quotas.push_back({kH100, guarantees[i], std::nullopt, std::nullopt});
    org.tenants.push_back(std::move(t));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), test_support::one_model_catalog("H100"));
  EXPECT_TRUE(book.has_value()) << book.error().message();
  return std::move(book).value();
}

std::vector<ModelMilli> h100_milli(std::int64_t milli) { return {ModelMilli{kH100, milli}}; }

Micros sum_of(const CostLedger& ledger, EntryKind kind, TenantId tenant) {
  Micros sum = 0;
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.kind == kind && e.tenant == tenant) sum += e.amount;
  }
  return sum;
}

TEST(ChargeMeter, ChargesOneJobAtAConstantPriceOverSeveralPeriods) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({16000});
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.advance(100, pool, book).has_value());
  ASSERT_TRUE(meter.start(JobId{1}, kA, h100_milli(2000), PriceClass::kStandard, 100).has_value());
  EXPECT_TRUE(meter.running(JobId{1}));
  ASSERT_TRUE(meter.advance(1000, pool, book).has_value());
  // 2 GPUs x 900 s x 1000 micros per GPU-second = 1'800'000 (periods 300, 600, 900 crossed).
  EXPECT_EQ(meter.job_total(JobId{1}), 1'800'000);
  ASSERT_TRUE(meter.stop(JobId{1}, 1000, ledger).has_value());
  EXPECT_FALSE(meter.running(JobId{1}));
  EXPECT_EQ(meter.job_total(JobId{1}), 0);  // forgotten

  ASSERT_EQ(ledger.entries().size(), 1U);
  const LedgerEntry& e = ledger.entries()[0];
  EXPECT_EQ(e.kind, EntryKind::kCharge);
  EXPECT_EQ(e.debit, Account::tenant(kA));
  EXPECT_EQ(e.credit, Account::pool());
  EXPECT_EQ(e.amount, 1'800'000);
  EXPECT_EQ(e.from, 100);
  EXPECT_EQ(e.to, 1000);
  EXPECT_EQ(e.job, JobId{1});
  EXPECT_EQ(e.model, kH100);
  EXPECT_EQ(e.milli, 2000);
  EXPECT_EQ(e.price_per_hour, kCost);
  EXPECT_EQ(ledger.balance(Account::tenant(kA)), -1'800'000);
  EXPECT_EQ(ledger.balance(Account::pool()), 1'800'000);

  // One price per period: at creation (period 0) and at 300, 600 and 900.
  ASSERT_EQ(meter.price_history().size(), 4U);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& [model, price] = meter.price_history()[i];
    EXPECT_EQ(model, kH100);
    EXPECT_EQ(price.from, static_cast<Seconds>(300 * i));
    EXPECT_EQ(price.until, static_cast<Seconds>(300 * i + 300));
    EXPECT_EQ(price.standard_per_hour, kCost);
  }
  EXPECT_EQ(meter.price(kH100).from, 900);
  EXPECT_EQ(meter.now(), 1000);
}

TEST(ChargeMeter, PriceChangesOnlyAtThePeriodBoundaryWithTheUtilisationThen) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({16000});
  ChargeMeter meter = make_meter(pool, rising_schedule());
  CostLedger ledger;
  EXPECT_EQ(meter.price(kH100).utilisation, 0);
  EXPECT_EQ(meter.price(kH100).standard_per_hour, kCost);
  ASSERT_TRUE(meter.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 0).has_value());

  // Half the pool becomes busy at 100: the price in force holds until the period ends at 300.
  ASSERT_TRUE(meter.advance(100, pool, book).has_value());
  auto eight = make_task_shape(8, 1000, 1000, 1024);
  ASSERT_TRUE(eight.has_value());
  ASSERT_TRUE(pool.allocate(*eight, Assignment{NodeId{0}, 0xFF}).has_value());
  ASSERT_TRUE(meter.advance(200, pool, book).has_value());
  EXPECT_EQ(meter.price(kH100).standard_per_hour, kCost);
  ASSERT_TRUE(meter.advance(700, pool, book).has_value());
  EXPECT_EQ(meter.price(kH100).utilisation, 500'000);
  EXPECT_EQ(meter.price(kH100).utilisation_multiplier, 1'500'000);
  EXPECT_EQ(meter.price(kH100).standard_per_hour, 5'400'000);

  // [0, 300) at 1000 micros per GPU-second, [300, 700) at 1500: 300'000 + 600'000.
  ASSERT_TRUE(meter.stop(JobId{1}, 700, ledger).has_value());
  ASSERT_EQ(ledger.entries().size(), 1U);
  EXPECT_EQ(ledger.entries()[0].amount, 900'000);
  EXPECT_EQ(ledger.entries()[0].price_per_hour, 5'400'000);  // the price in force at the end
  ASSERT_EQ(meter.price_history().size(), 3U);
  EXPECT_EQ(meter.price_history()[0].second.utilisation, 0);
  EXPECT_EQ(meter.price_history()[1].second.from, 300);
  EXPECT_EQ(meter.price_history()[1].second.utilisation, 500'000);
  EXPECT_EQ(meter.price_history()[2].second.from, 600);
}

TEST(ChargeMeter, ClassMultipliersScaleTheCharge) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({16000, 0, 0});
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 0).has_value());
  ASSERT_TRUE(meter.start(JobId{2}, kB, h100_milli(1000), PriceClass::kPreemptible, 0).has_value());
  ASSERT_TRUE(meter.start(JobId{3}, kC, h100_milli(1000), PriceClass::kEmergency, 0).has_value());
  EXPECT_EQ(meter.price_per_hour(kH100, PriceClass::kStandard), 3'600'000);
  EXPECT_EQ(meter.price_per_hour(kH100, PriceClass::kPreemptible), 2'160'000);  // x0.6
  EXPECT_EQ(meter.price_per_hour(kH100, PriceClass::kEmergency), 5'400'000);    // x1.5
  ASSERT_TRUE(meter.advance(3600, pool, book).has_value());
  ASSERT_TRUE(meter.post(3600, ledger).has_value());
  // One GPU-hour each, posted in job order.
  ASSERT_EQ(ledger.entries().size(), 3U);
  EXPECT_EQ(ledger.entries()[0].job, JobId{1});
  EXPECT_EQ(ledger.entries()[0].amount, 3'600'000);
  EXPECT_EQ(ledger.entries()[1].amount, 2'160'000);
  EXPECT_EQ(ledger.entries()[1].price_per_hour, 2'160'000);
  EXPECT_EQ(ledger.entries()[2].amount, 5'400'000);
  EXPECT_EQ(ledger.entries()[2].price_per_hour, 5'400'000);
  // Posting again with nothing accrued writes nothing.
  ASSERT_TRUE(meter.post(3600, ledger).has_value());
  EXPECT_EQ(ledger.entries().size(), 3U);
}

TEST(ChargeMeter, PostingInManySlicesCarriesTheRestAndPostsTheSameTotal) {
  // 1 credit per GPU-hour: a GPU-second is 277.77... micros, never whole.
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({16000});
  ChargeMeter sliced = make_meter(pool, flat_price_schedule(), 1'000'000);
  ChargeMeter whole = make_meter(pool, flat_price_schedule(), 1'000'000);
  CostLedger sliced_ledger;
  CostLedger whole_ledger;
  ASSERT_TRUE(sliced.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 0).has_value());
  ASSERT_TRUE(whole.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 0).has_value());
  for (Seconds t = 7; t < 1000; t += 7) {
    ASSERT_TRUE(sliced.advance(t, pool, book).has_value());
    ASSERT_TRUE(sliced.post(t, sliced_ledger).has_value());
    // Each slice of 7 s is 1944.44... micros: the carry makes some 1944 and some 1945, and
    // what was posted is always the floor of the whole.
    EXPECT_EQ(sliced_ledger.balance(Account::tenant(kA)), -(t * 1'000'000 / 3600));
    if (t == 504) {
      EXPECT_EQ(sliced.job_total(JobId{1}), 140'000);  // 504 s: exactly 140'000
    }
  }
  ASSERT_TRUE(sliced.advance(1000, pool, book).has_value());
  ASSERT_TRUE(whole.advance(1000, pool, book).has_value());
  EXPECT_EQ(whole.job_total(JobId{1}), 277'777);  // floor(1000 x 1e6 / 3600)
  ASSERT_TRUE(sliced.stop(JobId{1}, 1000, sliced_ledger).has_value());
  ASSERT_TRUE(whole.stop(JobId{1}, 1000, whole_ledger).has_value());
  EXPECT_EQ(sliced_ledger.balance(Account::tenant(kA)), -277'777);
  EXPECT_EQ(whole_ledger.balance(Account::tenant(kA)), -277'777);
  EXPECT_EQ(whole_ledger.entries().size(), 1U);
  EXPECT_EQ(sliced_ledger.entries().size(), 143U);  // 142 slices of 7 s and the last 6 s
  // Each entry covers the time since the previous posting.
  EXPECT_EQ(sliced_ledger.entries()[1].from, 7);
  EXPECT_EQ(sliced_ledger.entries()[1].to, 14);
  EXPECT_EQ(sliced_ledger.entries().back().from, 994);
  EXPECT_EQ(sliced_ledger.entries().back().to, 1000);
}

TEST(ChargeMeter, LendingCreditsSplitProRataByLargestRemainder) {
  Pool pool = two_node_pool();
  // A may lend 2000m, B 1000m; D borrows 1001m of their idle guarantee.
  TenantBook book = book_with_guarantees({2000, 1000, 0, 0});
  ASSERT_TRUE(book.record_usage(kD, kH100, 1001).has_value());
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.advance(1800, pool, book).has_value());
  ASSERT_TRUE(meter.post(1800, ledger).has_value());
  ASSERT_TRUE(meter.advance(3600, pool, book).has_value());
  ASSERT_TRUE(meter.post(3600, ledger).has_value());
  // 1001 x 2000/3000 = 667.33 and 1001 x 1000/3000 = 333.67: B's remainder is the larger, so
  // the milli left over is B's: 667 and 334. A lent milli-GPU-hour is credited
  // 3600 x 0.8 = 2880 micros.
  EXPECT_EQ(sum_of(ledger, EntryKind::kLendingCredit, kA), 667 * 2880);
  EXPECT_EQ(sum_of(ledger, EntryKind::kLendingCredit, kB), 334 * 2880);
  EXPECT_EQ(ledger.balance(Account::tenant(kA)), 1'920'960);
  EXPECT_EQ(ledger.balance(Account::tenant(kB)), 961'920);
  EXPECT_EQ(ledger.balance(Account::pool()), -(1'920'960 + 961'920));
  // Two postings, each in tenant order.
  ASSERT_EQ(ledger.entries().size(), 4U);
  const LedgerEntry& e = ledger.entries()[2];
  EXPECT_EQ(e.kind, EntryKind::kLendingCredit);
  EXPECT_EQ(e.debit, Account::pool());
  EXPECT_EQ(e.credit, Account::tenant(kA));
  EXPECT_EQ(e.tenant, kA);
  EXPECT_FALSE(e.job.has_value());
  EXPECT_EQ(e.milli, 667);
  EXPECT_EQ(e.price_per_hour, 2'880'000);
  EXPECT_EQ(e.from, 1800);
  EXPECT_EQ(e.to, 3600);
  EXPECT_EQ(ledger.entries()[3].tenant, kB);
  EXPECT_EQ(ledger.entries()[3].milli, 334);
}

TEST(ChargeMeter, EqualRemaindersGoToTheLowerTenantId) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({1000, 1000, 1000, 0});
  ASSERT_TRUE(book.record_usage(kD, kH100, 1000).has_value());
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.advance(3600, pool, book).has_value());
  ASSERT_TRUE(meter.post(3600, ledger).has_value());
  // 333.33 each; the one milli left goes to A.
  EXPECT_EQ(ledger.balance(Account::tenant(kA)), 334 * 2880);
  EXPECT_EQ(ledger.balance(Account::tenant(kB)), 333 * 2880);
  EXPECT_EQ(ledger.balance(Account::tenant(kC)), 333 * 2880);
  EXPECT_EQ(ledger.balance(Account::tenant(kD)), 0);  // no job of D was metered
}

TEST(ChargeMeter, NoCreditWhenNothingIsBorrowed) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({8000, 8000});
  ASSERT_TRUE(book.record_usage(kB, kH100, 8000).has_value());  // B at its guarantee
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.advance(7200, pool, book).has_value());
  ASSERT_TRUE(meter.post(7200, ledger).has_value());
  EXPECT_TRUE(ledger.entries().empty());
}

TEST(ChargeMeter, UnguaranteedCapacityCreditsNobody) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({1000, 0});
  // B borrows 2000m while A uses all of its guarantee: the capacity was nobody's guarantee.
  ASSERT_TRUE(book.record_usage(kA, kH100, 1000).has_value());
  ASSERT_TRUE(book.record_usage(kB, kH100, 2000).has_value());
  ChargeMeter meter = make_meter(pool);
  CostLedger ledger;
  ASSERT_TRUE(meter.advance(3600, pool, book).has_value());
  ASSERT_TRUE(meter.post(3600, ledger).has_value());
  EXPECT_TRUE(ledger.entries().empty());
  // A frees half its guarantee: only those 500m were lent, not the 2000m borrowed.
  ASSERT_TRUE(book.refund(kA, kH100, 500).has_value());
  ASSERT_TRUE(meter.advance(7200, pool, book).has_value());
  ASSERT_TRUE(meter.post(7200, ledger).has_value());
  ASSERT_EQ(ledger.entries().size(), 1U);
  EXPECT_EQ(ledger.entries()[0].amount, 500 * 2880);
  EXPECT_EQ(ledger.entries()[0].milli, 500);
  EXPECT_EQ(ledger.entries()[0].from, 3600);  // first accrued at 3600
}

TEST(ChargeMeter, CreateRefusesBadInputNamingTheField) {
  Pool pool = two_node_pool();
  auto two = ChargeMeter::create(flat_price_schedule(), {kCost, kCost}, 0, 0, pool);
  ASSERT_FALSE(two.has_value());
  EXPECT_EQ(two.error().field, "cost_base");
  auto none = ChargeMeter::create(flat_price_schedule(), {}, 0, 0, pool);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().field, "cost_base");
  auto zero = ChargeMeter::create(flat_price_schedule(), {0}, 0, 0, pool);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().field, "cost_base");
  PriceSchedule no_period = flat_price_schedule();
  no_period.period = 0;
  auto bad_schedule = ChargeMeter::create(no_period, {kCost}, 0, 0, pool);
  ASSERT_FALSE(bad_schedule.has_value());
  EXPECT_EQ(bad_schedule.error().field, "period");
  auto bad_offset = ChargeMeter::create(flat_price_schedule(), {kCost}, 86400, 0, pool);
  ASSERT_FALSE(bad_offset.has_value());
  EXPECT_EQ(bad_offset.error().field, "day_offset");
}

TEST(ChargeMeter, RefusesBadCallsAsValuesAndChangesNothing) {
  Pool pool = two_node_pool();
  TenantBook book = book_with_guarantees({16000});
  ChargeMeter meter = make_meter(pool, flat_price_schedule(), kCost, 100);
  CostLedger ledger;
  const auto field = [](const Result<void>& r) { return r ? std::string() : r.error().field; };

  EXPECT_EQ(field(meter.advance(99, pool, book)), "now");
  EXPECT_EQ(meter.now(), 100);
  EXPECT_EQ(field(meter.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 150)), "now");
  EXPECT_EQ(field(meter.start(JobId{1}, kA, h100_milli(0), PriceClass::kStandard, 100)),
            "gpus[0].milli");
  EXPECT_EQ(field(meter.start(JobId{1}, kA, h100_milli(-1000), PriceClass::kStandard, 100)),
            "gpus[0].milli");
  const std::vector<ModelMilli> unknown = {{GpuModelId{3}, 1000}};
  EXPECT_EQ(field(meter.start(JobId{1}, kA, unknown, PriceClass::kStandard, 100)), "gpus[0].model");
  const std::vector<ModelMilli> twice = {{kH100, 1000}, {kH100, 500}};
  EXPECT_EQ(field(meter.start(JobId{1}, kA, twice, PriceClass::kStandard, 100)), "gpus[1].model");
  EXPECT_FALSE(meter.running(JobId{1}));

  ASSERT_TRUE(meter.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 100).has_value());
  EXPECT_EQ(field(meter.start(JobId{1}, kA, h100_milli(1000), PriceClass::kStandard, 100)), "job");
  EXPECT_EQ(field(meter.stop(JobId{2}, 100, ledger)), "job");
  ASSERT_TRUE(meter.advance(200, pool, book).has_value());
  EXPECT_EQ(field(meter.stop(JobId{1}, 300, ledger)), "now");
  EXPECT_EQ(field(meter.post(150, ledger)), "now");
  EXPECT_TRUE(ledger.entries().empty());
  EXPECT_TRUE(meter.running(JobId{1}));
  EXPECT_EQ(meter.job_total(JobId{1}), 100'000);  // 100 s of one GPU
  EXPECT_EQ(meter.job_total(JobId{2}), 0);
}

}  // namespace
}  // namespace tidepool
