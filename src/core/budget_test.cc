#include "core/budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kCredit;
using test_support::kDay;
using ::testing::HasSubstr;

// Unix times of 00:00 UTC, checked against Python's datetime.
constexpr std::int64_t k2026Jul1 = 1'782'864'000;
constexpr std::int64_t k2026Oct1 = 1'790'812'800;
constexpr std::int64_t k2026Nov30 = 1'795'996'800;
constexpr std::int64_t k2027Jan1 = 1'798'761'600;
constexpr std::int64_t k2024Jan1 = 1'704'067'200;
constexpr std::int64_t k2024Feb29 = 1'709'164'800;
constexpr std::int64_t k2024Apr1 = 1'711'929'600;
constexpr std::int64_t k2000Feb29 = 951'782'400;
constexpr std::int64_t k1900Mar1 = -2'203'891'200;
constexpr std::int64_t k1969Oct1 = -7'948'800;
constexpr std::int64_t k0001Jan1 = -62'135'596'800;
// 2000-01-01 is day 10957; 400 years are 146097 days.
constexpr std::int64_t kMinus10000Jan1 = (10'957 - 30 * 146'097) * kDay;
constexpr std::int64_t k10000Jan1 = (10'957 + 20 * 146'097) * kDay;

Budget budget(Micros quarterly, Ppm soft_alert = 800'000) {
  return Budget{.quarterly = quarterly, .soft_alert = soft_alert};
}

