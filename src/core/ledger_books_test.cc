#include "core/ledger_books.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/budget.h"
#include "core/market_desk.h"
#include "core/test_ledger.h"
#include "core/test_pool.h"

namespace tidepool {
namespace ledger_books_test {
namespace {

constexpr TenantId kA = test_support::kA;
constexpr TenantId kB = test_support::kB;
constexpr GpuModelId kA100 = test_support::kA100;
using test_support::charge_entry;
using test_support::lending_credit_entry;

constexpr Seconds kDay = 86400;
constexpr Seconds kDay0 = 20'000 * kDay;  // a midnight, in Unix seconds

// Two jobs of A and one of B posting every `step` seconds from kDay0 for `days` days, and A's
// lending credits.
CostLedger posted_ledger(int days, Seconds step) {
  CostLedger ledger;
  for (Seconds t = kDay0; t < kDay0 + days * kDay; t += step) {
    EXPECT_TRUE(ledger.append(charge_entry(kA, 10, t, t + step, JobId{1})));
    EXPECT_TRUE(ledger.append(charge_entry(kA, 20, t, t + step, JobId{2})));
    EXPECT_TRUE(ledger.append(charge_entry(kB, 30, t, t + step, JobId{3})));
    EXPECT_TRUE(ledger.append(lending_credit_entry(kA, 5, t, t + step)));
  }
  return ledger;
}

// The first fold due at `now` over the first `foldable` entries (all by default), epoch 0.
std::optional<LedgerFold> fold_due(const CostLedger& ledger, Seconds now,
                                   const BookTerms& terms = {}, std::size_t most = 0,
                                   const std::function<bool(JobId)>& live = {},
                                   std::size_t foldable = SIZE_MAX) {
  return next_fold({.entries = ledger.entries(),
                    .foldable = std::min(foldable, ledger.entries().size()),
                    .now = now,
                    .epoch = 0,
                    .most = most,
                    .live = live},
                   terms);
}

// Folds until nothing is due at `now`; returns how many folds were applied.
int close_all(CostLedger& ledger, Seconds now, const BookTerms& terms, std::size_t most = 0,
              const std::function<bool(JobId)>& live = {}) {
  int folds = 0;
  while (auto fold = fold_due(ledger, now, terms, most, live)) {
    EXPECT_TRUE(ledger.apply(*fold)) << "fold " << folds;
    if (++folds > 10'000) break;
  }
  return folds;
}

// Each tenant's charges and credits on each UTC day (entry_day), and over every whole-day bill
// window [day, day + 1) by `to`; the days before `opening` (level 3's) as one.
struct DayFigures {
  std::map<std::pair<std::uint32_t, std::int64_t>, std::pair<Micros, Micros>> by_entry_day;
  std::map<std::pair<std::uint32_t, std::int64_t>, std::pair<Micros, Micros>> bills;
  std::map<std::pair<std::uint32_t, std::int64_t>, std::int64_t> milli_seconds;

  DayFigures(const CostLedger& ledger, int days, std::int64_t opening = kDay0 / kDay - 10) {
    for (const LedgerEntry& e : ledger.entries()) {
      const std::int64_t day = std::max(entry_day(e, 0), opening - 1);
      auto& sums = by_entry_day[{e.tenant.value, day}];
      (e.kind == EntryKind::kLendingCredit ? sums.second : sums.first) += e.amount;
      milli_seconds[{e.tenant.value, day}] += paid_milli_seconds(e);
    }
    for (TenantId t : {kA, kB}) {
      for (std::int64_t d = kDay0 / kDay - 1; d <= kDay0 / kDay + days; ++d) {
        const auto totals = ledger.tenant_totals(t, d * kDay, (d + 1) * kDay);
        auto& sums = bills[{t.value, std::max(d, opening - 1)}];
        sums.first += totals.charges;
        sums.second += totals.credits;
      }
    }
  }
};

bool same(const DayFigures& a, const DayFigures& b) {
  return a.by_entry_day == b.by_entry_day && a.milli_seconds == b.milli_seconds &&
         a.bills == b.bills;
}

TEST(LedgerBooks, TermsAreChecked) {
  EXPECT_TRUE(validate(BookTerms{}));
  auto zero = validate(BookTerms{.job_days = 0, .day_days = 400});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().field, "job_days");
  auto shorter = validate(BookTerms{.job_days = 92, .day_days = 30});
  ASSERT_FALSE(shorter);
  EXPECT_EQ(shorter.error().field, "day_days");
}

TEST(LedgerBooks, AClosedDayKeepsOneEntryPerJobAndNothingAReportReads) {
  CostLedger ledger = posted_ledger(3, 600);  // 144 postings a day, 4 entries each
  const auto balances = ledger.balances();
  const DayFigures before(ledger, 3);
  const std::uint64_t next = ledger.next_seq();

  // While day 0 is open, its entries an hour old fold: 138 postings into one entry per job and
  // the credits.
  EXPECT_EQ(close_all(ledger, kDay0 + kDay, BookTerms{}), 1);
  EXPECT_EQ(ledger.entries().size(), 3U * 144 * 4 - 138 * 4 + 4);
  // Day 0 is over once a second of day 1 has passed; its last hour folds with the rest: 3 jobs and
  // the credits, apart for the interval ending at midnight. Day 1 has nothing an hour old yet.
  EXPECT_EQ(close_all(ledger, kDay0 + kDay + 1, BookTerms{}), 1);
  EXPECT_EQ(ledger.entries().size(), 3U * 144 * 4 - 144 * 4 + 8);

  EXPECT_EQ(close_all(ledger, kDay0 + 4 * kDay, BookTerms{}), 2);
  EXPECT_EQ(ledger.entries().size(), 3U * 8);
  EXPECT_EQ(ledger.balances(), balances);
  EXPECT_TRUE(same(before, DayFigures(ledger, 3)));
  EXPECT_EQ(ledger.next_seq(), next);  // what is posted next follows the last seq
  for (const LedgerEntry& e : ledger.entries()) {
    EXPECT_GT(e.folded, 0);
    ASSERT_TRUE(e.kind == EntryKind::kLendingCredit || e.job.has_value());
  }
  // Job 1's day 1: 143 intervals inside the day, one ending at midnight.
  const LedgerEntry& job1 = ledger.entries()[8];
  EXPECT_EQ(job1.job, JobId{1});
  EXPECT_EQ(job1.folded, 143);
  EXPECT_EQ(job1.amount, 1430);
  EXPECT_EQ(job1.from, kDay0 + kDay);
  EXPECT_EQ(job1.to, kDay0 + 2 * kDay - 600);
  EXPECT_EQ(job1.milli, 1000);
  EXPECT_EQ(job1.milli_seconds, 143 * 600 * 1000);
  EXPECT_EQ(close_all(ledger, kDay0 + 4 * kDay, BookTerms{}), 0);  // nothing more to fold
}

TEST(LedgerBooks, OldDaysLoseTheirJobsThenTheirDaysAndALiveJobKeepsItsOwn) {
  CostLedger ledger = posted_ledger(10, 3600);
  const auto balances = ledger.balances();
  const BookTerms terms{.job_days = 2, .day_days = 5};
  const auto live = [](JobId job) { return job == JobId{2}; };
  close_all(ledger, kDay0 + 11 * kDay, terms, 0, live);
  EXPECT_EQ(ledger.balances(), balances);

  std::set<std::int64_t> days_by_job;
  std::map<std::optional<JobId>, int> opening;
  for (const LedgerEntry& e : ledger.entries()) {
    const std::int64_t day = entry_day(e, 0) - kDay0 / kDay;
    if (day <= 4) {
      ++opening[e.job];
    } else if (e.job && *e.job != JobId{2} && day < 8) {
      days_by_job.insert(day);  // days 8 and 9 keep their jobs; 5..7 only the live one
    }
  }
  EXPECT_TRUE(days_by_job.empty()) << *days_by_job.begin();
  // The opening entries: A's credits, job 2 (live), and A's and B's other charges; each twice,
  // for the intervals ending at the first kept day's midnight are carried apart.
  EXPECT_EQ(opening.size(), 2U);
  EXPECT_EQ(opening[std::nullopt], 6);
  EXPECT_EQ(opening[JobId{2}], 2);
  // Everything before day 5 is in the opening entries: their sum is days 0..4's.
  Micros a_opening = 0;
  for (const LedgerEntry& e : ledger.entries()) {
    if (e.tenant == kA && e.kind == EntryKind::kCharge && entry_day(e, 0) <= kDay0 / kDay + 4) {
      a_opening += e.amount;
    }
  }
  EXPECT_EQ(a_opening, (10 + 20) * 5 * 24);
}

TEST(LedgerBooks, ACommitTooSmallForADaysJobsFoldsItByTenantAndModel) {
  CostLedger ledger;
  for (Seconds t = kDay0; t < kDay0 + kDay; t += 3600) {
    for (std::uint32_t job = 1; job <= 40; ++job) {
      ASSERT_TRUE(ledger.append(charge_entry(job % 2 ? kA : kB, 7, t, t + 1800, JobId{job})));
    }
  }
  const auto balances = ledger.balances();
  // 40 jobs a day do not fit in 8 carried entries; A and B do.
  auto fold = fold_due(ledger, kDay0 + 2 * kDay, BookTerms{}, 8);
  ASSERT_TRUE(fold);
  ASSERT_EQ(fold->carried.size(), 2U);
  EXPECT_FALSE(fold->carried[0].job);
  EXPECT_EQ(fold->carried[0].folded + fold->carried[1].folded, 24 * 40);
  ASSERT_TRUE(ledger.apply(*fold));
  EXPECT_EQ(ledger.balances(), balances);
  // With room for one entry, nothing fits: the day is left as it is.
  CostLedger small;
  ASSERT_TRUE(small.append(charge_entry(kA, 7, kDay0, kDay0 + 60, JobId{1})));
  ASSERT_TRUE(small.append(charge_entry(kB, 7, kDay0, kDay0 + 60, JobId{2})));
  ASSERT_TRUE(small.append(charge_entry(kA, 7, kDay0 + 60, kDay0 + 120, JobId{1})));
  EXPECT_FALSE(fold_due(small, kDay0 + 2 * kDay, BookTerms{}, 1));
}

TEST(LedgerBooks, OnlyTheEntriesStoredAreFolded) {
  CostLedger ledger = posted_ledger(2, 3600);
  const auto foldable = ledger.entries().size() / 4;  // part of day 0
  auto fold = fold_due(ledger, kDay0 + 3 * kDay, BookTerms{}, 0, {}, foldable);
  ASSERT_TRUE(fold);
  EXPECT_EQ(fold->first_seq, 1U);
  EXPECT_EQ(fold->last_seq, foldable);
}

TEST(LedgerBooks, AFoldThatWouldChangeABalanceIsRefused) {
  CostLedger ledger = posted_ledger(1, 3600);
  auto fold = fold_due(ledger, kDay0 + 2 * kDay);
  ASSERT_TRUE(fold);
  LedgerFold wrong = *fold;
  wrong.carried.front().amount += 1;
  EXPECT_FALSE(ledger.apply(wrong));
  LedgerFold outside = *fold;
  outside.carried.back().seq = fold->last_seq + 1;
  EXPECT_FALSE(ledger.apply(outside));
  EXPECT_FALSE(ledger.apply(LedgerFold{.first_seq = 500, .last_seq = 600, .carried = {}}));
  EXPECT_EQ(ledger.entries().size(), 24U * 4);
  EXPECT_TRUE(ledger.apply(*fold));
}

TEST(LedgerBooks, ARestoredLedgerKeepsItsSeqsAndGoesOnAfterTheLast) {
  CostLedger ledger;
  LedgerEntry e = charge_entry(kA, 5, kDay0, kDay0 + 60, JobId{1});
  e.seq = 7;
  EXPECT_EQ(ledger.restore(e), 7U);
  e.seq = 6;
  EXPECT_FALSE(ledger.restore(e));
  ledger.skip_through(9);
  EXPECT_EQ(ledger.append(charge_entry(kA, 5, kDay0 + 60, kDay0 + 120, JobId{1})), 10U);
}

// Property: random postings (jobs starting and stopping, credits, instants at midnight), closed
// at random times, keep every balance, day total and whole-day bill, and end no larger than the
// terms allow.
TEST(LedgerBooks, FoldingAtAnyTimeKeepsEveryFigure) {
  for (std::uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 random(seed);
    CostLedger ledger;
    const int days = 12;
    Seconds t = kDay0 - 3600;
    const BookTerms terms{.job_days = 2, .day_days = 6};
    const auto live = [](JobId job) { return job.value % 5 == 0; };
    DayFigures before(ledger, days);  // at the last close
    while (t < kDay0 + days * kDay) {
      const Seconds step = std::uniform_int_distribution<Seconds>(0, 7200)(random);
      const Seconds to = step == 0 ? (t / kDay + 1) * kDay : t + step;  // at times, an instant
      const int postings = std::uniform_int_distribution<int>(1, 6)(random);
      for (int p = 0; p < postings; ++p) {
        const auto job = std::uniform_int_distribution<std::uint32_t>(1, 30)(random);
        const Seconds from = step == 0 ? to : t;
        LedgerEntry e = p % 3 == 2 ? lending_credit_entry(kB, 1 + job, from, to)
                                   : charge_entry(job % 2 ? kA : kB, 1 + job, from, to, JobId{job});
        if (job % 7 == 0) e.model = kA100;
        ASSERT_TRUE(ledger.append(e));
      }
      t = to;
      if (std::uniform_int_distribution<int>(0, 20)(random) == 0) {
        const auto balances = ledger.balances();
        const std::int64_t opening = utc_day(t - 1) - terms.day_days;
        before = DayFigures(ledger, days, opening);
        const auto most = std::uniform_int_distribution<std::size_t>(0, 40)(random);
        close_all(ledger, t, terms, most, live);
        ASSERT_EQ(ledger.balances(), balances) << "seed " << seed;
        ASSERT_TRUE(same(before, DayFigures(ledger, days, opening))) << "seed " << seed;
      }
    }
    // The days before `opening` are level 3's, folded into one.
    const std::int64_t opening = utc_day(t) - terms.day_days;
    before = DayFigures(ledger, days, opening);
    close_all(ledger, t + 1, terms, 0, live);
    EXPECT_TRUE(same(before, DayFigures(ledger, days, opening))) << "seed " << seed;
    std::uint64_t previous = 0;
    for (const LedgerEntry& e : ledger.entries()) {
      EXPECT_GT(e.seq, previous);
      previous = e.seq;
    }
    // Bounded: each kept day by job (30 jobs, 2 models, A's and B's kinds), then per tenant.
    EXPECT_LE(ledger.entries().size(), 2U * 40 * (2 + 1) + 2 * 10 * 6 + 40 * 2 + 40);
  }
}

}  // namespace
}  // namespace ledger_books_test
}  // namespace tidepool
