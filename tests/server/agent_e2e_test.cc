// The node agent end to end: a real server and real `tidepool agent` processes with fake GPUs on
// 127.0.0.1, running real jobs (shell scripts). A gang gets the right environment on the right
// GPUs; a preempted job checkpoints and resumes from its checkpoint on another node; a killed
// agent's job runs again elsewhere, and the restarted agent stops what it left behind; cancel kills
// the whole process group. After each test no process of the test's jobs is left.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <string_view>

#include "agent/test_processes.h"
#include "agent_process.h"
#include "server_process.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// "owner" is guaranteed one node, "borrower" none: it runs on idle GPUs and is preempted when
// "owner" wants them back.
constexpr const char* kTenants = R"(orgs:
  - name: org
    tenants:
      - name: owner
        quota:
          H100: {guaranteed_gpus: 8, borrowing_limit_gpus: 8}
      - name: borrower
        quota:
          H100: {guaranteed_gpus: 8, borrowing_limit_gpus: 8}
)";

// A training job: counts steps from its checkpoint (TIDEPOOL_RESUME_FROM) and writes a line per
// start to $OUT/starts-$TIDEPOOL_JOB_ID; on the notice (SIGUSR1) it saves a checkpoint (taking
// 300 ms, as a real one takes time), reports it with `tidepool checkpoint`, and waits for SIGTERM.
constexpr const char* kTrainScript = R"(#!/bin/sh
step=0
if [ -n "$TIDEPOOL_RESUME_FROM" ]; then step=$(cat "$TIDEPOOL_RESUME_FROM"); fi
echo "run=$TIDEPOOL_RUN resume=${TIDEPOOL_RESUME_FROM:-none} step=$step pid=$$" >> "$OUT/starts-$TIDEPOOL_JOB_ID"
checkpoint() {
  sleep 0.3
  echo "$step" > "$TIDEPOOL_CHECKPOINT_DIR/step-$step"
  tidepool checkpoint --step "$step" --path "$TIDEPOOL_CHECKPOINT_DIR/step-$step"
}
trap 'checkpoint' USR1
trap 'exit 143' TERM
while [ "$step" -lt "${STEPS:-100000}" ]; do
  step=$((step + 1))
  echo "run $TIDEPOOL_RUN step $step"
  sleep 0.1
done
)";

std::string escape_json(const std::string& text) { return nlohmann::json(text).dump(); }

// The agents are given a list of servers whose first refuses connections (a highly available
// Tidepool with one server down): they pass over it to the one that answers.
constexpr std::string_view kRefusedServer = "http://127.0.0.1:1";

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The agents run as root, their jobs as uids of their own: the jobs pass through the test's
    // folder (to train.sh) and write their results in out/.
    const std::string config = prepare_agent_test_dir(dir_, kTwoAgentNodes, kTenants);
    write_text(dir_.file("train.sh"), kTrainScript);
    marker_ = "TIDEPOOL_TEST_MARKER=" + dir_.file("");
    server_ = std::make_unique<ServerProcess>(dir_, config);
    ASSERT_TRUE(server_->start()) << server_->log();
    admin_ = std::make_unique<ApiClient>(server_->port(), server_->admin_token());
    for (const std::string node : {"node-1", "node-2"}) {
      auto token = admin_->post("/v1/tokens", R"({"role": "agent", "node": ")" + node + "\"}");
      ASSERT_EQ(token.status, 201) << token.body.dump();
      tokens_[node] = token.body["secret"].get<std::string>();
      agents_[node] = std::make_unique<AgentProcess>(dir_, node, servers(), tokens_[node]);
      agents_[node]->start();
    }
    ASSERT_TRUE(eventually(
        [&] {
          auto nodes = admin_->get("/v1/nodes");
          int ready = 0;
          for (const auto& n : nodes.body["nodes"]) {
            if (n.value("registered_ms", std::int64_t{0}) > 0 && n["state"] == "ready") ++ready;
          }
          return ready == 2;
        },
        10s))
        << agent_logs();
  }

  void TearDown() override {
    for (auto& [node, agent] : agents_) agent->terminate();
    // The agents leave their tasks to a next agent on SIGTERM; the test ends them, and checks
    // that each test's own steps left nothing behind before that.
    for (pid_t pid : processes_with(marker_)) ::kill(pid, SIGKILL);
    server_->terminate();
  }

  // The servers the agents are given: one that refuses connections, then the test's.
  [[nodiscard]] std::string servers() const {
    return std::string(kRefusedServer) + ", http://127.0.0.1:" + std::to_string(server_->port());
  }

  std::string agent_logs() const {
    std::string out;
    for (const auto& [node, agent] : agents_) out += "--- " + node + "\n" + agent->log();
    return out;
  }

  // Submits a job running `command` (a JSON list) with the test's environment; returns its id.
  std::int64_t submit(const std::string& tenant, const std::string& fields,
                      const std::string& command, const std::string& env = "") {
    const std::string spec = R"({"name": "t", "tenant": ")" + tenant + R"(", )" + fields +
                             R"(, "command": )" + command + R"(, "env": {"OUT": )" +
                             escape_json(dir_.file("out")) + R"(, "TIDEPOOL_TEST_MARKER": )" +
                             escape_json(dir_.file("")) + env + "}}";
    auto reply = admin_->post("/v1/jobs", spec);
    EXPECT_EQ(reply.status, 201) << reply.body.dump();
    return reply.body.value("id", std::int64_t{0});
  }

  nlohmann::json job(std::int64_t id) { return admin_->get("/v1/jobs/" + std::to_string(id)).body; }

  // Task 0's log of run `run` (0: all runs) as the server holds it.
  std::string server_log(std::int64_t id, int run = 0) {
    httplib::Client client("127.0.0.1", server_->port());
    std::string path = "/v1/jobs/" + std::to_string(id) + "/logs?task=0&limit=8388608";
    if (run > 0) path += "&run=" + std::to_string(run);
    auto reply =
        client.Get(path, httplib::Headers{{"Authorization", "Bearer " + server_->admin_token()}});
    return reply && reply->status == 200 ? reply->body : "";
  }
  // Task 0's log of run `run` as its agent on `node` wrote it.
  std::string agent_log(const std::string& node, std::int64_t id, int run) {
    return read_text(dir_.file("state-" + node + "/logs/" + std::to_string(id) + "/task-0.run-" +
                               std::to_string(run) + ".log"));
  }

  bool job_state_is(std::int64_t id, const std::string& state, std::chrono::milliseconds limit) {
    return eventually([&] { return job(id).value("state", "") == state; }, limit);
  }

  TempDir dir_;
  std::string marker_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<ApiClient> admin_;
  std::map<std::string, std::string> tokens_;
  std::map<std::string, std::unique_ptr<AgentProcess>> agents_;
};

