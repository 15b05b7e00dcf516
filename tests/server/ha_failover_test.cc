// A highly available control plane end to end: an etcd cluster started by the test, several
// `tidepool server` processes on it (store kind etcd), and clients that submit through the
// leader-following CLI (`tidepool submit --server A,B,C --idempotency-key K`). The leader is
// killed (SIGKILL) again and again (one etcd member stopped halfway), and paused (SIGSTOP) past its
// lease; what must hold: every acknowledged job is there exactly once, running jobs are not
// restarted by a failover, no GPU is given to two jobs, and a deposed leader writes nothing. With
// real agents (fake GPUs, real tasks): their tasks run on through a failover, and the agents follow
// the new leader without restarting anything.
//
// TIDEPOOL_FAILOVER_KILLS (default 3) and TIDEPOOL_FAILOVER_CLIENTS (default 4) scale the kill
// test; bench/failover.sh runs it with 20 kills and 8 clients and reports the failover times.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/test_processes.h"
#include "agent_process.h"
#include "server_process.h"
#include "store/etcd_test_cluster.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

// Servers on one etcd store, each on a port of its own that it keeps across restarts.
class HaPool {
 public:
  // `pool`: the configuration's cluster, tenants and other lines; by default the example's, whose
  // nodes take jobs without agents.
  HaPool(int etcd_members, int servers, const std::string& pool = "") {
    auto started = EtcdTestCluster::start(etcd_members);
    if (!started) throw std::runtime_error(started.error().message());
    etcd_ = std::move(*started);
    std::string endpoints;
    for (const std::string& e : etcd_->endpoints())
      endpoints += (endpoints.empty() ? "" : ", ") + e;
    // Ports the servers keep across restarts.
    auto ports = free_ports(static_cast<std::size_t>(servers));
    if (!ports) throw std::runtime_error(ports.error().message());
    for (int i = 0; i < servers; ++i) {
      Server s;
      s.port = (*ports)[static_cast<std::size_t>(i)];
      s.config = dir_.file("server-" + std::to_string(i) + ".yaml");
      s.log = dir_.file("server-" + std::to_string(i) + ".log");
      const std::string lines =
          !pool.empty() ? pool
                        : "cluster: " + source_tree() + "/data/clusters/example.yaml\n" +
                              "tenants: " + source_tree() + "/data/tenants/example.yaml\n" +
                              "simulate_unregistered_nodes: true\n";
      write_text(s.config, lines + "listen: 127.0.0.1:" + std::to_string(s.port) + "\n" +
                               "admin_token_file: " + dir_.file("admin.token") + "\n" +
                               "logs: " + dir_.file("logs-" + std::to_string(i)) + "\n" +
                               // The clients submit as fast as they can, past the default limits.
                               "admission: {max_pending_jobs: 10000000, "
                               "submissions_per_second: 0}\n" +
                               "store: {kind: etcd, endpoints: [" + endpoints +
                               "], prefix: /ha, lease_ttl: 3s}\n");
      servers_.push_back(std::move(s));
    }
  }
  ~HaPool() {
    for (Server& s : servers_) {
      if (s.pid > 0) ::kill(s.pid, SIGCONT);
      signal_and_reap(s.pid, SIGKILL);
    }
  }
  HaPool(const HaPool&) = delete;
  HaPool& operator=(const HaPool&) = delete;

