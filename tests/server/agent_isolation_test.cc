// Jobs on one node do not touch each other: the real `tidepool agent` (root, fake GPUs) against a
// fake control plane on 127.0.0.1 that hands it exactly the assignments a test wants, and records
// what the agent reports. Two jobs of two tenants share the node; the second is an attacker that
// tries, one by one, what a job must not be able to do to its neighbour. Other tests: processes
// that leave their group (setsid, double fork) end with their task, no zombie stays, checkpoint
// reports outside the job's folder are dropped, one bad assignment fails only its job, a non-root
// agent runs one tenant at a time, and a token file others may read is refused.
//
// Needs root (the agent switches uids and makes namespaces); skips otherwise, saying so.
#include <dirent.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "agent/test_processes.h"
#include "server_process.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// The server side of the agent's protocol, as little of it as the agent needs.
class FakeControlPlane {
 public:
  FakeControlPlane() {
    const auto reply = [](httplib::Response& res, const Json& body) {
      res.set_content(body.dump(), "application/json");
    };
    server_.Post(
        R"(/v1/nodes/([^/]+)/register)",
        [=](const httplib::Request&, httplib::Response& res) { reply(res, Json::object()); });
    server_.Post(R"(/v1/nodes/([^/]+)/heartbeat)",
                 [=, this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard lock(mutex_);
                   ++heartbeats_;
                   const Json beat = Json::parse(req.body, nullptr, false);
                   if (beat.is_object() && beat.contains("steps")) {
                     for (const Json& steps : beat["steps"]) {
                       steps_[steps.value("job", std::int64_t{0})].push_back(steps["stats"]);
                     }
                   }
                   reply(res, {{"assignments", assignments_}});
                 });
    server_.Post(
        R"(/v1/jobs/(\d+)/status)", [=, this](const httplib::Request& req, httplib::Response& res) {
          std::lock_guard lock(mutex_);
          statuses_[std::stoll(req.matches[1])].push_back(Json::parse(req.body, nullptr, false));
          reply(res, Json::object());
        });
    server_.Post(R"(/v1/jobs/(\d+)/checkpoint)", [=, this](const httplib::Request& req,
                                                           httplib::Response& res) {
      std::lock_guard lock(mutex_);
      checkpoints_[std::stoll(req.matches[1])].push_back(Json::parse(req.body, nullptr, false));
      reply(res, Json::object());
    });
    server_.Post(R"(/v1/jobs/(\d+)/logs)", [=](const httplib::Request&, httplib::Response& res) {
      reply(res, Json::object());
    });
    server_.Get(R"(/v1/jobs/(\d+))", [=](const httplib::Request&, httplib::Response& res) {
      reply(res, {{"state", "running"}});
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeControlPlane() {
    server_.stop();
    thread_.join();
  }
  FakeControlPlane(const FakeControlPlane&) = delete;
  FakeControlPlane& operator=(const FakeControlPlane&) = delete;

  [[nodiscard]] int port() const { return port_; }
  void assign(Json assignments) {
    std::lock_guard lock(mutex_);
    assignments_ = std::move(assignments);
  }
  [[nodiscard]] std::vector<Json> statuses(std::int64_t job) {
    std::lock_guard lock(mutex_);
    return statuses_[job];
  }
  [[nodiscard]] std::vector<Json> checkpoints(std::int64_t job) {
    std::lock_guard lock(mutex_);
    return checkpoints_[job];
  }
  [[nodiscard]] int heartbeats() {
    std::lock_guard lock(mutex_);
    return heartbeats_;
  }
  // The step figures the heartbeats carried for `job`, in order.
  [[nodiscard]] std::vector<Json> steps(std::int64_t job) {
    std::lock_guard lock(mutex_);
    return steps_[job];
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  Json assignments_ = Json::array();
  std::map<std::int64_t, std::vector<Json>> statuses_;
  std::map<std::int64_t, std::vector<Json>> checkpoints_;
  std::map<std::int64_t, std::vector<Json>> steps_;
  int heartbeats_ = 0;
};

// One task on GPU `gpu` running `script` with sh, with the test's marker in its environment.
Json assignment(std::int64_t job, const std::string& tenant, int gpu, const std::string& script,
                Json env = Json::object()) {
  return {{"job", job},
          {"run", 1},
          {"name", "j" + std::to_string(job)},
          {"tenant", tenant},
          {"world_size", 1},
          {"tasks", {{{"index", 0}, {"gpus", {gpu}}}}},
          {"master_addr", "127.0.0.1"},
          {"master_port", 29500},
          {"command", {"/bin/sh", "-c", script}},
          {"env", std::move(env)},
          {"checkpoints", false}};
}

std::string status_of(pid_t pid) { return read_text("/proc/" + std::to_string(pid) + "/status"); }

// The zombies whose parent is `parent`.
std::set<pid_t> zombies_of(pid_t parent) {
  std::set<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const std::string ppid = "\nPPid:\t" + std::to_string(parent) + "\n";
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string status = status_of(pid);
    if (status.find("\nState:\tZ") != std::string::npos && status.find(ppid) != std::string::npos) {
      out.insert(pid);
    }
  }
  ::closedir(proc);
  return out;
}

// "name=value" lines of a task's log.
std::map<std::string, std::string> results_in(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

class AgentIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "needs root: the agent switches uids and makes namespaces";
    // Tasks run as other uids: they pass through the test's folder to theirs, as they would
    // through /var/lib.
    ::chmod(dir_.file("").c_str(), 0711);
    marker_ = dir_.file("");
    token_file_ = dir_.file("agent.token");
    write_text(token_file_, "node-secret-token\n");
    ::chmod(token_file_.c_str(), 0600);
  }
  void TearDown() override {
    if (agent_pid_ > 0) signal_and_reap(agent_pid_, SIGTERM);
    for (pid_t pid : processes_with("TIDEPOOL_TEST_MARKER=" + marker_)) ::kill(pid, SIGKILL);
  }

  // Starts the agent; `as_uid` >= 0 runs it as that user (not root), in the cgroup whose
  // cgroup.procs is `join_cgroup` when given.
  void start_agent(std::vector<std::string> extra = {}, int as_uid = -1,
                   const std::string& join_cgroup = "") {
    agent_log_ = dir_.file("agent.log");
    std::vector<std::string> args = {tidepool_binary(),
                                     "agent",
                                     "--server",
                                     "http://127.0.0.1:" + std::to_string(server_.port()),
                                     "--token-file",
                                     token_file_,
                                     "--node",
                                     "node-1",
                                     "--gpus",
                                     "fake:4xH100",
                                     "--state-dir",
                                     state_dir(),
                                     "--checkpoint-root",
                                     dir_.file("checkpoints"),
                                     "--heartbeat-interval",
                                     "100ms",
                                     "--notice-timeout",
                                     "1s",
                                     "--grace-period",
                                     "1s",
                                     "--task-uids",
                                     "61900-61909"};
    args.insert(args.end(), extra.begin(), extra.end());
    if (as_uid < 0) {
      agent_pid_ = spawn_logged(std::move(args), agent_log_);
      return;
    }
    std::filesystem::create_directories(state_dir());
    std::filesystem::create_directories(dir_.file("checkpoints"));
    for (const std::string& path : {state_dir(), dir_.file("checkpoints"), token_file_}) {
      ::chown(path.c_str(), static_cast<uid_t>(as_uid), static_cast<gid_t>(as_uid));
    }
    agent_pid_ = ::fork();
    if (agent_pid_ == 0) {
      const int log = ::open(agent_log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(log, 1);
      ::dup2(log, 2);
      if (!join_cgroup.empty()) {
        const int procs = ::open(join_cgroup.c_str(), O_WRONLY);
        if (procs < 0 || ::write(procs, "0", 1) != 1) ::_exit(125);
        ::close(procs);
      }
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(as_uid)) != 0 ||
          ::setuid(static_cast<uid_t>(as_uid)) != 0) {
        ::_exit(126);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  [[nodiscard]] std::string agent_log() const { return read_text(agent_log_); }
  [[nodiscard]] std::string state_dir() const { return dir_.file("state"); }
  [[nodiscard]] std::string log_of(std::int64_t job) const {
    return read_text(state_dir() + "/logs/" + std::to_string(job) + "/task-0.run-1.log");
  }
  [[nodiscard]] Json env() const { return {{"TIDEPOOL_TEST_MARKER", marker_}}; }
  [[nodiscard]] bool agent_says(const std::string& text, std::chrono::milliseconds limit = 10s) {
    return eventually([&] { return agent_log().find(text) != std::string::npos; }, limit);
  }
  // The final status the agent reported for `job`, or null.
  Json final_status(std::int64_t job) {
    for (const Json& s : server_.statuses(job)) {
      if (s.value("state", "") != "running") return s;
    }
    return nullptr;
  }

  TempDir dir_;
  FakeControlPlane server_;
  std::string marker_;
  std::string token_file_;
  std::string agent_log_;
  pid_t agent_pid_ = -1;
};

// Job B (tenant vision) tries everything against job A (tenant search) beside it; each attempt
// is checked on its own. As the agent was (root, no namespaces, 0755 folders) each succeeded.
TEST_F(AgentIsolationTest, AJobCannotReachItsNeighbour) {
  start_agent({"--cgroups", "auto"});
  const std::string victim =
      "echo victim-output; echo state > \"$TIDEPOOL_CHECKPOINT_DIR/a.ckpt\"; "
      "echo '{\"step\": 1, \"path\": \"'\"$TIDEPOOL_CHECKPOINT_DIR/a.ckpt\"'\"}' >> "
      "\"$TIDEPOOL_CHECKPOINT_REPORT\"; exec sleep 600";
  server_.assign({assignment(101, "search", 0, victim, env())});
  ASSERT_TRUE(eventually([&] { return server_.checkpoints(101).size() == 1; }, 10s)) << agent_log();
  const std::set<pid_t> victim_pids = processes_with("TIDEPOOL_TEST_MARKER=" + marker_);
  ASSERT_FALSE(victim_pids.empty());
  std::string pids;
  for (pid_t pid : victim_pids) pids += std::to_string(pid) + " ";
  const std::string a_run = state_dir() + "/runs/101/run-1/task-0";
  const std::string a_ckpt = dir_.file("checkpoints/101");
  Json attacker_env = env();
  attacker_env["A_LOG"] = state_dir() + "/logs/101/task-0.run-1.log";
  attacker_env["A_RUN"] = a_run;
  attacker_env["A_CKPT"] = a_ckpt;
  attacker_env["TOKEN"] = token_file_;
  attacker_env["TASKS_JSON"] = state_dir() + "/tasks.json";
  attacker_env["A_PIDS"] = pids;
  const std::string attacker = R"SH(
attempt() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ok"; else echo "$name=denied"; fi; }
attempt read_log cat "$A_LOG"
attempt append_log sh -c 'echo evil >> "$A_LOG"'
attempt list_run_dir ls "$A_RUN"
attempt read_report cat "$A_RUN/checkpoints.jsonl"
attempt append_report sh -c 'echo "{\"step\": 9, \"path\": \"/evil\"}" >> "$A_RUN/checkpoints.jsonl"'
attempt list_checkpoints ls "$A_CKPT"
attempt read_checkpoint cat "$A_CKPT/a.ckpt"
attempt write_checkpoint sh -c 'echo evil > "$A_CKPT/evil"'
attempt append_checkpoint sh -c 'echo evil >> "$A_CKPT/a.ckpt"'
attempt read_token cat "$TOKEN"
attempt read_tasks_json cat "$TASKS_JSON"
attempt list_state_dir ls "$(dirname "$TASKS_JSON")"
signalled=denied
for p in $A_PIDS; do if kill -0 "$p" 2>/dev/null; then signalled=ok; fi; done
echo "signal_victim=$signalled"
seen=denied
procs=" $(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ') "
for p in $A_PIDS; do case "$procs" in *" $p "*) seen=ok;; esac; done
echo "see_victim_pids=$seen"
echo "my_uid=$(id -u)"
echo attacks-done
exec sleep 600
)SH";
  server_.assign({assignment(101, "search", 0, victim, env()),
                  assignment(102, "vision", 1, attacker, attacker_env)});
  ASSERT_TRUE(
      eventually([&] { return log_of(102).find("attacks-done") != std::string::npos; }, 10s))
      << agent_log() << log_of(102);
  const auto results = results_in(log_of(102));
  const std::vector<std::string> attempts = {
      "read_log",          "append_log",       "list_run_dir",    "read_report",
      "append_report",     "list_checkpoints", "read_checkpoint", "write_checkpoint",
      "append_checkpoint", "read_token",       "read_tasks_json", "list_state_dir",
      "signal_victim",     "see_victim_pids"};
  for (const std::string& attempt : attempts) {
    EXPECT_EQ(results.contains(attempt) ? results.at(attempt) : "missing", "denied")
        << attempt << "\n"
        << log_of(102);
  }
  // The victim is untouched: its log, its checkpoint, its one forwarded checkpoint.
  EXPECT_EQ(log_of(101), "victim-output\n");
  EXPECT_EQ(read_text(a_ckpt + "/a.ckpt"), "state\n");
  EXPECT_FALSE(std::filesystem::exists(a_ckpt + "/evil"));
  EXPECT_EQ(server_.checkpoints(101).size(), 1U);
  // Two jobs, two uids from the range, neither root.
  const auto uid_of = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_uid) : -1;
  };
  const int a_uid = uid_of(a_run);
  const int b_uid = uid_of(state_dir() + "/runs/102/run-1/task-0");
  EXPECT_GE(a_uid, 61900);
  EXPECT_LE(a_uid, 61909);
  EXPECT_NE(a_uid, b_uid);
  EXPECT_EQ(results.at("my_uid"), std::to_string(b_uid));
  EXPECT_EQ(uid_of(a_ckpt), a_uid);
  // The modes the agent keeps.
  const auto mode_of = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_mode & 07777) : -1;
  };
  EXPECT_EQ(mode_of(a_run), 0700);
  EXPECT_EQ(mode_of(a_ckpt), 0700);
  EXPECT_EQ(mode_of(state_dir() + "/logs/101"), 0700);
  EXPECT_EQ(mode_of(state_dir() + "/logs/101/task-0.run-1.log"), 0600);
  EXPECT_EQ(mode_of(state_dir() + "/tasks.json"), 0600);
  EXPECT_EQ(mode_of(state_dir()), 0711);
  // tasks.json keeps the uids, for a restarted agent.
  const Json state = Json::parse(read_text(state_dir() + "/tasks.json"));
  std::set<int> saved;
  for (const Json& task : state["tasks"]) saved.insert(task.value("uid", -1));
  EXPECT_EQ(saved, (std::set<int>{a_uid, b_uid}));
}

