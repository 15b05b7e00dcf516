#include "api/step_report.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace tidepool {
namespace {

std::string refusal(std::string_view line) {
  auto parsed = parse_step_line(line);
  return parsed ? std::string("ok") : parsed.error().message();
}

TEST(StepLineTest, ReadsTheFieldsInAnyOrder) {
  auto parsed = parse_step_line(
      "time_us=5000  step=7\tcompute_us=3000 allreduce_bytes=1024 "
      "allreduce_us=1500 x_loss=0.25\r");
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_TRUE(*parsed);
  EXPECT_EQ(**parsed, (StepSample{.step = 7,
                                  .step_us = 5000,
                                  .compute_us = 3000,
                                  .allreduce_us = 1500,
                                  .allreduce_bytes = 1024}));
  auto bare = parse_step_line("step=0 time_us=1");
  ASSERT_TRUE(bare && *bare);
  EXPECT_FALSE((*bare)->compute_us);
  for (std::string_view skipped : {"", "   ", "# a comment", "  # indented"}) {
    auto blank = parse_step_line(skipped);
    ASSERT_TRUE(blank);
    EXPECT_FALSE(*blank) << skipped;
  }
}

TEST(StepLineTest, RefusesWhatIsNotTheProtocolNamingTheKey) {
  EXPECT_EQ(refusal("step=1"), "time_us: is missing");
  EXPECT_EQ(refusal("time_us=1"), "step: is missing");
  EXPECT_EQ(refusal("step=1 time_us=-5"),
            "time_us: '-5' is not a whole number 0..9223372036854775807 (digits only)");
  EXPECT_EQ(refusal("step=1 time_us=1.5").substr(0, 20), "time_us: '1.5' is no");
  EXPECT_EQ(refusal("step=1 time_us=1e3").substr(0, 20), "time_us: '1e3' is no");
  EXPECT_EQ(refusal("step=1 time_us=99999999999999999999").substr(0, 9), "time_us: ");
  EXPECT_EQ(refusal("step=1 time_us="),
            "time_us: '' is not a whole number 0..9223372036854775807 (digits only)");
  EXPECT_EQ(refusal("step=1 step=2 time_us=3"), "step: is given twice");
  EXPECT_EQ(refusal("step=1 time_us=3 compute_ms=2"),
            "line: unknown key 'compute_ms'; expected step, time_us, compute_us, allreduce_us, "
            "allreduce_bytes or x_<anything>");
  EXPECT_EQ(refusal("step=1 time_us=3 garbage"), "line: 'garbage' is not key=value");
  EXPECT_EQ(refusal("step=1 time_us=3 =4"), "line: '=4' is not key=value");
  EXPECT_EQ(refusal("step=1 time_us=3 compute_us=4"),
            "compute_us: 4 is out of range 0..3 (the step's time_us)");
  EXPECT_EQ(refusal("step=1 time_us=3 allreduce_bytes=4"),
            "allreduce_bytes: is given without allreduce_us");
  EXPECT_EQ(refusal("step=1 time_us=3 x_" + std::string(300, 'a')),
            "line: is longer than 256 bytes");
  EXPECT_EQ(refusal(std::string("step=1 time_us=3 x_\xff\x01=2")), "ok");
}

TEST(StepLineReaderTest, ReadsLinesFedInPiecesAndCountsTheRefused) {
  StepLineReader reader;
  const std::string text =
      "step=0 time_us=100 compute_us=60\n"
      "step=1 time_us=bad\n"
      "\n"
      "step=2 time_us=300 compute_us=200\n"
      "step=3 time_us=4";
  for (char c : text) reader.feed(std::string_view(&c, 1));
  EXPECT_EQ(reader.stats().steps.count(), 2);
  EXPECT_EQ(reader.stats().refused_lines, 1);
  ASSERT_TRUE(reader.first_refusal());
  EXPECT_EQ(reader.first_refusal()->field, "time_us");
  StepStats first = reader.take();
  EXPECT_EQ(first.compute_us, 260);
  EXPECT_EQ(first.last_step, 2);
  EXPECT_TRUE(reader.stats().empty());
  EXPECT_FALSE(reader.first_refusal());
  // The partial line stays and is finished by the next piece.
  reader.feed("00\n");
  EXPECT_EQ(reader.stats().steps.count(), 1);
  EXPECT_EQ(reader.stats().steps.sum_us(), 400);
}

TEST(StepLineReaderTest, AnOverlongLineIsRefusedWholeWithBoundedMemory) {
  StepLineReader reader;
  // 10 MB without a newline, then the end of that line and a good one.
  const std::string junk(64 * 1024, 'z');
  for (int i = 0; i < 160; ++i) reader.feed(junk);
  reader.feed("\nstep=5 time_us=10\n");
  EXPECT_EQ(reader.stats().refused_lines, 1);
  EXPECT_EQ(reader.stats().steps.count(), 1);
  EXPECT_EQ(reader.first_refusal()->message(), "line: is longer than 256 bytes");
  // Exactly the limit is fine.
  std::string line = "step=6 time_us=10 x_pad=";
  line += std::string(kMaxStepLineBytes - line.size(), 'p');
  reader.feed(line + "\n");
  EXPECT_EQ(reader.stats().steps.count(), 2);
}

StepStats some_stats() {
  StepStats s;
  s.add({.step = 3,
         .step_us = 45'000,
         .compute_us = 30'000,
         .allreduce_us = 14'000,
         .allreduce_bytes = 1'048'576});
  s.add({.step = 4,
         .step_us = 47'000,
         .compute_us = 31'000,
         .allreduce_us = 15'000,
         .allreduce_bytes = 1'048'576});
  s.add({.step = 5, .step_us = 12});
  s.refused_lines = 2;
  return s;
}

TEST(StepStatsJsonTest, RoundTrips) {
  const StepStats s = some_stats();
  auto back = step_stats_from_json(step_stats_to_json(s), "stats");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, s);
  auto empty = step_stats_from_json(step_stats_to_json(StepStats{}), "stats");
  ASSERT_TRUE(empty) << empty.error().message();
  EXPECT_EQ(*empty, StepStats{});
}

