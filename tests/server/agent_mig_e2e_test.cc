// MIG end to end: a real server and a real `tidepool agent` whose fake A100s include one in MIG
// mode with two 3g.40gb instances, as the cluster file declares it. Jobs asking for a 3g.40gb run
// on those instances, each task seeing its instance's UUID (what the agent discovered) in
// CUDA_VISIBLE_DEVICES; a third waits until one is free; a whole-GPU job takes the other GPU. Two
// jobs on half a GPU each share the whole one at once.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "agent/test_processes.h"
#include "agent_process.h"
#include "server_process.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;

constexpr const char* kMigCluster = R"(site: test
spines:
  - name: spine-1
    leaves:
      - name: leaf-1
        nodes:
          - {name: a100-1, gpu_model: A100, gpus: 2, cpus: 16, memory_gib: 64, mig: {0: [3g.40gb, 3g.40gb]}}
)";

constexpr const char* kMigTenants = R"(orgs:
  - name: org
    tenants:
      - name: infer
        quota:
          A100: {guaranteed_gpus: 2}
)";

class AgentMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The agent runs as root, its jobs as uids of their own: they write their results in out/.
    const std::string config = prepare_agent_test_dir(dir_, kMigCluster, kMigTenants);
    marker_ = "TIDEPOOL_TEST_MARKER=" + dir_.file("");
    server_ = std::make_unique<ServerProcess>(dir_, config);
    ASSERT_TRUE(server_->start()) << server_->log();
    admin_ = std::make_unique<ApiClient>(server_->port(), server_->admin_token());
    auto token = admin_->post("/v1/tokens", R"({"role": "agent", "node": "a100-1"})");
    ASSERT_EQ(token.status, 201) << token.body.dump();
    agent_ = std::make_unique<AgentProcess>(
        dir_, "a100-1", "http://127.0.0.1:" + std::to_string(server_->port()),
        token.body["secret"].get<std::string>(), "fake:1xA100[3g.40gb+3g.40gb],1xA100");
    agent_->start();
    ASSERT_TRUE(eventually(
        [&] {
          const auto nodes = admin_->get("/v1/nodes");
          for (const auto& n : nodes.body["nodes"]) {
            if (n["name"] == "a100-1" && n["state"] == "ready") return true;
          }
          return false;
        },
        10s))
        << agent_->log() << server_->log();
  }

  void TearDown() override {
    agent_->terminate();
    for (pid_t pid : processes_with(marker_)) ::kill(pid, SIGKILL);
    server_->terminate();
  }

  // Submits a job whose task writes its CUDA_VISIBLE_DEVICES to out/devices-<job> and then waits
  // for out/stop-<job>; returns its id.
  std::int64_t submit(const std::string& fields) {
    const std::string command =
        R"(["sh", "-c", "echo \"$CUDA_VISIBLE_DEVICES\" > \"$OUT/devices-$TIDEPOOL_JOB_ID\"; )"
        R"(while [ ! -e \"$OUT/stop-$TIDEPOOL_JOB_ID\" ]; do sleep 0.1; done"])";
    const std::string spec = R"({"name": "m", "tenant": "infer", "gpu_model": ["A100"], )" +
                             fields + R"(, "command": )" + command + R"(, "env": {"OUT": )" +
                             nlohmann::json(dir_.file("out")).dump() +
                             R"(, "TIDEPOOL_TEST_MARKER": )" +
                             nlohmann::json(dir_.file("")).dump() + "}}";
    auto reply = admin_->post("/v1/jobs", spec);
    EXPECT_EQ(reply.status, 201) << reply.body.dump();
    return reply.body.value("id", std::int64_t{0});
  }
  nlohmann::json job(std::int64_t id) { return admin_->get("/v1/jobs/" + std::to_string(id)).body; }
  bool job_state_is(std::int64_t id, const std::string& state, std::chrono::milliseconds limit) {
    return eventually([&] { return job(id).value("state", "") == state; }, limit);
  }
  // What job `id`'s task saw, once it wrote it.
  std::string devices_of(std::int64_t id) {
    const std::string path = dir_.file("out/devices-" + std::to_string(id));
    EXPECT_TRUE(eventually([&] { return !read_text(path).empty(); }, 10s)) << agent_->log();
    std::string text = read_text(path);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
  void stop(std::int64_t id) { write_text(dir_.file("out/stop-" + std::to_string(id)), "stop\n"); }

  TempDir dir_;
  std::string marker_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<ApiClient> admin_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentMigTest, EachTaskSeesItsInstanceAndAFreedInstanceServesTheNext) {
  const std::int64_t first = submit(R"("mig_profile": "3g.40gb")");
  const std::int64_t second = submit(R"("mig_profile": "3g.40gb")");
  const std::int64_t third = submit(R"("mig_profile": "3g.40gb")");
  const std::int64_t whole = submit(R"("gpus_per_task": 1)");
  for (std::int64_t id : {first, second, whole}) {
    ASSERT_TRUE(job_state_is(id, "running", 20s)) << job(id).dump() << agent_->log();
  }
  const std::string a = devices_of(first);
  const std::string b = devices_of(second);
  EXPECT_TRUE(a.starts_with("MIG-")) << a;
  EXPECT_TRUE(b.starts_with("MIG-")) << b;
  EXPECT_NE(a, b);
  EXPECT_EQ(devices_of(whole).find("MIG-"), std::string::npos) << devices_of(whole);
  EXPECT_EQ(job(whole)["placement"][0]["gpus"], nlohmann::json::array({1}));
  // No third instance: the third job waits, then takes the one the first leaves.
  EXPECT_EQ(job(third)["state"], "pending");
  stop(first);
  ASSERT_TRUE(job_state_is(first, "succeeded", 20s)) << job(first).dump() << agent_->log();
  ASSERT_TRUE(job_state_is(third, "running", 20s)) << job(third).dump() << agent_->log();
  EXPECT_EQ(devices_of(third), a);
  for (std::int64_t id : {second, third, whole}) stop(id);
  for (std::int64_t id : {second, third, whole}) {
    EXPECT_TRUE(job_state_is(id, "succeeded", 20s)) << job(id).dump();
  }
}

TEST_F(AgentMigTest, TwoHalvesOfTheWholeGpuRunAtOnce) {
  const std::int64_t first = submit(R"("gpu_milli": 500)");
  const std::int64_t second = submit(R"("gpu_milli": 500)");
  // Both run on GPU 1 (GPU 0 is in MIG mode), each started while the other still runs.
  for (std::int64_t id : {first, second}) {
    ASSERT_TRUE(job_state_is(id, "running", 20s)) << job(id).dump() << agent_->log();
    EXPECT_EQ(job(id)["placement"][0]["gpus"], nlohmann::json::array({1}));
  }
  EXPECT_EQ(devices_of(first), devices_of(second));
  for (std::int64_t id : {first, second}) stop(id);
  for (std::int64_t id : {first, second}) {
    EXPECT_TRUE(job_state_is(id, "succeeded", 20s)) << job(id).dump();
  }
}

}  // namespace
}  // namespace tidepool::test_support