// `setsid` and a double fork leave the task's process group; they end with the task all the
// same, whether it is stopped or ends on its own, and the agent keeps no zombie.
TEST_F(AgentIsolationTest, NothingOfAStoppedOrEndedTaskStays) {
  start_agent({"--cgroups", "auto"});
  const std::string escaper =
      "setsid sleep 600 & (sleep 600 &); (setsid sh -c 'sleep 600 &' &); echo up; ";
  Json stopped_env = env();
  stopped_env["WHICH"] = "stopped";
  Json ended_env = env();
  ended_env["WHICH"] = "ended";
  server_.assign({assignment(301, "search", 0, escaper + "exec sleep 600", stopped_env),
                  assignment(302, "search", 1, escaper + "sleep 0.5; exit 0", ended_env)});
  ASSERT_TRUE(eventually([&] { return processes_with("WHICH=stopped").size() == 4; }, 10s))
      << agent_log();
  ASSERT_TRUE(eventually([&] { return !final_status(302).is_null(); }, 10s)) << agent_log();
  EXPECT_EQ(final_status(302).value("state", ""), "succeeded");
  EXPECT_TRUE(processes_with("WHICH=ended").empty());
  server_.assign(Json::array());  // job 301 is taken away: stopped
  ASSERT_TRUE(agent_says("job 301 task 0: stopped")) << agent_log();
  EXPECT_TRUE(processes_with("WHICH=stopped").empty());
  EXPECT_TRUE(processes_with("TIDEPOOL_TEST_MARKER=" + marker_).empty());
  EXPECT_TRUE(eventually([&] { return zombies_of(agent_pid_).empty(); }, 5s))
      << zombies_of(agent_pid_).size() << " zombie(s)";
}