std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

TEST_F(AgentTest, GangRunsWithItsEnvironmentOnItsGpus) {
  // 2 tasks x 8 GPUs: one per node.
  const std::int64_t id =
      submit("owner", R"("tasks": 2, "gpus_per_task": 8)",
             R"(["sh", "-c", "env > \"$OUT/env-$RANK\"; echo task $RANK says hello"])");
  ASSERT_TRUE(job_state_is(id, "succeeded", 20s)) << job(id).dump() << agent_logs();
  const nlohmann::json done = job(id);
  std::set<std::string> masters;
  std::set<std::string> ports;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = read_env_file(dir_.file("out/env-" + std::to_string(rank)));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["TIDEPOOL_TASK_INDEX"], std::to_string(rank));
    EXPECT_EQ(env["TIDEPOOL_JOB_ID"], std::to_string(id));
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
    EXPECT_EQ(env["TIDEPOOL_CHECKPOINT_DIR"], dir_.file("checkpoints/" + std::to_string(id)));
    EXPECT_FALSE(env.contains("TIDEPOOL_RESUME_FROM"));
    // The server that answered, not the list: what the task's own `tidepool` commands speak to.
    EXPECT_EQ(env["TIDEPOOL_SERVER"], "http://127.0.0.1:" + std::to_string(server_->port()));
    masters.insert(env["MASTER_ADDR"]);
    ports.insert(env["MASTER_PORT"]);
  }
  // Every rank meets at task 0's node.
  EXPECT_EQ(masters, std::set<std::string>{done["placement"][0]["node"].get<std::string>()});
  EXPECT_EQ(ports.size(), 1U);
  // The output reached the server's logs.
  httplib::Client client("127.0.0.1", server_->port());
  auto logs = client.Get("/v1/jobs/" + std::to_string(id) + "/logs?task=1",
                         httplib::Headers{{"Authorization", "Bearer " + server_->admin_token()}});
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->body, "task 1 says hello\n");
  EXPECT_TRUE(processes_with(marker_).empty());
}

