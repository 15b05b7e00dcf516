#include "core/tidal_window.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/test_pool.h"
#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kDay;
using test_support::kHour;
using ::testing::HasSubstr;

TidalWindow window(Seconds opens, Seconds closes, std::int64_t gpus = 64) {
  return TidalWindow{
      .job_class = JobClass::kInference, .opens = opens, .closes = closes, .gpus = gpus};
}

// The field named by make_tidal_window's error, or "" when the window is valid.
std::string failing_window_field(const TidalWindow& w) {
  auto made = make_tidal_window(w);
  return made ? std::string() : made.error().field;
}

TEST(TidalWindowTest, ValidWindowsAreReturnedUnchanged) {
  auto made = make_tidal_window(window(8 * kHour, 24 * kHour));
  ASSERT_TRUE(made.has_value()) << made.error().message();
  EXPECT_EQ(made->opens, 8 * kHour);
  EXPECT_EQ(made->closes, 24 * kHour);
  EXPECT_EQ(made->gpus, 64);
  EXPECT_EQ(failing_window_field(window(22 * kHour, 6 * kHour)), "");  // wraps
  EXPECT_EQ(failing_window_field(window(0, kDay)), "");                // all day
  EXPECT_EQ(failing_window_field(window(kDay - 1, 1, kMaxWindowGpus)), "");
}

TEST(TidalWindowTest, ValidationNamesTheField) {
  EXPECT_EQ(failing_window_field(window(-1, 10)), "opens");
  EXPECT_EQ(failing_window_field(window(kDay, 10)), "opens");
  EXPECT_EQ(failing_window_field(window(10, 0)), "closes");
  EXPECT_EQ(failing_window_field(window(10, kDay + 1)), "closes");
  EXPECT_EQ(failing_window_field(window(10, 10)), "closes");
  EXPECT_EQ(failing_window_field(window(0, 10, 0)), "gpus");
  EXPECT_EQ(failing_window_field(window(0, 10, kMaxWindowGpus + 1)), "gpus");
  TidalWindow bad_class = window(0, 10);
  bad_class.job_class = static_cast<JobClass>(9);
  EXPECT_EQ(failing_window_field(bad_class), "class");
  EXPECT_THAT(make_tidal_window(window(0, 10, 0)).error().reason, HasSubstr("got 0"));
}

TEST(TidalWindowTest, OpenFromOpensInclusiveToClosesExclusive) {
  const TidalWindow w = window(8 * kHour, 20 * kHour);
  EXPECT_FALSE(window_open(w, 8 * kHour - 1, 0));
  EXPECT_TRUE(window_open(w, 8 * kHour, 0));
  EXPECT_TRUE(window_open(w, 20 * kHour - 1, 0));
  EXPECT_FALSE(window_open(w, 20 * kHour, 0));
  // Every day alike.
  EXPECT_TRUE(window_open(w, 5 * kDay + 8 * kHour, 0));
  EXPECT_FALSE(window_open(w, 5 * kDay + 20 * kHour, 0));
}

TEST(TidalWindowTest, ClosingAtMidnight) {
  const TidalWindow w = window(8 * kHour, kDay);
  EXPECT_TRUE(window_open(w, kDay - 1, 0));
  EXPECT_FALSE(window_open(w, kDay, 0));
  EXPECT_EQ(next_window_close(w, 9 * kHour, 0), kDay);
  EXPECT_EQ(next_window_close(w, kDay, 0), kDay);  // closes exactly then
}

TEST(TidalWindowTest, WrapAroundWindow) {
  const TidalWindow w = window(22 * kHour, 6 * kHour);
  EXPECT_FALSE(window_open(w, 22 * kHour - 1, 0));
  EXPECT_TRUE(window_open(w, 22 * kHour, 0));
  EXPECT_TRUE(window_open(w, kDay - 1, 0));
  EXPECT_TRUE(window_open(w, kDay, 0));
  EXPECT_TRUE(window_open(w, kDay + 6 * kHour - 1, 0));
  EXPECT_FALSE(window_open(w, kDay + 6 * kHour, 0));
  EXPECT_FALSE(window_open(w, kDay + 12 * kHour, 0));
  EXPECT_EQ(next_window_change(w, 23 * kHour, 0), kDay + 6 * kHour);
  EXPECT_EQ(next_window_change(w, kDay + 6 * kHour, 0), kDay + 22 * kHour);
}