// A restarted agent keeps the uids of the jobs it takes back (tasks.json): job 811, whose
// preferred uid (61900 + 811 % 10) job 801 holds, gets another; the task taken back is stopped
// whole when it is no longer assigned.
TEST_F(AgentIsolationTest, ARestartedAgentKeepsTheJobsUids) {
  start_agent({"--cgroups", "auto"});
  const std::string escaper = "setsid sleep 600 & echo up; exec sleep 600";
  server_.assign({assignment(801, "search", 0, escaper, env())});
  const std::string run_801 = state_dir() + "/runs/801/run-1/task-0";
  ASSERT_TRUE(eventually(
      [&] { return processes_with("TIDEPOOL_TEST_MARKER=" + marker_).size() == 2; }, 10s))
      << agent_log();
  const auto uid_of = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_uid) : -1;
  };
  EXPECT_EQ(uid_of(run_801), 61901);
  ASSERT_TRUE(eventually([&] { return state_lists_job(state_dir(), 801); }, 10s)) << agent_log();
  signal_and_reap(agent_pid_, SIGKILL);
  start_agent({"--cgroups", "auto"});
  ASSERT_TRUE(agent_says("job 801 run 1 task 0: pid")) << agent_log();
  server_.assign({assignment(801, "search", 0, escaper, env()),
                  assignment(811, "vision", 1, "exec sleep 600", env())});
  const std::string run_811 = state_dir() + "/runs/811/run-1/task-0";
  ASSERT_TRUE(agent_says("job 811 run 1 task 0 started")) << agent_log();
  EXPECT_EQ(uid_of(run_811), 61900);  // the lowest free one
  server_.assign({assignment(811, "vision", 1, "exec sleep 600", env())});
  ASSERT_TRUE(agent_says("job 801 task 0: stopped")) << agent_log();
  const std::set<pid_t> left = processes_with("TIDEPOOL_TEST_MARKER=" + marker_);
  EXPECT_EQ(left.size(), 1U);  // job 811's sleep, nothing of job 801
}