TEST_F(AgentTest, PreemptedJobCheckpointsAndResumesElsewhere) {
  const std::string train = R"(["sh", ")" + dir_.file("train.sh") + R"("])";
  const std::string checkpointing = R"("gpus_per_task": 8, "checkpoint_interval": "10m")";
  // The borrower fills both nodes: its guarantee, and the owner's idle one.
  const std::int64_t first = submit("borrower", checkpointing, train);
  ASSERT_TRUE(job_state_is(first, "running", 10s));
  const std::int64_t second = submit("borrower", checkpointing, train);
  ASSERT_TRUE(job_state_is(second, "running", 10s)) << agent_logs();
  for (std::int64_t id : {first, second}) {
    ASSERT_TRUE(eventually(
        [&] { return !read_text(dir_.file("out/starts-" + std::to_string(id))).empty(); }, 10s))
        << agent_logs();
  }
  // A running task's output reaches the server while it runs, within 2 s of being written.
  {
    const std::string wanted = "run 1 step 3\n";
    std::string local;
    ASSERT_TRUE(eventually(
        [&] {
          return (local = agent_log(job(first)["placement"][0]["node"], first, 1)).find(wanted) !=
                 std::string::npos;
        },
        10s));
    const auto written = Clock::now();
    // (Within 2 s on an idle machine, as tests/first_hour_test.sh checks; beside other tests a
    // loaded machine may take longer, which is not what this test is about.)
    ASSERT_TRUE(
        eventually([&] { return server_log(first, 1).find(wanted) != std::string::npos; }, 10s))
        << "on the server: '" << server_log(first, 1) << "'; on the node: '" << local << "'"
        << agent_logs();
    std::printf(
        "log: a running task's line on the server %lld ms after the node saw it\n",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - written).count()));
  }
  // The owner claims its guarantee back: one borrower job is preempted. It gets notice,
  // checkpoints, stops; the owner's job starts on its GPUs.
  const std::int64_t claim =
      submit("owner", R"("gpus_per_task": 8, "preemptible": false)", R"(["sleep", "1000"])");
  ASSERT_TRUE(job_state_is(claim, "running", 15s)) << job(claim).dump() << agent_logs();
  std::int64_t preempted = 0;
  std::int64_t kept = 0;
  for (std::int64_t id : {first, second}) {
    (job(id).value("preemptions", 0) > 0 ? preempted : kept) = id;
  }
  ASSERT_NE(preempted, 0) << agent_logs();
  const std::string stopped_on = job(claim)["placement"][0]["node"];
  ASSERT_TRUE(eventually([&] { return job(preempted).contains("checkpoint_path"); }, 10s))
      << job(preempted).dump() << agent_logs();
  const std::string checkpoint = job(preempted)["checkpoint_path"];
  // The agent says how long the stop took, from the notice to the GPUs being free.
  std::smatch m;
  const std::regex line(
      "job " + std::to_string(preempted) +
      R"( task 0: stopped \(preempted\), notice at \+(\d+) ms, checkpoint at \+(\d+) ms, SIGTERM at \+(\d+) ms; GPUs free (\d+) ms)");
  std::string logs;
  ASSERT_TRUE(eventually(
      [&] {
        logs = agent_logs();
        return std::regex_search(logs, m, line);
      },
      10s))
      << logs;
  const int notice = std::stoi(m[1]);
  const int checkpoint_time = std::stoi(m[2]) - notice;
  const int free = std::stoi(m[4]) - notice;
  EXPECT_LT(free, 2000 + checkpoint_time) << logs;
  std::printf(
      "preemption: checkpoint %d ms after the notice, GPUs free %d ms after the notice "
      "(%d ms beyond the checkpoint)\n",
      checkpoint_time, free, free - checkpoint_time);
  // When the other borrower job ends, the preempted one resumes there from its checkpoint.
  ASSERT_EQ(admin_->del("/v1/jobs/" + std::to_string(kept)).status, 200);
  const std::string starts_file = dir_.file("out/starts-" + std::to_string(preempted));
  ASSERT_TRUE(
      eventually([&] { return read_text(starts_file).find("run=2") != std::string::npos; }, 20s))
      << job(preempted).dump() << agent_logs();
  const nlohmann::json resumed = job(preempted);
  EXPECT_NE(resumed["placement"][0]["node"], stopped_on);
  EXPECT_NE(read_text(starts_file).find("run=2 resume=" + checkpoint), std::string::npos)
      << read_text(starts_file);
  EXPECT_GE(resumed.value("lost_work_ms", -1), 0);
  const std::string resumed_on = resumed["placement"][0]["node"];
  ASSERT_TRUE(eventually(
      [&] { return server_log(preempted, 2).find("run 2 step") != std::string::npos; }, 10s))
      << agent_logs();
  for (std::int64_t id : {preempted, claim}) admin_->del("/v1/jobs/" + std::to_string(id));
  EXPECT_TRUE(eventually([&] { return processes_with(marker_).empty(); }, 15s)) << agent_logs();
  // Each run's log on the server is the task's own output of that run, byte for byte, and the
  // task's log is both, one after the other.
  std::string run1;
  std::string run2;
  EXPECT_TRUE(eventually(
      [&] {
        run1 = agent_log(stopped_on, preempted, 1);
        run2 = agent_log(resumed_on, preempted, 2);
        return !run1.empty() && !run2.empty() && server_log(preempted, 1) == run1 &&
               server_log(preempted, 2) == run2;
      },
      10s))
      << "run 1 on the server:\n"
      << server_log(preempted, 1) << "\non the node:\n"
      << run1 << "\nrun 2 on the server:\n"
      << server_log(preempted, 2) << "\non the node:\n"
      << run2;
  EXPECT_EQ(server_log(preempted), run1 + run2);
  EXPECT_NE(run2.find("run 2 step"), std::string::npos) << run2;
}

