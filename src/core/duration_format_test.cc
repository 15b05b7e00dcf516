#include "core/duration_format.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(FormatDuration, WritesEveryNonZeroUnitLargestFirst) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(90), "1m30s");
  EXPECT_EQ(format_duration(5400), "1h30m");
  EXPECT_EQ(format_duration(21600), "6h");
  EXPECT_EQ(format_duration(86400), "1d");
  EXPECT_EQ(format_duration(93784), "1d2h3m4s");
  EXPECT_EQ(format_duration(-5), "-5s");
}

TEST(FormatDuration, MillisecondsBelowASecondElseWholeSeconds) {
  EXPECT_EQ(format_duration_ms(0), "0ms");
  EXPECT_EQ(format_duration_ms(250), "250ms");
  EXPECT_EQ(format_duration_ms(1000), "1s");
  EXPECT_EQ(format_duration_ms(90'500), "1m30s");
  EXPECT_EQ(format_duration_ms(3'720'000), "1h2m");
}

TEST(FormatDuration, AboutKeepsAtMostTwoUnitsRoundedDown) {
  EXPECT_EQ(format_duration_about(-3), "0s");
  EXPECT_EQ(format_duration_about(59), "59s");
  EXPECT_EQ(format_duration_about(330), "5m30s");
  EXPECT_EQ(format_duration_about(300), "5m");
  EXPECT_EQ(format_duration_about(2530), "42m");  // 42m10s: seconds dropped from 10 minutes
  EXPECT_EQ(format_duration_about(3900 + 59), "1h5m");
  EXPECT_EQ(format_duration_about(7200), "2h");
  EXPECT_EQ(format_duration_about(2 * 86400 + 3 * 3600 + 1800), "2d3h");
  EXPECT_EQ(format_duration_about(12 * 86400 + 5 * 3600), "12d");
  EXPECT_EQ(format_duration_about(86400 * 400), "400d");  // as kubectl writes ages
}

}  // namespace
}  // namespace tidepool
