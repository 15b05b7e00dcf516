// Bursting end to end: a real server whose market file has a burst provider, and the shipped
// provider hook deploy/burst/local-provider.sh, which "rents" a node by starting a real
// `tidepool agent` with fake GPUs on 127.0.0.1 with the token the server gave it, and gives it
// back by stopping that agent. A job
// that waits past the threshold runs there, is charged the offer's price, and the node is given
// back when it ends; a failing hook sends the job back to the pool's queue with the hook's words.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <vector>

#include "server_process.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;

// One node of 8 H100: a job of 8 GPUs fills it.
constexpr const char* kCluster = R"(site: test
spines:
  - name: spine-1
    leaves:
      - name: leaf-1
        nodes:
          - {name: node-1, gpu_model: H100, gpus: 8, cpus: 16, memory_gib: 64, nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]}
)";

constexpr const char* kTenants = R"(orgs:
  - name: org
    tenants:
      - name: vision
        quota:
          H100: {guaranteed_gpus: 8}
)";

// The market: a provider whose hook is the local provider, renting H100 at 4 an hour, after 2 s.
constexpr const char* kMarket = R"(currency: USD
models:
  H100: {purchase_price: 30000, power_watts: 1000, electricity_per_kwh: 0.12,
         operations_per_year: 3000}
prices: {period: 1h, utilisation_curve: [[0, 1], [1, 1]]}
burst:
  threshold: 2s
  providers:
    - name: local
      hook: @HOOK@
      offers:
        - {name: local-h100, model: H100, price_per_gpu_hour: 4, max_gpus: 16}
)";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

// Whether process `pid` is alive (and not a zombie).
bool alive(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

class BurstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = dir_.file("");
    dir_path_ = dir.substr(0, dir.size() - 1);
    // As root the agents run jobs as uids of their own: they pass through the test's folder to
    // theirs, and write in out/.
    std::filesystem::create_directories(dir_.file("out"));
    ::chmod(dir_path_.c_str(), 0711);
    ::chmod(dir_.file("out").c_str(), 0777);
    write_text(dir_.file("cluster.yaml"), kCluster);
    write_text(dir_.file("tenants.yaml"), kTenants);
    write_text(dir_.file("market.yaml"),
               replace_all(kMarket, "@HOOK@", source_tree() + "/deploy/burst/local-provider.sh"));
    // The server passes its environment to the hook.
    ::setenv("TIDEPOOL_LOCAL_PROVIDER_DIR", dir_.file("provider").c_str(), 1);
    ::setenv("TIDEPOOL_BIN", tidepool_binary().c_str(), 1);
    write_text(dir_.file("server.yaml"),
               "cluster: " + dir_.file("cluster.yaml") + "\ntenants: " + dir_.file("tenants.yaml") +
                   "\nmarket: " + dir_.file("market.yaml") +
                   "\ndatabase: " + dir_.file("tidepool.db") +
                   "\nlisten: 127.0.0.1:0\nheartbeat_timeout: 3s\ntick: 1s\n"
                   "ledger_posting_interval: 1s\n"
                   // The pool's own nodes have no agents: the jobs that fill them run as if.
                   "simulate_unregistered_nodes: true\n");
    server_ = std::make_unique<ServerProcess>(dir_, dir_.file("server.yaml"));
  }
  // Starts the server (with the environment the test set) and the admin's client.
  void start() {
    ASSERT_TRUE(server_->start()) << server_->log();
    admin_ = std::make_unique<ApiClient>(server_->port(), server_->admin_token());
  }

  void TearDown() override {
    for (pid_t pid : agent_pids()) ::kill(pid, SIGKILL);
    server_->terminate();
  }

  // The agents the provider started and has not stopped.
  std::vector<pid_t> agent_pids() {
    std::vector<pid_t> out;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.file("provider"), ignored)) {
      if (entry.path().extension() != ".pid") continue;
      const std::string text = read_text(entry.path());
      if (!text.empty()) out.push_back(std::stoi(text));
    }
    return out;
  }

  // Submits a job of one 8-GPU task running `script` (sh -c); returns its id.
  std::int64_t submit(const std::string& name, const std::string& script) {
    const nlohmann::json spec = {{"name", name},
                                 {"tenant", "vision"},
                                 {"tasks", 1},
                                 {"gpus_per_task", 8},
                                 {"command", {"/bin/sh", "-c", script}},
                                 {"env", {{"OUT", dir_.file("out")}}}};
    auto reply = admin_->post("/v1/jobs", spec.dump());
    EXPECT_EQ(reply.status, 201) << reply.body.dump();
    return reply.body.value("id", std::int64_t{0});
  }
  nlohmann::json job(std::int64_t id) { return admin_->get("/v1/jobs/" + std::to_string(id)).body; }
  bool job_state_is(std::int64_t id, const std::string& state, std::chrono::milliseconds limit) {
    return eventually([&] { return job(id).value("state", "") == state; }, limit);
  }
  std::vector<std::string> event_kinds() {
    std::vector<std::string> kinds;
    const auto events = admin_->get("/v1/events?since=0&timeout=1s");
    for (const auto& e : events.body["events"]) {
      kinds.push_back(e.value("kind", ""));
    }
    return kinds;
  }
  std::string logs() {
    std::string out =
        "--- server\n" + server_->log() + "--- hook\n" + read_text(dir_.file("hook.log"));
    for (const auto& entry : std::filesystem::directory_iterator(dir_path_)) {
      const std::string name = entry.path().filename();
      if (name.starts_with("agent-") && name.ends_with(".log")) {
        out += "--- " + name + "\n" + read_text(entry.path());
      }
    }
    return out;
  }

  std::string calls() { return read_text(dir_.file("provider/calls.log")); }

  TempDir dir_;
  std::string dir_path_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<ApiClient> admin_;
};

