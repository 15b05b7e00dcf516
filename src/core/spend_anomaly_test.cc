#include "core/spend_anomaly.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kCredit;

TEST(SpendAnomaly, AlertsOnlyAboveTwiceTheTrailingWeek) {
  const std::vector<Micros> week(7, 100 * kCredit);
  EXPECT_FALSE(spend_anomaly(week, 200 * kCredit).has_value());  // exactly twice: no alert
  const auto alert = spend_anomaly(week, 200 * kCredit + 1);
  ASSERT_TRUE(alert.has_value());
  EXPECT_EQ(alert->trailing_average, 100 * kCredit);
  EXPECT_EQ(alert->day_spend, 200 * kCredit + 1);
  EXPECT_EQ(describe_spend_anomaly("vision", "2026-11-30", *alert),
            "tenant vision spent 200.00 on 2026-11-30, 2.0x its 7-day average of 100.00");
}

TEST(SpendAnomaly, NeedsAFullWeekAndSomeSpend) {
  EXPECT_FALSE(spend_anomaly(std::vector<Micros>(6, kCredit), 1000 * kCredit).has_value());
  EXPECT_FALSE(spend_anomaly(std::vector<Micros>(7, 0), 1000 * kCredit).has_value());
}

TEST(SpendAnomaly, OnlyTheLastSevenDaysCount) {
  std::vector<Micros> days(7, 10 * kCredit);
  days.insert(days.begin(), 1000 * kCredit);  // eight days ago: ignored
  EXPECT_TRUE(spend_anomaly(days, 21 * kCredit).has_value());
  EXPECT_FALSE(spend_anomaly(days, 20 * kCredit).has_value());
}

TEST(SpendAnomaly, ComparesWithoutRoundingTheAverage) {
  // Average 10/7 micro-credits: twice is 20/7 = 2.857; 3 passes, 2 does not.
  const std::vector<Micros> week = {10, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(spend_anomaly(week, 3).has_value());
  EXPECT_FALSE(spend_anomaly(week, 2).has_value());
}

}  // namespace
}  // namespace tidepool
