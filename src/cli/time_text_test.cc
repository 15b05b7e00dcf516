#include "cli/time_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace tidepool {
namespace {

constexpr std::int64_t kDecember1Noon = 1'764'590'400'000;  // 2025-12-01 12:00:00 UTC

TEST(ParseTimePointTest, NowAndSpansAgo) {
  EXPECT_EQ(*parse_time_point("now", kDecember1Noon, "--since"), kDecember1Noon);
  EXPECT_EQ(*parse_time_point("2h", kDecember1Noon, "--since"), kDecember1Noon - 7'200'000);
  EXPECT_EQ(*parse_time_point("now-30m", kDecember1Noon, "--since"), kDecember1Noon - 1'800'000);
  EXPECT_EQ(*parse_time_point("1d", kDecember1Noon, "--since"), kDecember1Noon - 86'400'000);
}

TEST(ParseTimePointTest, UtcDaysAndTimes) {
  EXPECT_EQ(*parse_time_point("2025-12-01Z", kDecember1Noon, "--since"),
            kDecember1Noon - 43'200'000);
  EXPECT_EQ(*parse_time_point("2025-12-01T12:00Z", kDecember1Noon, "--since"), kDecember1Noon);
  EXPECT_EQ(*parse_time_point("2025-12-01 12:00:30Z", kDecember1Noon, "--since"),
            kDecember1Noon + 30'000);
}

TEST(ParseTimePointTest, LocalTimeFollowsTheZone) {
  const char* saved = std::getenv("TZ");
  const std::string before = saved != nullptr ? saved : "";
  setenv("TZ", "UTC", 1);
  tzset();
  EXPECT_EQ(*parse_time_point("2025-12-01T12:00", kDecember1Noon, "--until"), kDecember1Noon);
  setenv("TZ", "EST5", 1);  // 5 hours behind UTC, no daylight saving
  tzset();
  EXPECT_EQ(*parse_time_point("2025-12-01T07:00", kDecember1Noon, "--until"), kDecember1Noon);
  if (saved != nullptr) {
    setenv("TZ", before.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
}

TEST(ParseTimePointTest, RefusesWhatIsNotATime) {
  for (const char* bad : {"", "yesterday", "2025-13-01", "2025-12-01T25:00", "-2h", "2025-12",
                          "2025-12-01T12", "now+2h", "12:00"}) {
    auto refused = parse_time_point(bad, kDecember1Noon, "--since");
    ASSERT_FALSE(refused.has_value()) << bad;
    EXPECT_EQ(refused.error().field, "--since");
    EXPECT_THAT(refused.error().reason, ::testing::HasSubstr("is not a time")) << bad;
  }
}

}  // namespace
}  // namespace tidepool