  void start(std::size_t i) {
    servers_[i].pid = spawn_logged({tidepool_binary(), "server", "--config", servers_[i].config},
                                   servers_[i].log);
  }
  void start_all() {
    for (std::size_t i = 0; i < servers_.size(); ++i) start(i);
  }
  // SIGKILL; the time it was sent.
  Clock::time_point kill(std::size_t i) {
    const auto at = Clock::now();
    signal_and_reap(servers_[i].pid, SIGKILL);
    return at;
  }
  [[nodiscard]] pid_t pid(std::size_t i) const { return servers_[i].pid; }
  [[nodiscard]] EtcdTestCluster& etcd() { return *etcd_; }
  // Whether server i has exited; its exit status then.
  std::optional<int> exited(std::size_t i) {
    int status = 0;
    if (servers_[i].pid <= 0 || ::waitpid(servers_[i].pid, &status, WNOHANG) != servers_[i].pid) {
      return std::nullopt;
    }
    servers_[i].pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The server that leads and is ready, waited for up to `limit`.
  std::optional<std::size_t> leader(std::chrono::milliseconds limit = 30s) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        if (servers_[i].pid <= 0) continue;
        httplib::Client client("127.0.0.1", servers_[i].port);
        client.set_connection_timeout(0, 300'000);
        client.set_read_timeout(0, 300'000);  // a paused server accepts but never answers
        auto res = client.Get("/readyz");
        if (res && res->status == 200) return i;
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }

  [[nodiscard]] std::string urls() const {
    std::string out;
    for (const Server& s : servers_) {
      out += (out.empty() ? "" : ",") + std::string("http://127.0.0.1:") + std::to_string(s.port);
    }
    return out;
  }
  [[nodiscard]] int port(std::size_t i) const { return servers_[i].port; }
  [[nodiscard]] std::string log(std::size_t i) const { return read_text(servers_[i].log); }
  // The last lines of every server's log, for a failure's message.
  [[nodiscard]] std::string log_tails() const {
    std::string out;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      const std::string text = log(i);
      out += "--- server " + std::to_string(i) + " (port " + std::to_string(servers_[i].port) +
             ")\n" + text.substr(text.size() > 3000 ? text.size() - 3000 : 0);
    }
    return out;
  }
  std::string admin_token(std::chrono::milliseconds limit = 20s) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      std::string text = read_text(dir_.file("admin.token"));
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      if (!text.empty()) return text;
      std::this_thread::sleep_for(50ms);
    }
    return "";
  }
  [[nodiscard]] const TempDir& dir() const { return dir_; }
  // The admin's API on the leader of the moment.
  ApiClient leader_api(const std::string& token) {
    const auto leader = this->leader();
    return ApiClient(leader ? servers_[*leader].port : 1, token);
  }

 private:
  struct Server {
    int port = 0;
    std::string config;
    std::string log;
    pid_t pid = -1;
  };
  TempDir dir_;
  std::unique_ptr<EtcdTestCluster> etcd_;
  std::vector<Server> servers_;
};

// Every job the leader holds, by id (page after page of GET /v1/jobs); none when a page was not
// answered (the server stopped leading in between).
std::optional<std::map<std::int64_t, nlohmann::json>> all_jobs(int port, const std::string& token) {
  ApiClient api(port, token);
  std::map<std::int64_t, nlohmann::json> jobs;
  std::string path = "/v1/jobs?limit=1000";
  for (int page = 0; page < 1000; ++page) {
    const ApiClient::Answer answer = api.get(path);
    if (answer.status != 200) return std::nullopt;
    for (const nlohmann::json& job : answer.body["jobs"]) jobs[job["id"].get<std::int64_t>()] = job;
    if (!answer.body.contains("next") || !answer.body["next"].is_string()) return jobs;
    path = "/v1/jobs?limit=1000&before=" + answer.body["next"].get<std::string>();
  }
  return std::nullopt;
}

// The whole state as the leader of the moment holds it, asked again if the leader changes while it
// is read.
std::map<std::int64_t, nlohmann::json> jobs_of_the_leader(HaPool& pool, const std::string& token) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    const auto leader = pool.leader();
    if (!leader) break;
    if (auto jobs = all_jobs(pool.port(*leader), token)) return std::move(*jobs);
  }
  ADD_FAILURE() << "no leader answered the whole listing";
  return {};
}

