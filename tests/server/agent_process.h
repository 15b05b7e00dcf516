// A real `tidepool agent` process for a test, with eight fake H100 GPUs (or the fake GPUs of
// `gpus`, as --gpus takes them), on 127.0.0.1: it follows
// the servers it is given (a comma-separated list, as --server takes), keeps its state in the
// test's folder and ends with the test (SIGKILL) unless stopped before. Header only; tests only.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server_process.h"

namespace tidepool::test_support {

// A cluster file for agent tests: two leaves, one node each, node-1 and node-2 with 8 H100 (the
// fake GPUs AgentProcess gives its agent).
inline constexpr const char* kTwoAgentNodes = R"(site: test
spines:
  - name: spine-1
    leaves:
      - name: leaf-1
        nodes:
          - {name: node-1, gpu_model: H100, gpus: 8, cpus: 16, memory_gib: 64, nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]}
      - name: leaf-2
        nodes:
          - {name: node-2, gpu_model: H100, gpus: 8, cpus: 16, memory_gib: 64, nvlink_domains: [[0, 1, 2, 3, 4, 5, 6, 7]]}
)";

// Readies `dir` for a server and agents whose jobs run as uids of their own: cluster.yaml and
// tenants.yaml with the texts given, the folder passable and out/ writable by every uid (the jobs
// write their results there), and server.yaml (heartbeat_timeout 3s, tick 1s) naming them; returns
// the path of server.yaml.
inline std::string prepare_agent_test_dir(const TempDir& dir, std::string_view cluster,
                                          std::string_view tenants) {
  write_text(dir.file("cluster.yaml"), std::string(cluster));
  write_text(dir.file("tenants.yaml"), std::string(tenants));
  std::filesystem::create_directories(dir.file("out"));
  ::chmod(dir.file("").c_str(), 0711);
  ::chmod(dir.file("out").c_str(), 0777);
  write_text(dir.file("server.yaml"),
             "cluster: " + dir.file("cluster.yaml") + "\ntenants: " + dir.file("tenants.yaml") +
                 "\ndatabase: " + dir.file("tidepool.db") +
                 "\nlisten: 127.0.0.1:0\nheartbeat_timeout: 3s\ntick: 1s\n");
  return dir.file("server.yaml");
}

class AgentProcess {
 public:
  AgentProcess(const TempDir& dir, std::string node, std::string servers, std::string token,
               std::string gpus = "fake:8xH100")
      : dir_(dir),
        node_(std::move(node)),
        servers_(std::move(servers)),
        token_(std::move(token)),
        gpus_(std::move(gpus)) {}
  ~AgentProcess() { kill_hard(); }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  void start() {
    log_path_ = dir_.file("agent-" + node_ + ".log");
    std::vector<std::string> args = {tidepool_binary(),
                                     "agent",
                                     "--server",
                                     servers_,
                                     "--token",
                                     token_,
                                     "--node",
                                     node_,
                                     "--gpus",
                                     gpus_,
                                     "--state-dir",
                                     dir_.file("state-" + node_),
                                     "--checkpoint-root",
                                     dir_.file("checkpoints"),
                                     "--heartbeat-interval",
                                     "200ms",
                                     "--sample-interval",
                                     "1s",
                                     "--notice-timeout",
                                     "5s",
                                     "--grace-period",
                                     "2s",
                                     "--cgroups",
                                     "none"};
    pid_ = spawn_logged(std::move(args), log_path_);
  }
  void kill_hard() { signal_and_reap(pid_, SIGKILL); }
  int terminate() { return signal_and_reap(pid_, SIGTERM); }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string log() const { return read_text(log_path_); }

 private:
  const TempDir& dir_;
  std::string node_;
  std::string servers_;
  std::string token_;
  std::string gpus_;
  std::string log_path_;
  pid_t pid_ = -1;
};

}  // namespace tidepool::test_support