TEST(BudgetTest, MakeBudgetChecksItsFields) {
  auto made = make_budget(budget(1000 * kCredit));
  ASSERT_TRUE(made.has_value()) << made.error().message();
  EXPECT_EQ(made->quarterly, 1000 * kCredit);
  EXPECT_EQ(made->soft_alert, 800'000);
  EXPECT_TRUE(make_budget(budget(1, 1)).has_value());
  EXPECT_TRUE(make_budget(budget(kMaxMoney, kPpmOne)).has_value());
  EXPECT_EQ(make_budget(budget(0)).error().field, "quarterly");
  EXPECT_EQ(make_budget(budget(-1)).error().field, "quarterly");
  EXPECT_EQ(make_budget(budget(kMaxMoney + 1)).error().field, "quarterly");
  EXPECT_EQ(make_budget(budget(1, 0)).error().field, "soft_alert");
  EXPECT_EQ(make_budget(budget(1, kPpmOne + 1)).error().field, "soft_alert");
  EXPECT_THAT(make_budget(budget(1, 1'200'000)).error().reason, HasSubstr("got 120%"));
}

TEST(BudgetTest, StateNames) {
  EXPECT_EQ(budget_state_name(BudgetState::kWithin), "within");
  EXPECT_EQ(budget_state_name(BudgetState::kAlert), "alert");
  EXPECT_EQ(budget_state_name(BudgetState::kExhausted), "exhausted");
}

TEST(BudgetTest, StatusAtTheExactThresholds) {
  const Budget b = budget(1000 * kCredit);  // alert from 800
  EXPECT_EQ(budget_status(b, 0, 0).state, BudgetState::kWithin);
  EXPECT_EQ(budget_status(b, 800 * kCredit - 1, 0).state, BudgetState::kWithin);
  EXPECT_EQ(budget_status(b, 800 * kCredit, 0).state, BudgetState::kAlert);
  EXPECT_EQ(budget_status(b, 1000 * kCredit - 1, 0).state, BudgetState::kAlert);
  EXPECT_EQ(budget_status(b, 1000 * kCredit, 0).state, BudgetState::kExhausted);
  EXPECT_EQ(budget_status(b, kMaxMoney, 0).state, BudgetState::kExhausted);
  // Credits count against charges.
  EXPECT_EQ(budget_status(b, 1000 * kCredit, 1).state, BudgetState::kAlert);
  EXPECT_EQ(budget_status(b, 1000 * kCredit, 200 * kCredit).state, BudgetState::kAlert);
  EXPECT_EQ(budget_status(b, 1000 * kCredit, 200 * kCredit + 1).state, BudgetState::kWithin);
  // a x B compared exactly, without rounding: 3 x 0.333333 = 0.999999 micro-credits.
  EXPECT_EQ(budget_status(budget(3, 333'333), 0, 0).state, BudgetState::kWithin);
  EXPECT_EQ(budget_status(budget(3, 333'333), 1, 0).state, BudgetState::kAlert);
  EXPECT_EQ(budget_status(budget(7, 500'000), 3, 0).state, BudgetState::kWithin);  // 3 < 3.5
  EXPECT_EQ(budget_status(budget(7, 500'000), 4, 0).state, BudgetState::kAlert);
  // An alert at 100% never shows: the budget is exhausted first.
  EXPECT_EQ(budget_status(budget(1000, kPpmOne), 999, 0).state, BudgetState::kWithin);
  EXPECT_EQ(budget_status(budget(1000, kPpmOne), 1000, 0).state, BudgetState::kExhausted);
  // The largest figures do not overflow.
  EXPECT_EQ(budget_status(budget(kMaxMoney, kPpmOne - 1), kMaxMoney - 1, 0).state,
            BudgetState::kAlert);
}

TEST(BudgetTest, StatusFigures) {
  const BudgetStatus s = budget_status(budget(1000 * kCredit), 1100 * kCredit, 50 * kCredit);
  EXPECT_EQ(s.state, BudgetState::kExhausted);
  EXPECT_EQ(s.budget, 1000 * kCredit);
  EXPECT_EQ(s.charges, 1100 * kCredit);
  EXPECT_EQ(s.credits, 50 * kCredit);
  EXPECT_EQ(s.spend, 1050 * kCredit);
  EXPECT_EQ(s.remaining, -50 * kCredit);
  // More credits than charges: a negative spend, more than the budget left.
  const BudgetStatus lender = budget_status(budget(1000 * kCredit), 10 * kCredit, 30 * kCredit);
  EXPECT_EQ(lender.state, BudgetState::kWithin);
  EXPECT_EQ(lender.spend, -20 * kCredit);
  EXPECT_EQ(lender.remaining, 1020 * kCredit);
}

TEST(BudgetTest, ExhaustedReasonText) {
  const BudgetStatus s = budget_status(budget(1000 * kCredit), 1100 * kCredit, 50 * kCredit);
  EXPECT_EQ(budget_exhausted_reason("vision", s, "2026-Q4"),
            "budget exhausted: tenant vision spent 1050.00 of its 1000.00 budget for 2026-Q4 "
            "(charges 1100.00, lending credits 50.00)");
  const BudgetStatus odd = budget_status(budget(1'000'005'000), 1'000'004'999, 0);
  EXPECT_THAT(budget_exhausted_reason("nlp", odd, "2027-Q1"),
              HasSubstr("spent 1000.00 of its 1000.01 budget"));
}

TEST(QuarterTest, KnownQuarterBoundaries) {
  EXPECT_EQ(quarter_of(k2026Oct1),
            (Quarter{.year = 2026, .number = 4, .start = k2026Oct1, .end = k2027Jan1}));
  EXPECT_EQ(quarter_of(k2026Oct1 - 1),
            (Quarter{.year = 2026, .number = 3, .start = k2026Jul1, .end = k2026Oct1}));
  EXPECT_EQ(quarter_of(k2027Jan1 - 1).number, 4);
  EXPECT_EQ(quarter_of(k2027Jan1).year, 2027);
  EXPECT_EQ(quarter_of(k2027Jan1).number, 1);
  EXPECT_EQ(quarter_of(k2026Nov30 + 12 * 3600).start, k2026Oct1);
  EXPECT_EQ(quarter_of(0), (Quarter{.year = 1970, .number = 1, .start = 0, .end = 90 * kDay}));
  EXPECT_EQ(quarter_of(-1), (Quarter{.year = 1969, .number = 4, .start = k1969Oct1, .end = 0}));
  // Q1 of a leap year has 91 days.
  EXPECT_EQ(quarter_of(k2024Feb29),
            (Quarter{.year = 2024, .number = 1, .start = k2024Jan1, .end = k2024Apr1}));
  EXPECT_EQ(k2024Apr1 - k2024Jan1, 91 * kDay);
}

TEST(QuarterTest, NamesAndDates) {
  EXPECT_EQ(quarter_name(quarter_of(k2026Oct1)), "2026-Q4");
  EXPECT_EQ(quarter_name(quarter_of(-1)), "1969-Q4");
  EXPECT_EQ(utc_date_text(k2026Nov30), "2026-11-30");
  EXPECT_EQ(utc_date_text(k2026Nov30 + kDay - 1), "2026-11-30");
  EXPECT_EQ(utc_date_text(k2026Nov30 + kDay), "2026-12-01");
  EXPECT_EQ(utc_date_text(0), "1970-01-01");
  EXPECT_EQ(utc_date_text(-1), "1969-12-31");
  EXPECT_EQ(utc_date_text(k2024Feb29), "2024-02-29");
  EXPECT_EQ(utc_date_text(k2000Feb29), "2000-02-29");
  EXPECT_EQ(utc_date_text(k1900Mar1 - 1), "1900-02-28");  // 1900 is not a leap year
  EXPECT_EQ(utc_date_text(k0001Jan1), "0001-01-01");
  EXPECT_EQ(utc_date_text(k0001Jan1 - 1), "0000-12-31");
  EXPECT_EQ(utc_date_text(k0001Jan1 - 367 * kDay), "-0001-12-31");  // year 0 is a leap year
}

TEST(QuarterTest, TheDocumentedRange) {
  EXPECT_EQ(utc_date_text(kMinus10000Jan1), "-10000-01-01");
  EXPECT_EQ(quarter_of(kMinus10000Jan1),
            (Quarter{.year = -10000,
                     .number = 1,
                     .start = kMinus10000Jan1,
                     .end = kMinus10000Jan1 + 91 * kDay}));  // -10000 is a leap year
  EXPECT_EQ(utc_date_text(k10000Jan1), "10000-01-01");
  const Quarter last = quarter_of(k10000Jan1 + 366 * kDay - 1);  // 10000 is a leap year
  EXPECT_EQ(last.year, 10000);
  EXPECT_EQ(last.number, 4);
  EXPECT_EQ(last.end, k10000Jan1 + 366 * kDay);
  EXPECT_EQ(quarter_name(last), "10000-Q4");
}

TEST(QuarterTest, QuartersTileTimeFrom1600To2400) {
  // Walk every quarter: each starts where the previous ended, on the first of Jan/Apr/Jul/Oct,
  // and holds 90..92 days; every time inside maps to it.
  const std::string kQuarterStarts[] = {"-01-01", "-04-01", "-07-01", "-10-01"};
  const std::int64_t first = parse_utc_date("1600-01-01", "f").value();
  const std::int64_t last = parse_utc_date("2400-01-01", "f").value();
  std::int64_t start = first;
  int expected_number = 1;
  int quarters = 0;
  while (start < last) {
    const Quarter q = quarter_of(start);
    ASSERT_EQ(q.start, start);
    ASSERT_EQ(q.number, expected_number);
    ASSERT_GE(q.end - q.start, 90 * kDay);
    ASSERT_LE(q.end - q.start, 92 * kDay);
    ASSERT_EQ(quarter_of(q.end - 1), q);
    ASSERT_EQ(quarter_of(q.start + (q.end - q.start) / 2), q);
    const std::string date = utc_date_text(q.start);
    ASSERT_EQ(date.substr(4), kQuarterStarts[q.number - 1]);
    ASSERT_EQ(std::to_string(q.year), date.substr(0, 4));
    start = q.end;
    expected_number = expected_number % 4 + 1;
    ++quarters;
  }
  EXPECT_EQ(start, last);
  EXPECT_EQ(quarters, 800 * 4);
  // 800 years are two 400-year cycles of 146097 days.
  EXPECT_EQ(last - first, 2 * 146'097 * kDay);
}

TEST(QuarterTest, ParseUtcDate) {
  EXPECT_EQ(parse_utc_date("2026-10-01", "since").value(), k2026Oct1);
  EXPECT_EQ(parse_utc_date("2026-11-30", "since").value(), k2026Nov30);
  EXPECT_EQ(parse_utc_date("1970-01-01", "since").value(), 0);
  EXPECT_EQ(parse_utc_date("1969-10-01", "since").value(), k1969Oct1);
  EXPECT_EQ(parse_utc_date("2024-02-29", "since").value(), k2024Feb29);
  EXPECT_EQ(parse_utc_date("2000-02-29", "since").value(), k2000Feb29);
  EXPECT_EQ(parse_utc_date("0001-01-01", "since").value(), k0001Jan1);
  EXPECT_EQ(parse_utc_date("9999-12-31", "since").value(), 253'402'214'400);
  // Every day of 1896..2104 reads back as written.
  const std::int64_t from = parse_utc_date("1896-01-01", "f").value();
  const std::int64_t to = parse_utc_date("2105-01-01", "f").value();
  for (std::int64_t t = from; t < to; t += kDay) {
    ASSERT_EQ(parse_utc_date(utc_date_text(t + kDay / 2), "f").value(), t) << t;
  }
}

TEST(QuarterTest, ParseUtcDateRejectsAnythingElse) {
  for (const char* text : {"",
                           "2026-1-30",
                           "2026/11/30",
                           "26-11-30",
                           "2026-11-30 ",
                           " 2026-11-30",
                           "2026-11-3O",
                           "+026-11-30",
                           "-026-11-30",
                           "2026-11-30T00:00:00Z",
                           "20261130",
                           "2026-13-01",
                           "2026-00-10",
                           "2026-11-00",
                           "2026-11-31",
                           "2026-04-31",
                           "2023-02-29",
                           "1900-02-29",
                           "2026-02-30",
                           "2026--1-01"}) {
    auto parsed = parse_utc_date(text, "budget.since");
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_EQ(parsed.error().field, "budget.since") << text;
    EXPECT_THAT(parsed.error().reason, HasSubstr("must be a date like 2026-11-30")) << text;
  }
  EXPECT_THAT(parse_utc_date("2023-02-29", "f").error().reason, HasSubstr("2023-02 has 28 days"));
  EXPECT_THAT(parse_utc_date("2026-13-01", "f").error().reason, HasSubstr("got '2026-13-01'"));
}

}  // namespace
}  // namespace tidepool