// One `tidepool submit` of a one-GPU job named `key` with idempotency key `key`: its job id when
// the server acknowledged it.
std::optional<std::int64_t> submit(const HaPool& pool, const std::string& token,
                                   const std::string& key) {
  const std::string spec = pool.dir().file(key + ".json");
  write_text(spec, R"({"name": ")" + key +
                       R"(", "tenant": "vision", "tasks": 1, "gpus_per_task": 1,)"
                       R"( "command": ["sleep", "3600"]})");
  const std::string command = tidepool_binary() + " submit --parsable --server " + pool.urls() +
                              " --token " + token + " --idempotency-key " + key + " " + spec +
                              " 2>/dev/null";
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return std::nullopt;
  char line[64] = {};
  const bool read = std::fgets(line, sizeof line, out) != nullptr;
  const int status = ::pclose(out);
  if (!read || status != 0) return std::nullopt;
  return std::atoll(line);
}

struct Acknowledged {
  std::string key;
  std::int64_t id = 0;
  Clock::time_point at;
};

// Clients that submit one job after another until stopped, each retrying a key (the same
// submission) until it is acknowledged, as a careful user does.
class Clients {
 public:
  Clients(const HaPool& pool, std::string token, int count) {
    for (int c = 0; c < count; ++c) {
      threads_.emplace_back([this, &pool, token, c] {
        for (int n = 0; !stop_; ++n) {
          const std::string key = "c" + std::to_string(c) + "-" + std::to_string(n);
          while (!stop_) {
            if (auto id = submit(pool, token, key)) {
              std::lock_guard lock(mutex_);
              acknowledged_.push_back({key, *id, Clock::now()});
              break;
            }
          }
        }
      });
    }
  }
  ~Clients() { stop(); }
  Clients(const Clients&) = delete;
  Clients& operator=(const Clients&) = delete;