TEST(TidalWindowTest, DayOffsetShiftsTheTimeOfDay) {
  const TidalWindow w = window(8 * kHour, 20 * kHour);
  // Sim time 0 is 07:00, so the window opens at sim time 1 h.
  const Seconds offset = 7 * kHour;
  EXPECT_FALSE(window_open(w, 0, offset));
  EXPECT_TRUE(window_open(w, kHour, offset));
  EXPECT_EQ(next_window_open(w, 0, offset), kHour);
  EXPECT_EQ(next_window_close(w, 0, offset), 13 * kHour);
}

TEST(TidalWindowTest, NegativeTimesUseFloorModulo) {
  const TidalWindow w = window(22 * kHour, 6 * kHour);
  EXPECT_TRUE(window_open(w, -1, 0));               // 23:59:59 of the day before
  EXPECT_FALSE(window_open(w, -2 * kHour - 1, 0));  // 21:59:59
  EXPECT_TRUE(window_open(w, -2 * kHour, 0));       // 22:00
  EXPECT_EQ(next_window_change(w, -1, 0), 6 * kHour);
  EXPECT_EQ(next_window_open(w, -3 * kHour, 0), -2 * kHour);
  EXPECT_EQ(next_window_change(w, -kDay - 3 * kHour, 0), -kDay - 2 * kHour);
}

TEST(TidalWindowTest, NextChangeIsStrictlyAfterAndCrossesDays) {
  const TidalWindow w = window(8 * kHour, 20 * kHour);
  EXPECT_EQ(next_window_change(w, 0, 0), 8 * kHour);
  EXPECT_EQ(next_window_change(w, 8 * kHour, 0), 20 * kHour);
  EXPECT_EQ(next_window_change(w, 20 * kHour, 0), kDay + 8 * kHour);
  EXPECT_EQ(next_window_change(w, 3 * kDay + 21 * kHour, 0), 4 * kDay + 8 * kHour);
  // Changes alternate open/closed.
  Seconds t = 0;
  bool open = window_open(w, t, 0);
  for (int i = 0; i < 10; ++i) {
    const Seconds next = next_window_change(w, t, 0);
    EXPECT_GT(next, t);
    EXPECT_EQ(window_open(w, next - 1, 0), open);
    EXPECT_NE(window_open(w, next, 0), open);
    open = !open;
    t = next;
  }
}

TEST(TidalWindowTest, NextOpenAndCloseIncludeT) {
  const TidalWindow w = window(8 * kHour, 20 * kHour);
  EXPECT_EQ(next_window_open(w, 8 * kHour, 0), 8 * kHour);
  EXPECT_EQ(next_window_open(w, 8 * kHour + 1, 0), kDay + 8 * kHour);  // open now: tomorrow
  EXPECT_EQ(next_window_close(w, 20 * kHour, 0), 20 * kHour);
  EXPECT_EQ(next_window_close(w, 20 * kHour + 1, 0), kDay + 20 * kHour);
}

TEST(TidalWindowTest, AllDayWindowNeverChanges) {
  const TidalWindow w = window(0, kDay);
  EXPECT_TRUE(window_open(w, 0, 0));
  EXPECT_TRUE(window_open(w, kDay - 1, 0));
  EXPECT_TRUE(window_open(w, -1, 123));
  EXPECT_EQ(next_window_change(w, 5, 0), kWindowNever);
  EXPECT_EQ(next_window_open(w, 5, 0), kWindowNever);
  EXPECT_EQ(next_window_close(w, 5, 0), kWindowNever);
}