TEST(StepStatsJsonTest, ChecksEveryFieldNamingIt) {
  const nlohmann::json good = step_stats_to_json(some_stats());
  const auto field = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    auto r = step_stats_from_json(j, "steps[0].stats");
    return r ? std::string("ok") : r.error().field;
  };
  EXPECT_EQ(field([](auto&) {}), "ok");
  EXPECT_EQ(field([](auto& j) { j["extra"] = 1; }), "steps[0].stats.extra");
  EXPECT_EQ(field([](auto& j) { j.erase("sum_us"); }), "steps[0].stats.sum_us");
  EXPECT_EQ(field([](auto& j) { j["compute_us"] = -1; }), "steps[0].stats.compute_us");
  EXPECT_EQ(field([](auto& j) { j["compute_us"] = 1.5; }), "steps[0].stats.compute_us");
  EXPECT_EQ(field([](auto& j) { j["compute_us"] = "1"; }), "steps[0].stats.compute_us");
  EXPECT_EQ(field([](auto& j) { j["compute_steps"] = 4; }), "steps[0].stats.compute_steps");
  EXPECT_EQ(field([](auto& j) { j["allreduce_byte_steps"] = 3; }),
            "steps[0].stats.allreduce_byte_steps");
  EXPECT_EQ(field([](auto& j) { j["compute_us"] = 92'001; }), "steps[0].stats.compute_us");
  EXPECT_EQ(field([](auto& j) { j["steps"] = 4; }), "steps[0].stats.buckets");
  EXPECT_EQ(field([](auto& j) { j["buckets"][0] = 5; }), "steps[0].stats.buckets[0]");
  EXPECT_EQ(field([](auto& j) { j["buckets"][0][0] = 9999; }), "steps[0].stats.buckets[0][0]");
  EXPECT_EQ(field([](auto& j) { j["buckets"][0][1] = 0; }), "steps[0].stats.buckets[0][1]");
  EXPECT_EQ(field([](auto& j) { j["min_us"] = 13; }), "steps[0].stats.min_us");
  EXPECT_EQ(field([](auto& j) { j["sum_us"] = 1; }), "steps[0].stats.sum_us");
  EXPECT_EQ(field([](auto& j) { j["last_step"] = -2; }), "steps[0].stats.last_step");
  EXPECT_EQ(field([](auto& j) { j = 3; }), "steps[0].stats");
}

TEST(StepSummaryTest, ShowsWhatTheFiguresSay) {
  StepStats s;
  s.add({.step = 0,
         .step_us = 2'000'000,
         .compute_us = 1'500'000,
         .allreduce_us = 400'000,
         .allreduce_bytes = 1'000'000'000});
  const nlohmann::json out = step_summary_json(s, 4, 1e15, 2e15);
  EXPECT_EQ(out["steps"], 1);
  EXPECT_EQ(out["p50_us"], 2'000'000);
  EXPECT_DOUBLE_EQ(out["comm_share"].get<double>(), 0.25);
  EXPECT_EQ(out["comm_share_source"], "step_minus_compute");
  EXPECT_DOUBLE_EQ(out["allreduce_alg_bytes_per_s"].get<double>(), 2.5e9);
  EXPECT_DOUBLE_EQ(out["allreduce_bus_bytes_per_s"].get<double>(), 3.75e9);
  EXPECT_DOUBLE_EQ(out["mfu"].get<double>(), 0.25);
  const nlohmann::json unknown = step_summary_json(StepStats{}, 4, std::nullopt, 0);
  EXPECT_EQ(unknown, (nlohmann::json{{"steps", 0}}));
}

}  // namespace
}  // namespace tidepool