  void stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::vector<Acknowledged> acknowledged() {
    std::lock_guard lock(mutex_);
    return acknowledged_;
  }
  // The first acknowledgement after `at`, waited for up to `limit`.
  std::optional<Clock::time_point> first_after(Clock::time_point at,
                                               std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      {
        std::lock_guard lock(mutex_);
        for (const Acknowledged& a : acknowledged_) {
          if (a.at > at) return a.at;
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // guards acknowledged_ (every client thread appends)
  std::vector<Acknowledged> acknowledged_;
  std::vector<std::thread> threads_;
};

TEST(HaFailoverTest, KillingTheLeaderLosesNoAcknowledgedJobAndRestartsNoRunningOne) {
  const int kills = env_int("TIDEPOOL_FAILOVER_KILLS", 3);
  HaPool pool(3, 3);
  pool.start_all();
  auto first = pool.leader();
  ASSERT_TRUE(first.has_value()) << pool.log(0) << pool.log(1) << pool.log(2);
  const std::string token = pool.admin_token();
  ASSERT_FALSE(token.empty());

  Clients clients(pool, token, env_int("TIDEPOOL_FAILOVER_CLIENTS", 4));
  std::vector<double> failover_seconds;
  // The running jobs seen before each kill: their starts and placement must not change.
  std::map<std::int64_t, nlohmann::json> running_before;
  for (int k = 0; k < kills; ++k) {
    // Halfway, one etcd member goes (the first endpoint, which every server uses first): the
    // other two keep a quorum, and the servers move to them.
    if (k == kills / 2) {
      ASSERT_TRUE(pool.etcd().stop_member(0).has_value());
      std::printf("etcd member 0 stopped before kill %d\n", k);
    }
    std::this_thread::sleep_for(1500ms);
    auto leader = pool.leader();
    ASSERT_TRUE(leader.has_value()) << "kill " << k;
    for (const auto& [id, job] : jobs_of_the_leader(pool, token)) {
      if (job["state"] == "running" && !running_before.contains(id)) running_before[id] = job;
    }
    const auto killed_at = pool.kill(*leader);
    auto resumed = clients.first_after(killed_at, 30s);
    ASSERT_TRUE(resumed.has_value()) << "no submission was accepted after kill " << k << "\n"
                                     << pool.log_tails();
    failover_seconds.push_back(std::chrono::duration<double>(*resumed - killed_at).count());
    pool.start(*leader);  // back as a standby
  }
  clients.stop();

  std::ranges::sort(failover_seconds);
  const double median = failover_seconds[failover_seconds.size() / 2];
  const double worst = failover_seconds.back();
  std::printf("failover: %zu kills, median %.2f s, max %.2f s\n", failover_seconds.size(), median,
              worst);
  EXPECT_LT(worst, 30.0);

  auto leader = pool.leader();
  ASSERT_TRUE(leader.has_value());
  // Each kill made a new leader (and a leader that could not renew its lease in time, around the
  // etcd member's stop, may have stepped down on its own).
  httplib::Client raw("127.0.0.1", pool.port(*leader));
  auto scraped = raw.Get("/metrics");
  ASSERT_TRUE(scraped && scraped->status == 200);
  EXPECT_NE(scraped->body.find("\ntidepool_leader 1\n"), std::string::npos);
  const std::string counter = "\ntidepool_failovers_total ";
  const auto at = scraped->body.find(counter);
  ASSERT_NE(at, std::string::npos) << scraped->body.substr(0, 2000);
  EXPECT_GE(std::atof(scraped->body.c_str() + at + counter.size()), kills);
  const auto jobs = jobs_of_the_leader(pool, token);
  std::map<std::string, std::vector<std::int64_t>> by_name;
  for (const auto& [id, job] : jobs) by_name[job["spec"]["name"].get<std::string>()].push_back(id);
  const std::vector<Acknowledged> acknowledged = clients.acknowledged();
  ASSERT_FALSE(acknowledged.empty());
  int lost = 0;
  for (const Acknowledged& a : acknowledged) {
    const auto it = by_name.find(a.key);
    if (it == by_name.end() || std::ranges::find(it->second, a.id) == it->second.end()) ++lost;
  }
  int duplicated = 0;
  for (const auto& [name, ids] : by_name) duplicated += static_cast<int>(ids.size()) - 1;
  int restarted = 0;
  for (const auto& [id, before] : running_before) {
    const auto it = jobs.find(id);
    if (it == jobs.end() || it->second["state"] != "running") continue;  // ended since: fine
    if (it->second["starts"] != before["starts"] ||
        it->second["placement"] != before["placement"]) {
      ++restarted;
    }
  }
  std::set<std::pair<std::string, int>> gpus;
  int double_booked = 0;
  for (const auto& [id, job] : jobs) {
    if (job["state"] != "running") continue;
    for (const nlohmann::json& place : job["placement"]) {
      for (const nlohmann::json& gpu : place["gpus"]) {
        if (!gpus.emplace(place["node"].get<std::string>(), gpu.get<int>()).second) ++double_booked;
      }
    }
  }
  std::printf(
      "acknowledged %zu, jobs %zu, lost %d, duplicated %d, restarted %d of %zu running, "
      "double-booked GPUs %d\n",
      acknowledged.size(), jobs.size(), lost, duplicated, restarted, running_before.size(),
      double_booked);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(restarted, 0);
  EXPECT_EQ(double_booked, 0);
}

TEST(HaFailoverTest, APausedLeaderWritesNothingAfterItsLeaseEnded) {
  HaPool pool(1, 2);
  pool.start(0);
  ASSERT_EQ(pool.leader(), std::optional<std::size_t>{0}) << pool.log(0);
  pool.start(1);
  const std::string token = pool.admin_token();
  ASSERT_FALSE(token.empty());

  ::kill(pool.pid(0), SIGSTOP);
  // The signal takes effect a moment later: a last answer of the paused leader is not its end.
  std::optional<std::size_t> successor;
  for (const auto deadline = Clock::now() + 30s; successor != 1U && Clock::now() < deadline;) {
    successor = pool.leader(5s);
  }
  ASSERT_EQ(successor, std::optional<std::size_t>{1}) << pool.log(1);
  // Submissions sent to the paused leader wait in its socket's queue; it meets them when it wakes.
  constexpr int kLate = 5;
  std::vector<std::thread> late;
  std::atomic<int> accepted{0};
  for (int i = 0; i < kLate; ++i) {
    late.emplace_back([&, i] {
      ApiClient paused(pool.port(0), token);
      const std::string name = "late-" + std::to_string(i);
      const auto answer = paused.post(
          "/v1/jobs",
          R"({"name": ")" + name +
              R"(", "tenant": "vision", "tasks": 1, "gpus_per_task": 1, "command": ["true"]})",
          "application/json", name);
      if (answer.status >= 200 && answer.status < 300) ++accepted;
    });
  }
  std::this_thread::sleep_for(300ms);
  ::kill(pool.pid(0), SIGCONT);
  for (std::thread& t : late) t.join();
  // It learns it lost the leadership and stops.
  std::optional<int> status;
  for (const auto deadline = Clock::now() + 20s; !status && Clock::now() < deadline;) {
    status = pool.exited(0);
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(status.has_value()) << "the deposed leader did not stop\n" << pool.log(0);
  EXPECT_NE(*status, 0);
  const std::string log = pool.log(0);
  EXPECT_NE(log.find("leadership"), std::string::npos) << log;
  std::size_t refused = 0;
  for (std::size_t at = log.find("leadership lost: the guard key"); at != std::string::npos;
       at = log.find("leadership lost: the guard key", at + 1)) {
    ++refused;
  }
  std::printf("paused leader: %d of %d late submissions accepted, %zu commits refused\n",
              accepted.load(), kLate, refused);
  EXPECT_EQ(accepted, 0);
  // None of them is in the state the successor holds.
  const auto successor_jobs = all_jobs(pool.port(1), token);
  ASSERT_TRUE(successor_jobs.has_value());
  for (const auto& [id, job] : *successor_jobs) {
    EXPECT_FALSE(job["spec"]["name"].get<std::string>().starts_with("late-")) << job.dump();
  }
}

// Two nodes, each with its agent, one 8-GPU job running on each: the leader is killed; the tasks
// run on (the same processes), the agents follow the new leader, which cancels one job (its task
// ends) and places a new one on the freed node, where it runs.
constexpr const char* kAgentsTenants = R"(orgs:
  - name: org
    tenants:
      - name: team
        quota:
          H100: {guaranteed_gpus: 16}
)";

