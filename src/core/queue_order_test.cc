#include "core/queue_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"
#include "core/tenants.h"
#include "core/test_pool.h"
#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kA;
using test_support::kB;
using test_support::kC;
using test_support::kDay;

FairShareLedger ledger_of(std::vector<std::int64_t> weights, Seconds half_life = kDay) {
  auto ledger = FairShareLedger::create(std::move(weights), half_life);
  EXPECT_TRUE(ledger.has_value()) << ledger.error().message();
  return *ledger;
}

QueueEntry entry(std::uint32_t job, TenantId tenant, int priority, Seconds submit) {
  return QueueEntry{JobId{job}, tenant, priority, submit};
}

TEST(DecayTest, HandExamples) {
  const Seconds h = 1000;
  EXPECT_EQ(decay(1000, 0, h), 1000);
  EXPECT_EQ(decay(1000, h, h), 500);
  EXPECT_EQ(decay(1000, 2 * h, h), 250);
  EXPECT_EQ(decay(1000, h / 2, h), 707);      // 1000 / sqrt(2) = 707.107
  EXPECT_EQ(decay(1000, h / 4, h), 841);      // 1000 x 2^-0.25 = 840.896
  EXPECT_EQ(decay(1000, 3 * h / 2, h), 354);  // 353.553
  EXPECT_EQ(decay(1000, 63 * h, h), 0);
  EXPECT_EQ(decay(0, h, h), 0);
  // A week with the default half-life halves; a large amount keeps its precision.
  EXPECT_EQ(decay(std::int64_t{1} << 40, kDefaultFairShareHalfLife, kDefaultFairShareHalfLife),
            std::int64_t{1} << 39);
  // 10^12 x 2^(-1/3) = 793700525984.0997 and 2^(-2/3) = 629960524947.4366.
  EXPECT_EQ(decay(1'000'000'000'000, 1, 3), 793'700'525'984);
  EXPECT_EQ(decay(1'000'000'000'000, 2, 3), 629'960'524'947);
  // 10^15 x 2^(-1/7) = 905723664263906.67, to within a unit.
  EXPECT_NEAR(static_cast<double>(decay(1'000'000'000'000'000, 1, 7)), 905723664263906.67, 1.0);
}

TEST(DecayTest, IsMonotoneInElapsedTime) {
  std::int64_t previous = decay(1'000'000, 0, 977);
  for (Seconds t = 1; t < 5000; t += 7) {
    const std::int64_t now = decay(1'000'000, t, 977);
    EXPECT_LE(now, previous) << t;
    previous = now;
  }
}

TEST(FairShareLedgerTest, ChargesAndDecays) {
  FairShareLedger ledger = ledger_of({1, 1});
  ASSERT_TRUE(ledger.charge(kA, 1000, 0, 100).has_value());  // 1 GPU for 100 s
  EXPECT_EQ(ledger.now(), 100);
  EXPECT_EQ(ledger.usage(kA), 100'000);
  EXPECT_EQ(ledger.usage(kB), 0);

  ASSERT_TRUE(ledger.advance_to(100 + kDay).has_value());
  EXPECT_EQ(ledger.usage(kA), 50'000);

  // An interval that ended a half-life ago counts half.
  ASSERT_TRUE(ledger.charge(kB, 2000, 0, 100).has_value());
  EXPECT_EQ(ledger.usage(kB), 100'000);
  EXPECT_EQ(ledger.now(), 100 + kDay);
}

TEST(FairShareLedgerTest, RejectsBadInputChangingNothing) {
  FairShareLedger ledger = ledger_of({1, 1});
  ASSERT_TRUE(ledger.charge(kA, 1000, 0, 10).has_value());
  EXPECT_EQ(ledger.charge(kC, 1000, 0, 10).error().field, "tenant");
  EXPECT_EQ(ledger.charge(kA, -1, 0, 10).error().field, "milli_gpu");
  EXPECT_EQ(ledger.charge(kA, 1000, 20, 10).error().field, "interval");
  EXPECT_EQ(ledger.charge(kA, 1000, -5, 10).error().field, "interval");
  EXPECT_FALSE(ledger.advance_to(5).has_value());
  EXPECT_EQ(ledger.usage(kA), 10'000);
  EXPECT_EQ(ledger.now(), 10);

  EXPECT_EQ(FairShareLedger::create({1, 0}).error().field, "weights[1]");
  EXPECT_EQ(FairShareLedger::create({1}, 0).error().field, "half_life");
  EXPECT_EQ(FairShareLedger::create({1}, kDay, -1).error().field, "start");
}

TEST(FairShareLedgerTest, UsageSaturatesInsteadOfOverflowing) {
  FairShareLedger ledger = ledger_of({1});
  ASSERT_TRUE(ledger.charge(kA, kMaxQuotaMilli, 0, kDay * 365 * 100).has_value());
  ASSERT_TRUE(ledger.charge(kA, kMaxQuotaMilli, 0, kDay * 365 * 100).has_value());
  EXPECT_EQ(ledger.usage(kA), kMaxFairShareUsage);
}

TEST(FairShareLedgerTest, ComparesWeightedSharesExactly) {
  FairShareLedger ledger = ledger_of({3, 1, 2});
  ASSERT_TRUE(ledger.charge(kA, 3000, 0, 100).has_value());  // 300000 / 3 = 100000
  ASSERT_TRUE(ledger.charge(kB, 1000, 0, 100).has_value());  // 100000 / 1 = 100000
  ASSERT_TRUE(ledger.charge(kC, 2001, 0, 100).has_value());  // 200100 / 2 = 100050
  EXPECT_EQ(ledger.compare_share(kA, kB), std::strong_ordering::equal);
  EXPECT_EQ(ledger.compare_share(kA, kC), std::strong_ordering::less);
  EXPECT_EQ(ledger.compare_share(kC, kB), std::strong_ordering::greater);
  EXPECT_DOUBLE_EQ(ledger.share(kC), 100'050.0);
}

TEST(QueueOrderTest, PriorityDominatesFairShare) {
  FairShareLedger ledger = ledger_of({1, 1});
  ASSERT_TRUE(ledger.charge(kA, 1'000'000, 0, 1000).has_value());  // kA has used a lot
  const QueueEntry heavy_high = entry(1, kA, 5, 900);
  const QueueEntry light_low = entry(2, kB, 4, 0);
  EXPECT_TRUE(queue_before(heavy_high, light_low, ledger));
  EXPECT_FALSE(queue_before(light_low, heavy_high, ledger));
}

TEST(QueueOrderTest, LowerDecayedUsageGoesFirst) {
  FairShareLedger ledger = ledger_of({1, 1});
  // kA used 8 GPUs for an hour three days ago; kB 2 GPUs for an hour just now.
  ASSERT_TRUE(ledger.charge(kA, 8000, 0, 3600).has_value());
  ASSERT_TRUE(ledger.charge(kB, 2000, 3 * kDay, 3 * kDay + 3600).has_value());
  // kA: 28.8e6 decayed by 3 days (1/8) = 3.6e6; kB: 7.2e6.
  EXPECT_EQ(ledger.usage(kA), 3'600'000);
  EXPECT_EQ(ledger.usage(kB), 7'200'000);
  EXPECT_TRUE(queue_before(entry(2, kA, 0, 500), entry(1, kB, 0, 10), ledger));

  // An hour later kA runs 8 GPUs for another hour: now kB has the lower share.
  ASSERT_TRUE(ledger.charge(kA, 8000, 3 * kDay + 3600, 3 * kDay + 7200).has_value());
  EXPECT_TRUE(queue_before(entry(1, kB, 0, 10), entry(2, kA, 0, 500), ledger));
}

TEST(QueueOrderTest, WeightsDivideUsage) {
  FairShareLedger ledger = ledger_of({4, 1});
  ASSERT_TRUE(ledger.charge(kA, 3000, 0, 100).has_value());  // 300000 / 4 = 75000
  ASSERT_TRUE(ledger.charge(kB, 1000, 0, 100).has_value());  // 100000 / 1 = 100000
  EXPECT_TRUE(queue_before(entry(9, kA, 0, 50), entry(1, kB, 0, 0), ledger));
}

TEST(QueueOrderTest, TiesGoBySubmitTimeThenId) {
  FairShareLedger ledger = ledger_of({3, 1});
  ASSERT_TRUE(ledger.charge(kA, 3000, 0, 100).has_value());
  ASSERT_TRUE(ledger.charge(kB, 1000, 0, 100).has_value());  // equal weighted shares
  EXPECT_TRUE(queue_before(entry(9, kA, 0, 10), entry(1, kB, 0, 20), ledger));
  EXPECT_TRUE(queue_before(entry(1, kB, 0, 10), entry(9, kA, 0, 10), ledger));
  EXPECT_FALSE(queue_before(entry(9, kA, 0, 10), entry(1, kB, 0, 10), ledger));
  // Same tenant: the share is equal by definition.
  EXPECT_TRUE(queue_before(entry(3, kA, 0, 10), entry(4, kA, 0, 10), ledger));
  EXPECT_FALSE(queue_before(entry(3, kA, 0, 10), entry(3, kA, 0, 10), ledger));
}

// Random entries over few distinct values, so that every key ties often.
std::vector<QueueEntry> random_entries(Rng& rng, int n) {
  std::vector<QueueEntry> entries;
  for (int i = 0; i < n; ++i) {
    entries.push_back(
        entry(static_cast<std::uint32_t>(i), TenantId{static_cast<std::uint32_t>(rng.below(5))},
              static_cast<int>(rng.below(3)) - 1, static_cast<Seconds>(rng.below(4))));
  }
  rng.shuffle(std::span<QueueEntry>(entries));
  return entries;
}

FairShareLedger random_ledger(Rng& rng) {
  FairShareLedger ledger = ledger_of({1, 2, 3, 1, 2});
  for (std::uint32_t t = 0; t < 5; ++t) {
    // Usages 0, 1, 2 or 3 GPU-units x weight, so that shares tie across tenants too.
    const auto milli = static_cast<std::int64_t>(rng.below(4)) * ledger.weight(TenantId{t});
    EXPECT_TRUE(ledger.charge(TenantId{t}, milli, 0, 100).has_value());
  }
  return ledger;
}

TEST(QueueOrderTest, IsAStrictTotalOrder) {
  Rng rng(20240917);
  for (int round = 0; round < 20; ++round) {
    const FairShareLedger ledger = random_ledger(rng);
    const std::vector<QueueEntry> e = random_entries(rng, 30);
    for (const QueueEntry& a : e) {
      EXPECT_FALSE(queue_before(a, a, ledger));
      for (const QueueEntry& b : e) {
        if (a.job == b.job) continue;
        // Exactly one of a < b, b < a (totality and antisymmetry).
        EXPECT_NE(queue_before(a, b, ledger), queue_before(b, a, ledger));
        for (const QueueEntry& c : e) {
          if (queue_before(a, b, ledger) && queue_before(b, c, ledger)) {
            EXPECT_TRUE(queue_before(a, c, ledger));
          }
        }
      }
    }
  }
}

TEST(QueueOrderTest, SortIsDeterministicWhateverTheInputOrder) {
  Rng rng(7);
  const FairShareLedger ledger = random_ledger(rng);
  std::vector<QueueEntry> first = random_entries(rng, 200);
  sort_queue(first, ledger);
  for (std::size_t i = 1; i < first.size(); ++i) {
    EXPECT_TRUE(queue_before(first[i - 1], first[i], ledger));
  }
  for (int round = 0; round < 10; ++round) {
    std::vector<QueueEntry> again = first;
    rng.shuffle(std::span<QueueEntry>(again));
    sort_queue(again, ledger);
    EXPECT_EQ(again, first);
  }
}

TEST(QueueOrderTest, EntryFromJob) {
  Job job;
  job.id = JobId{42};
  job.tenant = kB;
  job.priority_class = 3;
  job.submit_time = 77;
  EXPECT_EQ(queue_entry(job), entry(42, kB, 3, 77));
}

}  // namespace
}  // namespace tidepool
