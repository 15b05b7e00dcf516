#include "config/duration_text.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(DurationText, ParsesWholeNumbersWithAnOptionalUnit) {
  EXPECT_EQ(parse_duration_seconds("90", 1000), 90);
  EXPECT_EQ(parse_duration_seconds("90s", 1000), 90);
  EXPECT_EQ(parse_duration_seconds("15m", 1000), 900);
  EXPECT_EQ(parse_duration_seconds("2h", 10000), 7200);
  EXPECT_EQ(parse_duration_seconds("1d", 86400), 86400);
  EXPECT_EQ(parse_duration_seconds("0", 10), 0);
}

TEST(DurationText, RefusesAnythingElseAndWhatIsAboveTheBound) {
  for (const char* bad : {"", "s", "-1", "+1", "1.5h", "1 h", "1w", "h1", "99999999999999999999"}) {
    EXPECT_FALSE(parse_duration_seconds(bad, 1'000'000).has_value()) << bad;
  }
  EXPECT_EQ(parse_duration_seconds("1d", 86400), 86400);
  EXPECT_FALSE(parse_duration_seconds("1d", 86399).has_value());
}

TEST(DurationText, LabelsInTheLargestWholeUnit) {
  EXPECT_EQ(duration_label(86400), "1d");
  EXPECT_EQ(duration_label(7200), "2h");
  EXPECT_EQ(duration_label(5400), "90m");
  EXPECT_EQ(duration_label(45), "45s");
  EXPECT_EQ(duration_label(0), "0s");
}

}  // namespace
}  // namespace tidepool