TEST(HaFailoverTest, AgentsKeepTheirTasksRunningAndFollowTheNewLeader) {
  TempDir files;
  write_text(files.file("cluster.yaml"), kTwoAgentNodes);
  write_text(files.file("tenants.yaml"), kAgentsTenants);
  HaPool pool(3, 2,
              "cluster: " + files.file("cluster.yaml") + "\ntenants: " +
                  files.file("tenants.yaml") + "\nheartbeat_timeout: 5s\ntick: 1s\n");
  // The agents run as root, their tasks as uids of their own: the tasks write their pids in out/.
  const std::string out = pool.dir().file("out");
  std::filesystem::create_directories(out);
  ::chmod(pool.dir().file("").c_str(), 0711);
  ::chmod(out.c_str(), 0777);
  const std::string marker = "TIDEPOOL_TEST_MARKER=" + pool.dir().file("");
  pool.start_all();
  auto first = pool.leader();
  ASSERT_TRUE(first.has_value()) << pool.log_tails();
  const std::string token = pool.admin_token();
  ASSERT_FALSE(token.empty());

  std::map<std::string, std::unique_ptr<AgentProcess>> agents;
  for (const std::string node : {"node-1", "node-2"}) {
    auto created =
        pool.leader_api(token).post("/v1/tokens", R"({"role": "agent", "node": ")" + node + "\"}");
    ASSERT_EQ(created.status, 201) << created.body.dump();
    agents[node] = std::make_unique<AgentProcess>(pool.dir(), node, pool.urls(),
                                                  created.body["secret"].get<std::string>());
    agents[node]->start();
  }
  const auto agent_logs = [&] {
    std::string text;
    for (const auto& [node, agent] : agents) text += "--- agent " + node + "\n" + agent->log();
    return text + pool.log_tails();
  };
  // Every node ready on the leader of the moment.
  const auto nodes_ready = [&] {
    int ready = 0;
    const ApiClient::Answer nodes = pool.leader_api(token).get("/v1/nodes");
    for (const auto& n : nodes.body["nodes"]) {
      if (n.value("registered_ms", std::int64_t{0}) > 0 && n["state"] == "ready") ++ready;
    }
    return ready == 2;
  };
  ASSERT_TRUE(eventually(nodes_ready, 20s)) << agent_logs();

  const auto submit_job = [&](const std::string& name) {
    const std::string spec =
        R"({"name": ")" + name + R"(", "tenant": "team", "tasks": 1, "gpus_per_task": 8,)" +
        R"( "command": ["sh", "-c", "echo $$ >> $OUT/pid-$TIDEPOOL_JOB_ID; exec sleep 600"],)" +
        R"( "env": {"OUT": ")" + out + R"(", "HA_TASK": ")" + name + "." + pool.dir().file("") +
        R"(", "TIDEPOOL_TEST_MARKER": ")" + pool.dir().file("") + R"("}})";
    auto reply = pool.leader_api(token).post("/v1/jobs", spec, "application/json", name);
    EXPECT_EQ(reply.status, 201) << reply.body.dump();
    return reply.body.value("id", std::int64_t{0});
  };
  const auto job = [&](std::int64_t id) {
    return pool.leader_api(token).get("/v1/jobs/" + std::to_string(id)).body;
  };
  // The task of job `name`, as this test's PID namespace sees it (the task's own $$ is of its
  // namespace).
  const auto task = [&](const std::string& name) {
    return processes_with("HA_TASK=" + name + "." + pool.dir().file(""));
  };
  // The pids a job's task wrote, one per start.
  const auto pids = [&](std::int64_t id) {
    std::vector<pid_t> found;
    std::istringstream lines(read_text(out + "/pid-" + std::to_string(id)));
    for (std::string line; std::getline(lines, line);) found.push_back(std::atoi(line.c_str()));
    return found;
  };
  const std::int64_t kept = submit_job("kept");
  const std::int64_t cancelled = submit_job("cancelled");
  ASSERT_TRUE(
      eventually([&] { return pids(kept).size() == 1 && pids(cancelled).size() == 1; }, 20s))
      << agent_logs();
  const nlohmann::json kept_before = job(kept);
  ASSERT_EQ(kept_before["state"], "running") << kept_before.dump();
  const std::set<pid_t> kept_task = task("kept");
  ASSERT_EQ(kept_task.size(), 1U);

  const auto killed_at = pool.kill(*first);
  auto second = pool.leader();
  ASSERT_TRUE(second.has_value()) << pool.log_tails();
  EXPECT_NE(*second, *first);
  pool.start(*first);  // back as a standby
  std::printf("new leader ready %.2f s after the kill\n",
              std::chrono::duration<double>(Clock::now() - killed_at).count());
  ASSERT_TRUE(eventually(nodes_ready, 20s)) << agent_logs();

  // The new leader stops one job: the agent of its node, now following it, ends the task.
  ASSERT_EQ(task("cancelled").size(), 1U);
  auto cancel = pool.leader_api(token).del("/v1/jobs/" + std::to_string(cancelled));
  ASSERT_EQ(cancel.status, 200) << cancel.body.dump();
  EXPECT_TRUE(eventually([&] { return task("cancelled").empty(); }, 20s))
      << "the cancelled job's task still runs\n"
      << agent_logs();
  // ... and places a new one on the freed node, whose agent starts it.
  const std::int64_t placed = submit_job("placed");
  EXPECT_TRUE(eventually([&] { return pids(placed).size() == 1; }, 20s)) << agent_logs();

  // The other job ran on through it all: the same process, started once, in the same place.
  const nlohmann::json kept_after = job(kept);
  EXPECT_EQ(kept_after["state"], "running") << kept_after.dump();
  EXPECT_EQ(kept_after["starts"], kept_before["starts"]);
  EXPECT_EQ(kept_after["placement"], kept_before["placement"]);
  EXPECT_EQ(pids(kept).size(), 1U);
  EXPECT_EQ(task("kept"), kept_task) << "the kept job's task is not the one that ran before";

  for (auto& [node, agent] : agents) agent->terminate();
  for (pid_t pid : processes_with(marker)) ::kill(pid, SIGKILL);
}

}  // namespace
}  // namespace tidepool::test_support
