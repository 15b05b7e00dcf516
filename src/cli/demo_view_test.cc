#include "cli/demo_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr std::int64_t kStart = 1'700'000'000'000;

Json event(std::int64_t seconds, const std::string& kind, Json data) {
  return {{"seq", seconds}, {"at_ms", kStart + seconds * 1000}, {"kind", kind}, {"data", data}};
}

Json job_event(std::int64_t seconds, const std::string& kind, const std::string& reason,
               const std::string& node) {
  Json placement = Json::array();
  if (!node.empty()) placement.push_back({{"node", node}, {"gpus", {0, 1}}});
  return event(seconds, kind,
               {{"job", 1},
                {"name", "train"},
                {"tenant", "vision"},
                {"reason", reason},
                {"placement", placement}});
}

Json demo_job(std::int64_t id, const std::string& state, int preemptions = 0,
              std::int64_t lost_ms = 0) {
  Json out = {{"id", id},
              {"state", state},
              {"spec", {{"name", "job-" + std::to_string(id)}, {"tasks", 2}, {"gpus_per_task", 4}}},
              {"preemptions", preemptions},
              {"message", state == "failed" ? "exited with code 3" : ""}};
  if (lost_ms != 0) out["lost_work_ms"] = lost_ms;
  if (state == "pending") out["pending"] = {{"kind", "quota"}};
  return out;
}

