#include "core/civil_time.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(ParseUtcDateTimeTest, CountsSecondsSinceTheEpochInUtc) {
  EXPECT_EQ(parse_utc_date_time("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(parse_utc_date_time("1969-12-31 23:59:59"), -1);
  EXPECT_EQ(parse_utc_date_time("2017-09-04 10:30:41"), 1504521041);
  EXPECT_EQ(parse_utc_date_time("2017-10-31 23:52:11"), 1509493931);
  EXPECT_EQ(parse_utc_date_time("2000-02-29 23:59:59"), 951868799);  // a leap day
  EXPECT_EQ(parse_utc_date_time("0001-01-01 00:00:00"), -62135596800);
  EXPECT_EQ(parse_utc_date_time("9999-12-31 23:59:59"), 253402300799);
}

TEST(ParseUtcDateTimeTest, RejectsOtherFormsAndImpossibleDates) {
  for (const char* text :
       {"", "2017-09-04", "2017-09-04T10:30:41", "2017-09-04 10:30:41Z", " 2017-09-04 10:30:41",
        "2017-9-04 10:30:41", "2017-09-04 10:30:4x", "+017-09-04 10:30:41", "0000-01-01 00:00:00",
        "2017-00-04 10:30:41", "2017-13-04 10:30:41", "2017-09-00 10:30:41", "2017-09-31 10:30:41",
        "2017-02-29 10:30:41", "1900-02-29 10:30:41", "2017-09-04 24:00:00", "2017-09-04 10:60:00",
        "2017-09-04 10:30:60"}) {
    EXPECT_EQ(parse_utc_date_time(text), std::nullopt) << text;
  }
}

TEST(CivilDateTest, DaysAndDatesAreInverseOverFourHundredYearsAndMonthsHaveTheirLength) {
  for (std::int64_t days = days_from_civil(1900, 1, 1); days <= days_from_civil(2300, 12, 31);
       days += 1) {
    const CivilDate date = civil_from_days(days);
    ASSERT_EQ(days_from_civil(date.year, date.month, date.day), days);
    ASSERT_LE(date.day, days_in_month(date.year, date.month));
  }
  EXPECT_EQ(days_in_month(2000, 2), 29);
  EXPECT_EQ(days_in_month(1900, 2), 28);
  EXPECT_EQ(days_in_month(2024, 2), 29);
  EXPECT_EQ(days_in_month(2026, 11), 30);
}

}  // namespace
}  // namespace tidepool