// The cgroup2 file system's mount point, from /proc/self/mountinfo; empty when there is none.
std::string cgroup2_mount() {
  std::istringstream in(read_text("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    if (line.find(" - cgroup2 ") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    return point;
  }
  return "";
}

// An agent that is not root, in a cgroup subtree delegated to it (no controllers: membership and
// kill only), without namespaces: the task's cgroup holds what left its process group, and the
// agent (a child subreaper) reaps what comes to it.
TEST_F(AgentIsolationTest, WithoutNamespacesTheCgroupKillsWhatLeftTheGroup) {
  constexpr int kAgentUid = 61953;
  const std::string mount = cgroup2_mount();
  if (mount.empty()) GTEST_SKIP() << "no cgroup2 file system here";
  const std::string delegated = mount + "/tidepool-isolation-test-" + std::to_string(::getpid());
  if (::mkdir(delegated.c_str(), 0755) != 0 || ::mkdir((delegated + "/agent").c_str(), 0755) != 0 ||
      !std::filesystem::exists(delegated + "/cgroup.kill")) {
    ::rmdir((delegated + "/agent").c_str());
    ::rmdir(delegated.c_str());
    GTEST_SKIP() << "cannot make a cgroup with cgroup.kill under " << mount;
  }
  // Removed at the end, failed assertions included: the agent first (it is in the leaf).
  struct RemoveAtEnd {
    std::string folder;
    pid_t& agent;
    ~RemoveAtEnd() {
      signal_and_reap(agent, SIGKILL);
      std::error_code ignored;
      for (const auto& entry : std::filesystem::directory_iterator(folder, ignored)) {
        if (entry.is_directory()) ::rmdir(entry.path().c_str());
      }
      ::rmdir(folder.c_str());
    }
  } remove_at_end{delegated, agent_pid_};
  // Delegation as systemd does it: the folder and its cgroup.procs are the agent's.
  for (const std::string& path : {delegated, delegated + "/cgroup.procs", delegated + "/agent",
                                  delegated + "/agent/cgroup.procs"}) {
    ASSERT_EQ(::chown(path.c_str(), kAgentUid, kAgentUid), 0) << path;
  }
  start_agent({"--cgroups", delegated}, kAgentUid, delegated + "/agent/cgroup.procs");
  ASSERT_TRUE(agent_says("tasks run as the agent's own user")) << agent_log();
  EXPECT_TRUE(agent_says("each in a cgroup under " + delegated)) << agent_log();
  server_.assign({assignment(401, "search", 0,
                             "setsid sleep 600 & (sleep 600 &); echo up; exec sleep 600", env())});
  const std::string marker = "TIDEPOOL_TEST_MARKER=" + marker_;
  ASSERT_TRUE(eventually([&] { return processes_with(marker).size() == 3; }, 10s)) << agent_log();
  server_.assign(Json::array());
  ASSERT_TRUE(agent_says("job 401 task 0: stopped")) << agent_log();
  EXPECT_TRUE(processes_with(marker).empty());
  EXPECT_TRUE(eventually([&] { return zombies_of(agent_pid_).empty(); }, 5s))
      << zombies_of(agent_pid_).size() << " zombie(s)";
  // The task's group goes with it (removed once its last process is reaped, which a loaded
  // machine may take a moment to do): only the agent's leaf is left.
  std::set<std::string> groups;
  const auto only_the_agents = [&] {
    groups.clear();
    for (const auto& entry : std::filesystem::directory_iterator(delegated)) {
      if (entry.is_directory()) groups.insert(entry.path().filename().string());
    }
    return groups == std::set<std::string>{"agent"};
  };
  EXPECT_TRUE(eventually(only_the_agents, 5s)) << groups.size() << " groups left";
}

TEST_F(AgentIsolationTest, CheckpointsOutsideTheJobsFolderAreNotForwarded) {
  start_agent({"--cgroups", "none"});
  const std::string script = R"(
report() { echo "{\"step\": $1, \"path\": \"$2\"}" >> "$TIDEPOOL_CHECKPOINT_REPORT"; }
ln -s / "$TIDEPOOL_CHECKPOINT_DIR/escape"
report 1 "$TIDEPOOL_CHECKPOINT_DIR/escape/etc/passwd"
report 2 "$TIDEPOOL_CHECKPOINT_DIR/../other-job/step-2"
report 3 /etc/passwd
report 4 "$TIDEPOOL_CHECKPOINT_DIR/escape"
echo 5 > "$TIDEPOOL_CHECKPOINT_DIR/step-5"
report 5 "$TIDEPOOL_CHECKPOINT_DIR/step-5"
report 6 "$TIDEPOOL_CHECKPOINT_DIR/step-6-not-written-yet"
echo reported
exec sleep 600
)";
  server_.assign({assignment(501, "search", 0, script, env())});
  ASSERT_TRUE(eventually([&] { return server_.checkpoints(501).size() >= 2; }, 10s)) << agent_log();
  ASSERT_TRUE(agent_says("checkpoint report dropped")) << agent_log();
  std::this_thread::sleep_for(300ms);  // a few more turns: nothing else comes
  const auto forwarded = server_.checkpoints(501);
  ASSERT_EQ(forwarded.size(), 2U) << Json(forwarded).dump();
  const std::string folder = std::filesystem::canonical(dir_.file("checkpoints/501")).string();
  EXPECT_EQ(forwarded[0].value("step", 0), 5);
  EXPECT_EQ(forwarded[0].value("path", ""), folder + "/step-5");
  EXPECT_EQ(forwarded[1].value("step", 0), 6);
  EXPECT_EQ(forwarded[1].value("path", ""), folder + "/step-6-not-written-yet");
  for (const char* step : {"escape/etc/passwd", "other-job/step-2", "/etc/passwd"}) {
    EXPECT_NE(agent_log().find(step), std::string::npos) << step << "\n" << agent_log();
  }
}