TEST_F(BurstTest, WaitingJobRunsOnARentedNodeWhichIsGivenBackAfterwards) {
  start();
  // The pool's only node is taken (no agent: the job just holds it).
  const std::int64_t fill = submit("fill", "sleep 600");
  ASSERT_TRUE(job_state_is(fill, "running", 5s));
  const std::int64_t id =
      submit("burst", "echo \"$TIDEPOOL_JOB_ID $CUDA_VISIBLE_DEVICES\" > \"$OUT/ran\"; sleep 2");
  ASSERT_TRUE(job_state_is(id, "running", 30s)) << job(id).dump() << logs();
  const nlohmann::json running = job(id);
  const std::string node = running["placement"][0]["node"];
  const std::string pid_text = read_text(dir_.file("provider/agent-" + node + ".pid"));
  ASSERT_FALSE(pid_text.empty()) << logs();
  const pid_t agent = std::stoi(pid_text);
  EXPECT_TRUE(node.starts_with("local-h100-" + std::to_string(id) + "-")) << node;
  bool listed = false;
  const auto nodes = admin_->get("/v1/nodes");
  for (const auto& n : nodes.body["nodes"]) {
    listed = listed || (n.value("name", "") == node && n.value("burst", false));
  }
  EXPECT_TRUE(listed) << nodes.body.dump();
  ASSERT_TRUE(job_state_is(id, "succeeded", 30s)) << job(id).dump() << logs();
  EXPECT_EQ(read_text(dir_.file("out/ran")), std::to_string(id) + " 0,1,2,3,4,5,6,7\n");
  // Given back: `down` was called with the node, and its agent is gone.
  ASSERT_TRUE(eventually([&] { return calls().find("down {") != std::string::npos; }, 10s))
      << logs();
  EXPECT_NE(calls().find("\"node\":\"" + node + "\""), std::string::npos);
  EXPECT_TRUE(eventually([&] { return !alive(agent); }, 10s)) << logs();
  // Charged at the offer's price from the request to the release.
  auto bill = admin_->get("/v1/bill?tenant=vision&from=2000-01-01&to=2100-01-01&by=job");
  ASSERT_EQ(bill.status, 200) << bill.body.dump();
  double charged = 0;
  for (const auto& g : bill.body["groups"]) {
    if (g["group"].get<std::string>().starts_with(std::to_string(id) + " ")) {
      charged = g["charges"].get<double>();
    }
  }
  // 8 GPUs at 4 an hour for at least the 2 s it ran: at least 0.017, and well under a minute's.
  EXPECT_GT(charged, 8 * 4 * 2 / 3600.0 * 0.99) << bill.body.dump();
  EXPECT_LT(charged, 8 * 4 * 60 / 3600.0) << bill.body.dump();
  const auto kinds = event_kinds();
  EXPECT_NE(std::ranges::find(kinds, "burst.requested"), kinds.end());
  EXPECT_NE(std::ranges::find(kinds, "burst.released"), kinds.end());
  httplib::Client metrics("127.0.0.1", server_->port());
  auto scraped = metrics.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_NE(scraped->body.find("tidepool_burst_rentals_total 1"), std::string::npos);
}

TEST_F(BurstTest, FailingHookSendsTheJobBackToThePoolWithTheHooksWords) {
  ::setenv("TIDEPOOL_LOCAL_PROVIDER_FAIL", "no capacity in zone test-1a", 1);
  start();
  const std::int64_t fill = submit("fill", "sleep 600");
  ASSERT_TRUE(job_state_is(fill, "running", 5s));
  const std::int64_t id = submit("burst", "true");
  ASSERT_TRUE(eventually(
      [&] {
        const auto kinds = event_kinds();
        return std::ranges::find(kinds, "burst.hook_failed") != kinds.end();
      },
      30s))
      << logs();
  const nlohmann::json view = job(id);
  EXPECT_EQ(view["state"], "pending");
  EXPECT_NE(view["pending"]["kind"], "burst");
  EXPECT_NE(view["message"].get<std::string>().find("no capacity in zone test-1a"),
            std::string::npos)
      << view.dump();
  EXPECT_NE(view["message"].get<std::string>().find("exited with status 3"), std::string::npos);
}

}  // namespace
}  // namespace tidepool::test_support
