#include "server/history.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace tidepool {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using ::testing::ElementsAre;

// 2026-12-01T00:00:00Z, the start of an hour.
constexpr Instant kHour = instant_from_unix_seconds(1'796'083'200);

const std::string kUsed = history_key("used_milli_gpus", {{"tenant", "vision"}, {"model", "H100"}});
const std::string kOther =
    history_key("used_milli_gpus", {{"tenant", "search"}, {"model", "H100"}});

std::vector<std::string> keys_of(const Batch& batch) {
  std::vector<std::string> keys;
  for (const KeyedRecord& r : batch.settings) keys.push_back(r.key);
  return keys;
}

// [[t, v], ...] of the series `key` in a query's answer.
nlohmann::json points(const nlohmann::json& answer, const std::string& name,
                      const std::string& tenant) {
  for (const auto& s : answer.at("series")) {
    if (s.at("name") == name && s.at("labels").value("tenant", "") == tenant) return s.at("points");
  }
  return nullptr;
}

TEST(HistoryTest, KeysNameTheSeriesAndItsLabels) {
  EXPECT_EQ(history_key("pool_milli_gpus"), "pool_milli_gpus");
  EXPECT_EQ(kUsed, "used_milli_gpus{tenant=vision,model=H100}");
  EXPECT_EQ(history_label(kUsed, "tenant"), "vision");
  EXPECT_EQ(history_label(kUsed, "model"), "H100");
  EXPECT_EQ(history_label("pool_milli_gpus", "tenant"), std::nullopt);
}

// A sample when due (aligned to the interval), one record per hour, in a ring of hours_kept keys.
TEST(HistoryTest, SamplesWhenDueIntoOneRecordPerHourInARingOfKeys) {
  History history(minutes(5), 3);
  Batch first;
  history.record(kHour + std::chrono::seconds(1), {{kUsed, 8000}}, first);
  EXPECT_THAT(keys_of(first), ElementsAre("history/0"));  // hour number 498,912 mod 3
  EXPECT_EQ(history.next_sample(), kHour + minutes(5));
  Batch early;
  history.record(kHour + minutes(4), {{kUsed, 1}}, early);
  EXPECT_TRUE(early.settings.empty());
  Batch second;
  history.record(kHour + minutes(5), {{kUsed, 4000}}, second);
  ASSERT_EQ(second.settings.size(), 1U);
  const auto record = nlohmann::json::parse(second.settings[0].document);
  EXPECT_EQ(record["hour"], unix_seconds(kHour));
  EXPECT_EQ(record["at"].size(), 2U);
  EXPECT_EQ(record["series"][kUsed], nlohmann::json::array({8000, 4000}));
  // The next hours take the next keys; three hours on, the first key again.
  std::vector<std::string> keys;
  for (int h = 1; h <= 3; ++h) {
    Batch batch;
    history.record(kHour + hours(h), {{kUsed, h}}, batch);
    keys.push_back(keys_of(batch).at(0));
  }
  EXPECT_THAT(keys, ElementsAre("history/1", "history/2", "history/0"));
}

// An hour's record past the bound is not stored (the samples stay in memory): the history never
// makes a round too large to commit.
TEST(HistoryTest, ARecordTooLargeIsNotStored) {
  History history(minutes(5), 24);
  HistoryValues many;
  for (int i = 0; i < 20'000; ++i)
    many[history_key("pending_jobs", {{"tenant", std::to_string(i)}})] = i;
  Batch batch;
  history.record(kHour, many, batch);
  EXPECT_TRUE(batch.settings.empty());
  EXPECT_EQ(history.records_too_large(), 1);
  EXPECT_EQ(history.query({kHour, kHour + hours(1), {}, {}, {}})["series"].size(), 20'000U);
}

// Points are the mean of each step's samples; a series absent from a sample counts 0 there.
TEST(HistoryTest, APointIsTheMeanOfItsStepAndAnAbsentSeriesReadsZero) {
  History history(minutes(5), 24);
  Batch batch;
  history.record(kHour, {{kUsed, 8000}, {kOther, 1000}}, batch);
  history.record(kHour + minutes(5), {{kUsed, 4000}}, batch);
  history.record(kHour + minutes(10), {{kUsed, 1000}, {kOther, 3000}}, batch);
  HistoryQuery q{kHour, kHour + hours(1), minutes(10), {}, {}};
  const nlohmann::json answer = history.query(q);
  EXPECT_EQ(answer["step_s"], 600);
  EXPECT_EQ(answer["interval_s"], 300);
  const auto t0 = unix_seconds(kHour);
  EXPECT_EQ(points(answer, "used_milli_gpus", "vision"),
            nlohmann::json::parse(fmt::format("[[{}, 6000], [{}, 1000]]", t0, t0 + 600)));
  EXPECT_EQ(points(answer, "used_milli_gpus", "search"),
            nlohmann::json::parse(fmt::format("[[{}, 500], [{}, 3000]]", t0, t0 + 600)));
  // Only what the caller may see, and only the names asked for.
  q.visible = [](const std::string& key) { return history_label(key, "tenant") != "search"; };
  q.names = {"used_milli_gpus", "pool_milli_gpus"};
  const nlohmann::json seen = history.query(q);
  ASSERT_EQ(seen["series"].size(), 1U);
  EXPECT_EQ(seen["series"][0]["labels"]["tenant"], "vision");
  q.names = {"pool_milli_gpus"};
  EXPECT_TRUE(history.query(q)["series"].empty());
  // A step finer than the interval is the interval; a long span gets a longer step.
  EXPECT_EQ(history.query({kHour, kHour + hours(1), std::chrono::seconds(1), {}, {}})["step_s"],
            300);
  const nlohmann::json year =
      history.query({kHour - hours(24 * 365), kHour + hours(1), {}, {}, {}});
  EXPECT_LE((24 * 366 * 3600) / year["step_s"].get<std::int64_t>(), History::kMostPoints);
}

// What was stored reads back after a restart, but the hours past the window and records that
// cannot be read; sampling goes on at the next interval.
TEST(HistoryTest, LoadsTheHoursStoredWithinTheWindow) {
  History before(minutes(5), 2);
  Batch batch;
  before.record(kHour, {{kUsed, 1000}}, batch);
  before.record(kHour + hours(1), {{kUsed, 2000}}, batch);
  before.record(kHour + hours(1) + minutes(5), {{kUsed, 3000}}, batch);
  std::vector<KeyedRecord> settings;
  for (const KeyedRecord& r : batch.settings) {
    std::erase_if(settings, [&](const KeyedRecord& s) { return s.key == r.key; });
    settings.push_back(r);
  }
  settings.push_back({"history/9", "not json"});
  settings.push_back({"market/anomaly_day", "{}"});

  History after(minutes(5), 2);
  after.load(settings, kHour + hours(1) + minutes(7));
  EXPECT_EQ(after.next_sample(), kHour + hours(1) + minutes(10));
  const auto t1 = unix_seconds(kHour + hours(1));
  const nlohmann::json answer = after.query({kHour, kHour + hours(2), {}, {}, {}});
  EXPECT_EQ(points(answer, "used_milli_gpus", "vision"),
            nlohmann::json::parse(fmt::format("[[{}, 1000], [{}, 2000], [{}, 3000]]",
                                              unix_seconds(kHour), t1, t1 + 300)));
  // Two hours on, the first hour is past the window of two.
  History later(minutes(5), 2);
  later.load(settings, kHour + hours(2));
  EXPECT_EQ(points(later.query({kHour, kHour + hours(3), {}, {}, {}}), "used_milli_gpus", "vision")
                .size(),
            2U);
}

}  // namespace
}  // namespace tidepool
