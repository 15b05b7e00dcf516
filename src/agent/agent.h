// The node agent: registers its node with the server, heartbeats, runs the tasks the server
// assigns to the node, and stops those it takes away with the preemption protocol
// (stop_sequence.h). One thread; it sleeps in sigtimedwait, woken by a child's exit, a stop signal
// or its next deadline, so an idle agent costs next to nothing.
//
// Each heartbeat carries the node's GPU samples and the jobs it runs; the reply lists the tasks it
// should run (each message to and from the server is one of api/agent_wire.h). The agent makes
// the node match it:
//   - an assigned task that does not run is started once its GPUs are free of any task still
//     stopping there (the server gives GPUs to the next job as soon as it preempts one); a task
//     on a MIG instance needs only its instance free, and starts only on an instance the agent's
//     own discovery has (uuid, profile and start: check_mig_instance), else it fails with why;
//   - a running task that is no longer assigned (preempted, cancelled, past its max_runtime, its
//     job failed elsewhere) is stopped: notice, checkpoint, SIGTERM, SIGKILL;
//   - a task that ends on its own is reported (POST /v1/jobs/{id}/status with its exit code);
//   - what a task writes goes to a log file (one per run), shipped to the server in chunks while
//     the task runs (every log_ship_ms) and when it ends;
//   - the checkpoints a task reports with `tidepool checkpoint` (a line appended to its
//     TIDEPOOL_CHECKPOINT_REPORT file) are forwarded to the server with the agent's token;
//   - the steps a task reports (lines appended to its TIDEPOOL_STEP_REPORT file, the protocol of
//     api/step_report.h) are read as the file grows, at most kMaxStepReadBytes a turn, summed per
//     task (StepStats: bounded whatever the job writes; refused lines counted, the first reason
//     logged once per task) and sent in the next heartbeat's `steps`; what is left when the task
//     ends goes with its exit report. Figures a heartbeat could not deliver wait for the next one.
// A task whose assignment carries a `replica` is an inference service's replica: just before each
// heartbeat the agent reads its Prometheus metrics (its file, or http://127.0.0.1:<port>/metrics
// within 500 ms) and sends the figures they give (requests waiting and in flight, the request
// rate, latencies; replica_scraper.h) in the heartbeat's `replicas`. A replica that cannot be read
// is sent without figures and the agent log says why, once per reason; its bytes never leave the
// node.
// The tasks it runs are written to <state-dir>/tasks.json, so that an agent that restarts takes
// back those still running (and stops them when the server no longer assigns them).
//
// Jobs on one node do not touch each other (task_process.h, task_files.h, task_uids.h):
//   - each job's tasks run as a uid of their own from AgentOptions::task_uids (kept in tasks.json
//     across restarts), in PID and mount namespaces of their own where the agent may make them,
//     and each task in a cgroup of its own where there is one (cgroup_limits.h);
//   - a task is over when nothing of it is left: its cgroup is empty, its namespace gone (its init
//     took every process with it), and its process group too; without either, the processes of
//     the job's uid are killed before the uid goes to another job (agents that share a machine
//     need disjoint uid ranges for that);
//   - the checkpoints a task reports are forwarded only when they resolve (no link, no "..")
//     inside the job's own checkpoint folder; others are dropped and logged;
//   - a node that cannot isolate tenants (no uid of their own, or neither a cgroup nor PID
//     namespaces) runs the tasks of one tenant at a time, unless told otherwise: a task of
//     another tenant waits, and the agent log says why;
//   - an assignment the agent cannot read (no command, a field of the wrong type) fails that job,
//     once (POST /v1/jobs/{id}/status, state failed, with the reason); the others run.
// The agent reaps every child it has (it is a child subreaper), so that no zombie stays; task
// logs are fsynced when a task ends and every log_sync_ms; past log_quota_bytes, the logs of
// finished tasks under <state-dir>/logs are removed, oldest first.
#pragma once

#include <csignal>
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
#include "agent/replica_scraper.h"
#include "agent/stop_sequence.h"
#include "agent/task_process.h"
#include "agent/task_uids.h"
#include "api/agent_wire.h"
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
  // Isolation, as agent_main found the machine allows it. task_uids: the range of uids the jobs
  // run as; nullopt: the tasks run as the agent (it may not switch uids).
  std::optional<UidRange> task_uids;
  bool pid_namespaces = false;  // each task in PID and mount namespaces of its own
  // Run tasks of several tenants at once even where the node cannot isolate them.
  bool allow_shared_node_without_isolation = false;
  std::int64_t log_quota_bytes = std::int64_t{10} * 1024 * 1024 * 1024;
  std::int64_t log_sync_ms = 10'000;
  // A running task's new output is shipped to the server this often (and when it ends).
  std::int64_t log_ship_ms = 1000;
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
  // Reads the figures of the running service replicas for the heartbeat (replica_scraper.h).
  void scrape_replicas(std::int64_t now_ms);
  void fail_rejected(const std::vector<RejectedAssignment>& rejected);
  // Whether tasks of different tenants may run here at once.
  [[nodiscard]] bool isolates_tenants() const;
  [[nodiscard]] std::string cgroup_name(const LocalTask& task) const;
  // Whether nothing of the task is left (cgroup, namespace, process group).
  bool task_gone(LocalTask& task);
  void kill_everything(LocalTask& task);
  void release_uid_if_unused(std::int64_t job);
  void sync_logs(std::int64_t now_ms);
  void enforce_log_quota();
  void reconcile(const std::vector<NodeAssignment>& assignments, std::int64_t now_ms);
  void start_ready_tasks(std::int64_t now_ms);
  void start_task(const TaskKey& key, const NodeAssignment& assignment, const AssignedTask& task,
                  std::int64_t now_ms);
  void begin_stop(LocalTask& task, std::int64_t now_ms);
  void apply(LocalTask& task, const std::vector<StopAction>& actions, std::int64_t now_ms);
  void watch_tasks(std::int64_t now_ms);
  void forward_checkpoints(LocalTask& task, std::int64_t now_ms);
  // Reads what the task appended to its step file since the last read, at most `rounds` x
  // kMaxStepReadBytes.
  void read_steps(LocalTask& task, int rounds);
  void report_exit(LocalTask& task);
  void ship_log(LocalTask& task);
  // Ships the running tasks' new output, every log_ship_ms.
  void ship_running_logs(std::int64_t now_ms);
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
  std::vector<GpuReading> samples_;     // the latest, for the next heartbeat
  std::map<TaskKey, LocalTask> tasks_;
  std::map<TaskKey, std::pair<NodeAssignment, AssignedTask>> waiting_;  // assigned, not started
  std::set<TaskKey> done_;  // ended here while the server may still list them
  TaskUids uids_;
  std::map<std::int64_t, int> uids_to_clear_;  // released uids whose processes are being killed
  ReplicaScraper replicas_;                    // the figures of the service replicas here
  std::set<std::pair<std::int64_t, std::int64_t>> rejected_;  // (job, run) reported as failed
  std::set<std::string> rejected_logged_;                     // unreadable ones, logged once
  std::set<TaskKey> told_waiting_;  // waiting for another tenant's tasks to end, logged once
  std::int64_t next_log_sync_ms_ = 0;
  std::int64_t next_log_ship_ms_ = 0;
  std::int64_t next_heartbeat_ms_ = 0;
  std::int64_t next_sample_ms_ = 0;
  bool state_dirty_ = false;
  bool server_reachable_ = true;
};

}  // namespace tidepool