TEST(TidalWindowTest, ClockText) {
  EXPECT_EQ(clock_text(0), "00:00");
  EXPECT_EQ(clock_text(8 * kHour), "08:00");
  EXPECT_EQ(clock_text(kDay), "24:00");
  EXPECT_EQ(clock_text(7 * kHour + 30 * 60 + 15), "07:30:15");
  EXPECT_EQ(clock_text(kDay - 1), "23:59:59");
}

TEST(TidalWindowTest, ParsesTheTextForm) {
  auto parsed = parse_tidal_window("inference:08:00-24:00:64");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
  EXPECT_EQ(parsed->job_class, JobClass::kInference);
  EXPECT_EQ(parsed->opens, 8 * kHour);
  EXPECT_EQ(parsed->closes, kDay);
  EXPECT_EQ(parsed->gpus, 64);

  parsed = parse_tidal_window("dev:22:30-6:15:1");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
  EXPECT_EQ(parsed->job_class, JobClass::kDev);
  EXPECT_EQ(parsed->opens, 22 * kHour + 30 * 60);
  EXPECT_EQ(parsed->closes, 6 * kHour + 15 * 60);
  EXPECT_EQ(parsed->gpus, 1);
}

TEST(TidalWindowTest, DescribeReadsLikeTheWindow) {
  EXPECT_EQ(describe(window(8 * kHour, kDay)), "inference 08:00-24:00, 64 GPUs");
  EXPECT_EQ(describe(window(22 * kHour, 6 * kHour, 1)), "inference 22:00-06:00, 1 GPU");
}

TEST(TidalWindowTest, ParseErrorsNameWindowAndGiveTheForm) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "cannot read"},
      {"inference:08:00-24:00", "cannot read"},     // no GPU count
      {"inference08:00-24:00:64", "cannot read"},   // no class separator
      {"inference:08:00:24:00:64", "cannot read"},  // no dash
      {"serving:08:00-24:00:64", "unknown job class 'serving'"},
      {"inference:8-24:00:64", "cannot read"},  // only 3 colons
      {"inference:08:0-24:00:64", "opening time '08:0'"},
      {"inference:25:00-24:00:64", "opening time '25:00'"},
      {"inference:08:60-24:00:64", "opening time '08:60'"},
      {"inference:08:00-24:01:64", "closing time '24:01'"},
      {"inference:08:00-2x:00:64", "closing time '2x:00'"},
      {"inference:24:00-08:00:64", "opens: must be 0..86399"},
      {"inference:08:00-08:00:64", "closes: must differ"},
      {"inference:08:00-24:00:0", "gpus: must be 1..1000000"},
      {"inference:08:00-24:00:-1", "GPU count '-1'"},
      {"inference:08:00-24:00:6x", "GPU count '6x'"},
      {"inference:08:00-24:00:", "GPU count ''"},
      {"inference:08:00-24:00:99999999", "GPU count '99999999'"},
  };
  for (const auto& c : cases) {
    auto parsed = parse_tidal_window(c.text);
    ASSERT_FALSE(parsed.has_value()) << c.text;
    EXPECT_EQ(parsed.error().field, "window") << c.text;
    EXPECT_THAT(parsed.error().reason, HasSubstr(c.says)) << c.text;
    EXPECT_THAT(parsed.error().reason, HasSubstr("class:HH:MM-HH:MM:gpus")) << c.text;
  }
}

TEST(TidalWindowGuarantee, HeldIsWhatTheOpenWindowsProtect) {
  const std::vector<TidalWindow> windows = {{JobClass::kInference, 8 * 3600, 24 * 3600, 64},
                                            {JobClass::kInference, 20 * 3600, 2 * 3600, 8}};
  EXPECT_EQ(window_held_milli(windows, 7 * 3600, 0), 0);
  EXPECT_EQ(window_held_milli(windows, 9 * 3600, 0), 64'000);
  EXPECT_EQ(window_held_milli(windows, 21 * 3600, 0), 72'000);
  EXPECT_EQ(window_held_milli(windows, 25 * 3600, 0), 8'000);  // 01:00 the next day
  EXPECT_EQ(window_held_milli(windows, 0, 9 * 3600), 64'000);  // time 0 is 09:00
}

}  // namespace
}  // namespace tidepool
