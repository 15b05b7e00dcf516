#include "sim_cli/shadow_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShadowTrace, JsonLines) {
  const auto jobs = read_shadow_trace(
      R"({"id": "1", "tenant": "vision", "submit": 100, "gpus": 8, "start": 110, "end": 200, "nodes": "tp[1-2]", "cpus": 2}
{"id": 2, "tenant": "speech", "submit": 120, "gpus": 1, "nodes": ["tp1"], "start": 130}

{"id": "3", "tenant": "speech", "submit": 140, "gpus": 2, "node_count": 1, "time_limit": 600}
{"id": "4", "tenant": "speech", "submit": 150, "gpus": 2, "cancelled": true}
)",
      "t.jsonl");
  ASSERT_TRUE(jobs) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 4U);
  EXPECT_THAT((*jobs)[0].nodes, ElementsAre("tp1", "tp2"));
  EXPECT_EQ((*jobs)[0].end, 200);
  EXPECT_EQ((*jobs)[0].milli_cpu, 2000);
  EXPECT_EQ((*jobs)[1].id, "2");
  EXPECT_FALSE((*jobs)[1].end);
  EXPECT_FALSE((*jobs)[2].start);
  EXPECT_EQ((*jobs)[2].time_limit, 600);
  EXPECT_TRUE((*jobs)[3].cancelled);
}

TEST(ShadowTrace, Csv) {
  const auto jobs = read_shadow_trace(
      "id,tenant,submit,gpus,start,end,nodes\n"
      "a,vision,100,4,100,160,tp1\n"
      "b,speech,101,2,,,\n",
      "t.csv");
  ASSERT_TRUE(jobs) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 2U);
  EXPECT_EQ((*jobs)[0].start, 100);
  EXPECT_FALSE((*jobs)[1].start);
}

TEST(ShadowTrace, SavedSqueueReply) {
  std::ifstream in(test_support::test_source_dir() +
                   "/src/sim_cli/testdata/slurm_22.05_squeue_late.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto jobs = read_shadow_trace(text.str(), "squeue.json");
  ASSERT_TRUE(jobs) << jobs.error().message();
  EXPECT_EQ(jobs->size(), 8U);
}

TEST(ShadowTrace, ErrorsNameTheLineAndField) {
  auto jobs = read_shadow_trace("{\"id\": \"1\", \"tenant\": \"a\", \"gpus\": 1}\n", "t.jsonl");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().message(), "t.jsonl:1 submit: missing");
  jobs = read_shadow_trace("{\"id\": \"1\", \"tenant\": \"a\", \"submit\": 1, \"gpus\": \"x\"}\n",
                           "t.jsonl");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().field, "t.jsonl:1 gpus");
  jobs = read_shadow_trace(
      "{\"id\": \"1\", \"tenant\": \"a\", \"submit\": 1, \"gpus\": 1, \"start\": 2}\n", "t.jsonl");
  ASSERT_FALSE(jobs);
  EXPECT_EQ(jobs.error().field, "t.jsonl:1 nodes");
  jobs = read_shadow_trace("id,tenant,submit,gpus\na,b,soon,1\n", "t.csv");
  ASSERT_FALSE(jobs);
  EXPECT_THAT(jobs.error().message(), HasSubstr("submit"));
  jobs = read_shadow_trace("id,tenant,submit\n", "t.csv");
  ASSERT_FALSE(jobs);
  EXPECT_THAT(jobs.error().message(), HasSubstr("gpus"));
  jobs = read_shadow_trace("id,tenant,submit,gpus\na,b,1,1\na,b,2,1\n", "t.csv");
  ASSERT_FALSE(jobs);
  EXPECT_THAT(jobs.error().reason, HasSubstr("twice"));
  EXPECT_FALSE(read_shadow_trace("  \n", "t"));
  EXPECT_FALSE(read_shadow_trace("{not json\n", "t"));
}

// Every figure within sim/observed_job.h's bounds, or an error naming the line and the field (no
// figure is clamped or wrapped, and no product overflows); an end before its start is refused.
TEST(ShadowTrace, FiguresBeyondTheBoundsAreNamed) {
  const std::string header = "id,tenant,submit,gpus,start,end,nodes,node_count,cpus,memory_mib\n";
  for (const auto& [row, field] :
       {std::pair{"a,t,-1,1,,,,,,", "submit"}, std::pair{"a,t,1,-1,,,,,,", "gpus"},
        std::pair{"a,t,1,1000001,,,,,,", "gpus"},
        std::pair{"a,t,1,1,9223372036854775807,,x,,,", "start"},
        std::pair{"a,t,1,1,2,9223372036854775807,x,,,", "end"},
        std::pair{"a,t,1,1,5,4,x,,,", "end"}, std::pair{"a,t,1,1,,,,100001,,", "node_count"},
        std::pair{"a,t,1,1,,,,,9223372036854775807,", "cpus"}, std::pair{"a,t,1,1,,,,,-2,", "cpus"},
        std::pair{"a,t,1,1,,,,,,-5", "memory_mib"}}) {
    const auto jobs = read_shadow_trace(header + row + "\n", "t.csv");
    ASSERT_FALSE(jobs) << row;
    EXPECT_EQ(jobs.error().field, "t.csv:2 " + std::string(field)) << row;
  }
  // A node count below 1 is 1, as before.
  const auto jobs = read_shadow_trace(header + "a,t,1,1,,,,0,,\n", "t.csv");
  ASSERT_TRUE(jobs) << jobs.error().message();
  EXPECT_EQ(jobs->front().node_count, 1);
}

}  // namespace
}  // namespace tidepool
