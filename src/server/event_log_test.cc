#include "server/event_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>

#include <nlohmann/json.hpp>

namespace tidepool {
namespace {

EventRecord event(std::string kind, nlohmann::json document) {
  return EventRecord{1, 1'700'000'000'000, std::move(kind), document.dump()};
}

TEST(EventLog, AJobsEventSaysWhichJobWhyAndWhere) {
  const nlohmann::json placement =
      nlohmann::json::array({{{"node", "h100-a-01"}, {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}},
                             {{"node", "h100-a-02"}, {"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}}});
  EXPECT_EQ(event_log_text(event("job.started", {{"job", 12},
                                                 {"name", "train"},
                                                 {"tenant", "vision"},
                                                 {"queue", "default"},
                                                 {"state", "running"},
                                                 {"reason", "placed on 2 node(s)"},
                                                 {"placement", placement}})),
            "job 12 (train, vision/default): placed on 2 node(s) on h100-a-01:8,h100-a-02:8");
  EXPECT_EQ(event_log_text(event("job.preempted", {{"job", 3},
                                                   {"name", "x"},
                                                   {"tenant", "ads"},
                                                   {"queue", "q"},
                                                   {"reason", "preempted: reclaim"},
                                                   {"placement", nlohmann::json::array()}})),
            "job 3 (x, ads/q): preempted: reclaim");
}

TEST(EventLog, OtherEventsNameTheirSubjectThenFieldsThenReason) {
  EXPECT_EQ(event_log_text(event("node.not_ready",
                                 {{"node", "h100-b-02"}, {"reason", "no heartbeat for 31 s"}})),
            "node h100-b-02: no heartbeat for 31 s");
  EXPECT_EQ(event_log_text(event("node.registered",
                                 {{"node", "n1"}, {"gpus", 8}, {"agent_version", "0.1.0"}})),
            "node n1 agent_version=0.1.0 gpus=8");
  // What is not JSON is shown as it is.
  EXPECT_EQ(event_log_text(EventRecord{1, 0, "x", "not json"}), "not json");
}

TEST(EventLog, FailuresWarnAndTheManyRoutineEventsAreDebug) {
  EXPECT_EQ(event_log_level("job.failed"), spdlog::level::warn);
  EXPECT_EQ(event_log_level("job.requeued"), spdlog::level::warn);
  EXPECT_EQ(event_log_level("node.not_ready"), spdlog::level::warn);
  EXPECT_EQ(event_log_level("burst.hook_failed"), spdlog::level::warn);
  EXPECT_EQ(event_log_level("job.started"), spdlog::level::info);
  EXPECT_EQ(event_log_level("job.preempted"), spdlog::level::info);
  EXPECT_EQ(event_log_level("job.submitted"), spdlog::level::debug);
  EXPECT_EQ(event_log_level("job.checkpointed"), spdlog::level::debug);
}

TEST(EventLog, TheJsonFormIsOneObjectPerLine) {
  auto formatter = json_log_formatter();
  const std::string text = "a \"quoted\"\nline";
  spdlog::details::log_msg msg("tidepool", spdlog::level::warn, text);
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  const std::string line(out.data(), out.size());
  ASSERT_TRUE(line.ends_with("\n"));
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  const auto parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["level"], "warning");
  EXPECT_EQ(parsed["message"], text);
  EXPECT_THAT(parsed["time"].get<std::string>(), ::testing::EndsWith("Z"));
}

}  // namespace
}  // namespace tidepool
