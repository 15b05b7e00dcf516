// The node agent: registers its node with the server, heartbeats, runs the tasks the server
// assigns to the node, and stops those it takes away with the preemption protocol
// (stop_sequence.h). One thread; it sleeps in sigtimedwait, woken by a child's exit, a stop signal
// or its next deadline, so an idle agent costs next to nothing.
//
// Each heartbeat carries the node's GPU samples and the jobs it runs; the reply lists the tasks it
// should run (assignment.h). The agent makes the node match it:
//   - an assigned task that does not run is started once its GPUs are free of any task still
//     stopping there (the server gives GPUs to the next job as soon as it preempts one);
//   - a running task that is no longer assigned (preempted, cancelled, past its max_runtime, its
//     job failed elsewhere) is stopped: notice, checkpoint, SIGTERM, SIGKILL;
//   - a task that ends on its own is reported (POST /v1/jobs/{id}/status with its exit code);
//   - what a task writes goes to a log file, shipped to the server in chunks;
//   - the checkpoints a task reports with `tidepool checkpoint` (a line appended to its
//     TIDEPOOL_CHECKPOINT_REPORT file) are forwarded to the server with the agent's token.
// The tasks it runs are written to <state-dir>/tasks.json, so that an agent that restarts takes
// back those still running (and stops them when the server no longer assigns them).
#pragma once

#include <signal.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/agent_client.h"
#include "agent/assignment.h"
#include "agent/cgroup_limits.h"
#include "agent/gpu_backend.h"
#include "agent/stop_sequence.h"
#include "agent/task_process.h"
#include "core/error.h"

namespace tidepool {

struct AgentOptions {
  std::string node;      // the node's name in the cluster file
  std::string address;   // how other nodes reach this one (MASTER_ADDR); default: node
  std::string hostname;  // reported
  std::string leaf;      // reported; the server checks them against its cluster file
  std::string spine;
  std::string state_dir;        // run folders, logs, tasks.json
  std::string checkpoint_root;  // TIDEPOOL_CHECKPOINT_DIR is <checkpoint_root>/<job>
  std::string agent_dir;        // the agent executable's folder, first on a task's default PATH
  std::int64_t heartbeat_ms = 2000;
  std::int64_t sample_ms = 5000;
  std::int64_t notice_ms = 30'000;  // how long a job may take to checkpoint after the notice
  std::int64_t grace_ms = 10'000;   // between SIGTERM and SIGKILL
  int notice_signal = SIGUSR1;
  bool stop_tasks_on_exit = false;  // on SIGTERM: stop the tasks (else leave them to a restart)
};

class Agent {
 public:
  Agent(AgentOptions options, AgentClient client, std::unique_ptr<GpuBackend> gpus,
        CgroupSetup cgroups);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until SIGTERM or SIGINT. The caller blocks SIGCHLD, SIGTERM and SIGINT in every thread
  // before starting any; the agent waits for them. Fails when the server refuses the node (an
  // unknown node, a wrong token, GPUs that differ from the cluster file).
  Result<void> run();

 private:
  struct LocalTask;
  using TaskKey = std::tuple<std::int64_t, std::int64_t, int>;  // job, run, task index

  Result<void> register_node();
  void heartbeat(std::int64_t now_ms);
  void reconcile(const std::vector<NodeAssignment>& assignments, std::int64_t now_ms);
  void start_ready_tasks(std::int64_t now_ms);
  void start_task(const TaskKey& key, const NodeAssignment& assignment, const AssignedTask& task,
                  std::int64_t now_ms);
  void begin_stop(LocalTask& task, std::int64_t now_ms);
  void apply(LocalTask& task, const std::vector<StopAction>& actions, std::int64_t now_ms);
  void watch_tasks(std::int64_t now_ms);
  void forward_checkpoints(LocalTask& task, std::int64_t now_ms);
  void report_exit(LocalTask& task);
  void ship_log(LocalTask& task);
  void sample_gpus(std::int64_t now_ms);
  void save_state();
  void load_state();
  [[nodiscard]] std::int64_t next_wake_ms(std::int64_t now_ms) const;
  void log(const std::string& line) const;

  AgentOptions options_;
  AgentClient client_;
  std::unique_ptr<GpuBackend> gpus_;
  CgroupSetup cgroups_;
  std::vector<GpuInfo> gpu_info_;
  std::vector<std::string> gpu_names_;  // CUDA_VISIBLE_DEVICES names by index
  nlohmann::json samples_ = nlohmann::json::array();
  std::map<TaskKey, LocalTask> tasks_;
  std::map<TaskKey, std::pair<NodeAssignment, AssignedTask>> waiting_;  // assigned, not started
  std::set<TaskKey> done_;  // ended here while the server may still list them
  std::int64_t next_heartbeat_ms_ = 0;
  std::int64_t next_sample_ms_ = 0;
  bool state_dirty_ = false;
  bool server_reachable_ = true;
};

}  // namespace tidepool