TEST_F(AgentTest, KilledAgentsJobRunsElsewhereAndItsLeftoverIsStopped) {
  const std::string train = R"(["sh", ")" + dir_.file("train.sh") + R"("])";
  const std::int64_t id = submit("owner", R"("gpus_per_task": 8)", train);
  ASSERT_TRUE(job_state_is(id, "running", 10s));
  const std::string starts_file = dir_.file("out/starts-" + std::to_string(id));
  ASSERT_TRUE(eventually([&] { return !read_text(starts_file).empty(); }, 10s)) << agent_logs();
  const std::string first = job(id)["placement"][0]["node"];
  const std::string other = first == "node-1" ? "node-2" : "node-1";
  // The first run's shell, as the test sees it (in the task's PID namespace the script's $$ is
  // another number), not the sleeps it starts and ends each step.
  std::set<pid_t> before;
  for (pid_t pid : processes_with(marker_)) {
    if (read_text("/proc/" + std::to_string(pid) + "/cmdline").find("train.sh") !=
        std::string::npos) {
      before.insert(pid);
    }
  }
  ASSERT_EQ(before.size(), 1U);
  // The agent wrote the task down before it is killed.
  ASSERT_TRUE(eventually([&] { return state_lists_job(dir_.file("state-" + first), id); }, 10s))
      << agent_logs();
  agents_[first]->kill_hard();
  const auto killed = Clock::now();
  ASSERT_TRUE(eventually(
      [&] {
        const nlohmann::json j = job(id);
        return j.value("state", "") == "running" && j["placement"][0]["node"] == other &&
               read_text(starts_file).find("run=2") != std::string::npos;
      },
      15s))
      << job(id).dump() << agent_logs();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  std::printf("killed agent: its job ran again on %s %.2f s later (heartbeat timeout 3 s)\n",
              other.c_str(), seconds);
  EXPECT_LT(seconds, 3.0 + 5.0);
  EXPECT_EQ(job(id).value("faults", 0), 1);
  auto nodes = admin_->get("/v1/nodes").body;
  for (const auto& n : nodes["nodes"]) {
    if (n["name"] == first) {
      EXPECT_EQ(n["state"], "not_ready");
    }
  }
  // The old run still runs on the dead agent's node: a new agent there stops it.
  for (pid_t pid : before) EXPECT_EQ(::kill(pid, 0), 0) << "pid " << pid;
  agents_[first] = std::make_unique<AgentProcess>(dir_, first, servers(), tokens_[first]);
  agents_[first]->start();
  EXPECT_TRUE(eventually(
      [&] {
        for (pid_t pid : before) {
          if (processes_with(marker_).contains(pid)) return false;
        }
        return true;
      },
      10s))
      << agent_logs();
  EXPECT_NE(agents_[first]->log().find("taken back"), std::string::npos) << agent_logs();
  admin_->del("/v1/jobs/" + std::to_string(id));
  EXPECT_TRUE(eventually([&] { return processes_with(marker_).empty(); }, 10s)) << agent_logs();
}

TEST_F(AgentTest, CancelKillsTheWholeProcessGroup) {
  // The task starts two children that ignore SIGTERM: only SIGKILL after the grace period ends
  // them, and they must end too.
  const std::int64_t id = submit(
      "owner", R"("gpus_per_task": 1)",
      R"(["sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000 & echo $$ > \"$OUT/leader\"; wait"])");
  ASSERT_TRUE(eventually([&] { return !read_text(dir_.file("out/leader")).empty(); }, 10s))
      << agent_logs();
  ASSERT_GE(processes_with(marker_).size(), 3U);
  const auto cancelled = Clock::now();
  ASSERT_EQ(admin_->del("/v1/jobs/" + std::to_string(id)).status, 200);
  ASSERT_TRUE(eventually([&] { return processes_with(marker_).empty(); }, 10s)) << agent_logs();
  const double seconds = std::chrono::duration<double>(Clock::now() - cancelled).count();
  // The grace period is 2 s: SIGKILL after it.
  EXPECT_GE(seconds, 1.5);
  EXPECT_NE(agent_logs().find("stopping (cancelled)"), std::string::npos) << agent_logs();
}

}  // namespace
}  // namespace tidepool::test_support