// A task's step report (TIDEPOOL_STEP_REPORT) is someone else's file: while it is a link (here to
// a file only root may read) it is not read at all; a line of a megabyte without its end costs the
// agent one refused line and bounded memory; what it reads goes in the heartbeats, the rest with
// the exit report, each step once.
TEST_F(AgentIsolationTest, StepReportsAreReadBoundedAndNeverThroughALink) {
  start_agent({"--cgroups", "none"});
  const std::string script = R"(
ln -s /etc/shadow "$TIDEPOOL_STEP_REPORT"
echo linked
sleep 1
rm "$TIDEPOOL_STEP_REPORT"
printf 'step=0 time_us=1000 compute_us=700\nstep=1 time_us=oops\n' >> "$TIDEPOOL_STEP_REPORT"
head -c 1000000 /dev/zero | tr '\0' 'z' >> "$TIDEPOOL_STEP_REPORT"
printf '\nstep=1 time_us=2000 compute_us=1500 x_loss=0.5\n' >> "$TIDEPOOL_STEP_REPORT"
sleep 1
printf 'step=2 time_us=3000\n' >> "$TIDEPOOL_STEP_REPORT"
)";
  server_.assign({assignment(701, "search", 0, script, env())});
  ASSERT_TRUE(eventually([&] { return log_of(701) == "linked\n"; }, 10s)) << agent_log();
  const int seen = server_.heartbeats();
  ASSERT_TRUE(eventually([&] { return server_.heartbeats() >= seen + 3; }, 10s));
  EXPECT_TRUE(server_.steps(701).empty()) << Json(server_.steps(701)).dump();
  ASSERT_TRUE(eventually([&] { return !final_status(701).is_null(); }, 20s)) << agent_log();
  std::int64_t steps = 0;
  std::int64_t refused = 0;
  std::int64_t compute = 0;
  std::int64_t sum = 0;
  std::vector<Json> reports = server_.steps(701);
  reports.push_back(final_status(701).value("steps", Json::object()));
  for (const Json& r : reports) {
    steps += r.value("steps", std::int64_t{0});
    refused += r.value("refused_lines", std::int64_t{0});
    compute += r.value("compute_us", std::int64_t{0});
    sum += r.value("sum_us", std::int64_t{0});
  }
  EXPECT_EQ(steps, 3) << Json(reports).dump();
  EXPECT_EQ(refused, 2) << Json(reports).dump();
  EXPECT_EQ(compute, 2200);
  EXPECT_EQ(sum, 6000);
  EXPECT_TRUE(agent_says("a line of its step report is refused")) << agent_log();
}

