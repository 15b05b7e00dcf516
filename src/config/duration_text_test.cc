#include "config/duration_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/duration_format.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

TEST(DurationText, DurationsReadTheirForms) {
  const std::pair<std::string_view, Seconds> cases[] = {
      {"0", 0},
      {"90", 90},
      {"90s", 90},
      {"30m", 1800},
      {"6h", 21'600},
      {"2d", 172'800},
      {"1h30m", 5400},
      {"1d2h3m4s", 93'784},
      {"0s", 0},
      {"007m", 420},
      {"3650d", 315'360'000},
  };
  for (auto [text, seconds] : cases) {
    auto parsed = parse_duration(text);
    ASSERT_TRUE(parsed.has_value()) << text << ": " << parsed.error().reason;
    EXPECT_EQ(*parsed, seconds) << text;
  }
  for (std::string_view text :
       {"", "s", "h1", "1x", "1h1h", "30m1h", "1h30", "-5", "+5", "1.5h", "1 h", "6H", "1hm"}) {
    auto parsed = parse_duration(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_THAT(parsed.error().reason, HasSubstr("is not a duration; use e.g. 90s")) << text;
  }
  for (std::string_view text :
       {"3650d1s", "315360001", "99999999999999999999999s", "106751991167300d"}) {
    auto parsed = parse_duration(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_THAT(parsed.error().reason, HasSubstr("is longer than 3650d")) << text;
  }
}

TEST(DurationText, DurationsRoundTrip) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(90), "1m30s");
  EXPECT_EQ(format_duration(21'600), "6h");
  EXPECT_EQ(format_duration(93'784), "1d2h3m4s");
  EXPECT_EQ(format_duration(86'400 + 4), "1d4s");
  EXPECT_EQ(format_duration(-5), "-5s");
  std::vector<Seconds> samples = {1, 59, 60, 61, 3599, 3600, 86'399, 86'400, kMaxDuration};
  for (Seconds s = 7; s < kMaxDuration; s = s * 3 + 11) samples.push_back(s);
  for (Seconds seconds : samples) {
    const std::string text = format_duration(seconds);
    auto parsed = parse_duration(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(*parsed, seconds) << text;
  }
}

TEST(DurationText, ABoundBelowTenYearsIsNamedInTheReason) {
  EXPECT_EQ(parse_duration("1d", 86'400), 86'400);
  auto over = parse_duration("1d1s", 86'400);
  ASSERT_FALSE(over.has_value());
  EXPECT_THAT(over.error().reason, HasSubstr("'1d1s' is longer than 1d"));
}

TEST(DurationText, MillisecondsTakeMsAndEveryOtherForm) {
  EXPECT_EQ(parse_duration_ms("500ms"), 500);
  EXPECT_EQ(parse_duration_ms("2s"), 2000);
  EXPECT_EQ(parse_duration_ms("1h30m"), 5'400'000);
  EXPECT_EQ(parse_duration_ms("3"), 3000);
  for (std::string_view text : {"", "ms", "1.5ms", "-1ms", "5 ms", "1h30"}) {
    auto parsed = parse_duration_ms(text);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_THAT(parsed.error().reason, HasSubstr("is not a duration; use e.g. 500ms")) << text;
  }
  auto over = parse_duration_ms("1001ms", 1000);
  ASSERT_FALSE(over.has_value());
  EXPECT_THAT(over.error().reason, HasSubstr("is longer than 1s"));
}

TEST(DurationText, ABadTextIsQuotedPrintably) {
  auto parsed = parse_duration("1\x01h");
  ASSERT_FALSE(parsed.has_value());
  EXPECT_THAT(parsed.error().reason, HasSubstr("'1?h' is not a duration"));
}

}  // namespace
}  // namespace tidepool