TEST(DemoView, FormatsClock) {
  EXPECT_EQ(format_clock(0), "0:00");
  EXPECT_EQ(format_clock(83'400), "1:23");
  EXPECT_EQ(format_clock(3'723'000), "1:02:03");
  EXPECT_EQ(format_clock(-5), "0:00");
}

TEST(DemoView, TellsTheStoryOfAPreemptedJob) {
  DemoTally tally;
  EXPECT_EQ(tally.take(job_event(0, "job.submitted", "submitted", ""), kStart), "");
  EXPECT_EQ(tally.take(job_event(1, "job.started", "placed on 1 node(s) (borrowing idle capacity)",
                                 "node-1"),
                       kStart),
            " 0:01  #1 train (vision) started on node-1, borrowing idle capacity");
  EXPECT_EQ(tally.take(event(5, "job.checkpointed", {{"job", 1}, {"step", 10}}), kStart),
            " 0:05  #1 train checkpointed at step 10");
  EXPECT_EQ(tally.take(job_event(7, "job.preempted", "preempted (reclaim) for job 2", ""), kStart),
            " 0:07  #1 train preempted (reclaim) for job 2");
  EXPECT_EQ(tally.take(event(8, "job.checkpointed", {{"job", 1}, {"step", 12}}), kStart),
            " 0:08  #1 train checkpointed at step 12");
  EXPECT_EQ(
      tally.take(job_event(20, "job.started", "placed on 1 node(s) (within its quota)", "node-3"),
                 kStart),
      " 0:20  #1 train resumed on node-3 from its checkpoint at step 12");
  EXPECT_EQ(tally.take(job_event(30, "job.succeeded", "succeeded", "node-3"), kStart),
            " 0:30  #1 train succeeded");
  EXPECT_EQ(tally.take(event(31, "token.created", {{"token", "x"}}), kStart), "");
  EXPECT_EQ(tally.checkpoints(), 2);
  const DemoJobRecord& record = tally.jobs().at(1);
  EXPECT_EQ(record.preemptions.size(), 1u);
  EXPECT_EQ(record.resumed_from, std::vector<std::int64_t>{12});
}

TEST(DemoView, CountsRestartsWithoutCheckpoint) {
  DemoTally tally;
  tally.take(job_event(1, "job.started", "placed on 1 node(s) (within its quota)", "node-1"),
             kStart);
  EXPECT_THAT(
      tally.take(job_event(2, "job.requeued", "node node-1's agent sent no heartbeat", ""), kStart),
      HasSubstr("#1 train requeued: node node-1's agent sent no heartbeat"));
  EXPECT_THAT(
      tally.take(job_event(3, "job.started", "placed on 1 node(s) (within its quota)", "node-2"),
                 kStart),
      HasSubstr("restarted on node-2 from the beginning (no checkpoint)"));
  EXPECT_EQ(tally.jobs().at(1).restarts_from_scratch, 1);
}

TEST(DemoView, RendersNodesPendingJobsAndEvents) {
  const Json nodes = Json::array({{{"name", "node-1"},
                                   {"gpus", 8},
                                   {"gpu_milli_allocated", 5000},
                                   {"state", "ready"},
                                   {"jobs",
                                    {{{"job", 1}, {"name", "train"}, {"gpus", 4}},
                                     {{"job", 2}, {"name", "nb"}, {"gpus", 1}}}}},
                                  {{"name", "node-2"},
                                   {"gpus", 8},
                                   {"gpu_milli_allocated", 0},
                                   {"state", "not_ready"},
                                   {"jobs", Json::array()}}});
  const Json jobs = Json::array({demo_job(1, "running"), demo_job(2, "running"),
                                 demo_job(3, "pending"), demo_job(4, "succeeded")});
  DemoFrame frame{
      .elapsed_ms = 65'000, .submitted = 4, .to_submit = 5, .note = "", .events = {"a", "b", "c"}};
  const std::string out = render_demo_frame(nodes, jobs, frame, 2);
  EXPECT_THAT(out, HasSubstr("--- 1:05  running 2, pending 1, succeeded 1, failed 0  (4 of 5 jobs "
                             "submitted)\n"));
  EXPECT_THAT(out, HasSubstr("  node-1 [#####...] 5/8  #1 train:4  #2 nb:1\n"));
  EXPECT_THAT(out, HasSubstr("  node-2 [........] 0/8 not_ready\n"));
  EXPECT_THAT(out, HasSubstr("  pending: #3 job-3 (quota)\n"));
  EXPECT_THAT(out, HasSubstr("  a\n  b\n  ... 1 more events\n"));
  EXPECT_THAT(out, Not(HasSubstr("  c\n")));
}

TEST(DemoView, SummarizesTheRun) {
  DemoTally tally;
  tally.take(job_event(1, "job.started", "placed on 1 node(s) (within its quota)", "node-1"),
             kStart);
  tally.take(event(2, "job.checkpointed", {{"job", 1}, {"step", 4}}), kStart);
  tally.take(job_event(3, "job.preempted", "preempted (reclaim) for job 2", ""), kStart);
  tally.take(job_event(9, "job.started", "placed on 1 node(s) (within its quota)", "node-2"),
             kStart);
  const Json jobs = Json::array({demo_job(1, "succeeded", 1, 1500), demo_job(2, "succeeded"),
                                 demo_job(3, "failed"), demo_job(4, "running")});
  const std::string out = render_demo_summary(jobs, tally, 70'000, "every job ended");
  EXPECT_THAT(out, HasSubstr("Summary after 1:10 (every job ended):\n"));
  EXPECT_THAT(out, HasSubstr("  jobs: 4 submitted: 2 succeeded, 1 failed, 0 cancelled, 1 "
                             "unfinished\n"));
  EXPECT_THAT(out, HasSubstr("    #3 job-3 failed: exited with code 3\n"));
  EXPECT_THAT(out, HasSubstr("  preemptions: 1\n    #1 train (vision): preempted (reclaim) for "
                             "job 2\n"));
  EXPECT_THAT(out, HasSubstr("  checkpoints: 1 reported\n"));
  EXPECT_THAT(out, HasSubstr("  resumed from a checkpoint: 1 (#1 train at step 4)\n"));
  EXPECT_THAT(out, HasSubstr("  lost work: 12 GPU-seconds"));  // 1.5 s x 8 GPUs
}

Json demo_service_view() {
  return Json::parse(R"({
    "service": 12, "name": "chat", "tenant": "ads", "state": "running",
    "min_replicas": 1, "max_replicas": 4,
    "target": {"metric": "p95_latency_ms", "value": 500},
    "wanted": 3,
    "decision": {"wanted": 3, "panic": false, "reason": "p95 812 ms over 500 ms: 1 -> 3",
                 "at_ms": 1700000000000},
    "replicas": [{"job": 13, "phase": "ready"}, {"job": 14, "phase": "ready"},
                 {"job": 15, "phase": "starting"}, {"job": 16, "phase": "draining"}],
    "endpoints": [{"job": 13, "url": "http://127.0.0.1:18000"},
                  {"job": 14, "url": "http://127.0.0.1:18001"}]
  })");
}

TEST(DemoView, ShowsTheService) {
  const Json view = demo_service_view();
  EXPECT_EQ(ready_replicas(view), 2);
  const std::string out =
      render_demo_service(view,
                          "t  42.0s rate 40/s targets 2 used 2 in_flight 3 ok 40 failed 0 "
                          "p95_ms 212");
  EXPECT_EQ(out,
            "  service chat: 2 ready / 3 wanted (p95 target 500 ms), 1 starting, 1 draining "
            "\u2014 last decision: p95 812 ms over 500 ms: 1 -> 3\n"
            "  load: t  42.0s rate 40/s targets 2 used 2 in_flight 3 ok 40 failed 0 p95_ms 212\n");
}

TEST(DemoView, ShowsAServiceBeforeItsFirstDecision) {
  Json view = demo_service_view();
  view["wanted"] = nullptr;
  view["decision"] = nullptr;
  view["replicas"] = Json::array({{{"job", 13}, {"phase", "pending"}}});
  EXPECT_EQ(render_demo_service(view, ""),
            "  service chat: 0 ready / ? wanted (p95 target 500 ms), 1 pending \u2014 last "
            "decision: none yet\n");
  EXPECT_EQ(ready_replicas(Json::object()), 0);
}

TEST(DemoView, ReadsTheLoadGeneratorsLog) {
  const std::string log =
      "t   1.0s rate 5/s targets 1 used 1 in_flight 0 ok 5 failed 0 p95_ms 110\n"
      "--service: timed out; keeping the previous endpoints\n"
      "t   2.0s rate 5/s targets 1 used 1 in_flight 1 ok 4 failed 0 p95_ms 120\n"
      "sent 700 ok 700 failed 0 p95_ms 230\n";
  EXPECT_EQ(last_line_starting(log, "t "),
            "t   2.0s rate 5/s targets 1 used 1 in_flight 1 ok 4 failed 0 p95_ms 120");
  EXPECT_EQ(last_line_starting(log, "sent "), "sent 700 ok 700 failed 0 p95_ms 230");
  EXPECT_EQ(last_line_starting("t 1", "sent "), "");
  EXPECT_EQ(render_demo_service_summary("chat", 3, 4, "sent 700 ok 700 failed 0 p95_ms 230"),
            "  service chat: at most 3 replica(s) ready at once (4 wanted at most)\n"
            "  load generator: sent 700 ok 700 failed 0 p95_ms 230\n");
  EXPECT_THAT(render_demo_service_summary("chat", 1, 1, ""), HasSubstr("no summary"));
}

}  // namespace
}  // namespace tidepool