// A reply whose first assignment has no command: that job fails, once, with the reason; the
// second job runs. (The agent used to drop the whole reply, freezing the node.)
TEST_F(AgentIsolationTest, OneBadAssignmentFailsItsJobAndTheOthersRun) {
  start_agent({"--cgroups", "none"});
  Json bad = assignment(601, "search", 0, "", env());
  bad["command"] = Json::array();
  Json bad_type = assignment(603, "search", 2, "true", env());
  bad_type["world_size"] = "two";
  server_.assign({bad, assignment(602, "vision", 1, "echo good job", env()), bad_type});
  ASSERT_TRUE(eventually([&] { return !final_status(602).is_null(); }, 10s)) << agent_log();
  EXPECT_EQ(final_status(602).value("state", ""), "succeeded") << agent_log();
  EXPECT_EQ(log_of(602), "good job\n");
  const int seen = server_.heartbeats();
  ASSERT_TRUE(eventually([&] { return server_.heartbeats() >= seen + 3; }, 10s));
  for (auto [job, field] : {std::pair{601, "command"}, std::pair{603, "world_size"}}) {
    const auto reports = server_.statuses(job);
    ASSERT_EQ(reports.size(), 1U) << job << ": " << Json(reports).dump();
    EXPECT_EQ(reports[0].value("state", ""), "failed");
    EXPECT_NE(reports[0].value("message", "").find(field), std::string::npos) << reports[0].dump();
  }
}

// An agent that is not root cannot give jobs uids of their own: it runs one tenant's tasks at a
// time, and says why the other waits.
TEST_F(AgentIsolationTest, AnAgentThatCannotIsolateRunsOneTenantAtATime) {
  start_agent({"--cgroups", "none"}, 61951);
  server_.assign({assignment(701, "search", 0, "exec sleep 600", env()),
                  assignment(702, "vision", 1, "echo vision ran", env())});
  ASSERT_TRUE(agent_says("job 702 task 0 (tenant vision) waits")) << agent_log();
  EXPECT_TRUE(server_.statuses(702).empty());
  server_.assign({assignment(702, "vision", 1, "echo vision ran", env())});  // 701 taken away
  ASSERT_TRUE(eventually([&] { return !final_status(702).is_null(); }, 10s)) << agent_log();
  EXPECT_EQ(final_status(702).value("state", ""), "succeeded");
}

TEST_F(AgentIsolationTest, AnAgentThatCannotIsolateMayBeToldToShareTheNode) {
  start_agent({"--cgroups", "none", "--allow-shared-node-without-isolation"}, 61952);
  server_.assign({assignment(711, "search", 0, "exec sleep 600", env()),
                  assignment(712, "vision", 1, "echo vision ran", env())});
  ASSERT_TRUE(eventually([&] { return !final_status(712).is_null(); }, 10s)) << agent_log();
  EXPECT_EQ(final_status(712).value("state", ""), "succeeded");
}

TEST_F(AgentIsolationTest, ATokenFileOthersMayReadIsRefused) {
  ::chmod(token_file_.c_str(), 0644);
  start_agent();
  int status = -1;
  const bool exited =
      eventually([&] { return ::waitpid(agent_pid_, &status, WNOHANG) == agent_pid_; }, 10s);
  ASSERT_TRUE(exited) << "the agent runs with a token file others may read\n" << agent_log();
  agent_pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(agent_log().find("may be read by group or others (mode 0644)"), std::string::npos)
      << agent_log();
}

}  // namespace
}  // namespace tidepool::test_support
