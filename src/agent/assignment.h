// What the server asks a node to run, as the heartbeat reply carries it (server/control_plane.h,
// ControlPlane::heartbeat): one NodeAssignment per running job with tasks on the node, and how the
// agent composes a task's environment from it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

struct AssignedTask {
  int index = 0;          // the task's rank in the job, 0 .. world_size - 1
  std::vector<int> gpus;  // GPU indices on this node
};

struct NodeAssignment {
  std::int64_t job = 0;
  std::int64_t run = 0;  // the job's start count: a new run of the job is a new assignment
  std::string name;
  std::string tenant;
  int world_size = 1;
  std::vector<AssignedTask> tasks;  // this node's tasks
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the task's own folder
  std::int64_t cpu_milli_per_task = 0;
  std::int64_t memory_mib_per_task = 0;
  bool checkpoints = false;  // the job declared a checkpoint interval: it answers a notice
  std::string resume_from;   // the last reported checkpoint; empty on a first run
};

// The "assignments" of a heartbeat reply; fails naming the field ("assignments[2].tasks").
Result<std::vector<NodeAssignment>> assignments_from_json(const nlohmann::json& reply);

// An assignment of a reply that could not be used: the job it is about (0 when even that cannot
// be read), its run, and why.
struct RejectedAssignment {
  std::int64_t job = 0;
  std::int64_t run = 0;
  Error error;
};

struct ParsedAssignments {
  std::vector<NodeAssignment> accepted;
  std::vector<RejectedAssignment> rejected;
};

// The "assignments" of a heartbeat reply, each read on its own: one that is malformed (no
// command, a field of the wrong type) is rejected with its reason and the others are kept, so
// that one bad job cannot stop a node. Fails only when the reply itself is not an object or its
// "assignments" not a list.
Result<ParsedAssignments> parse_assignments(const nlohmann::json& reply);

// Where a task's files are and what the agent adds to its environment.
struct TaskSetting {
  std::string agent_dir;        // the folder of the agent's executable: first on a default PATH
  std::string run_dir;          // the task's own folder (default working dir and HOME)
  std::string checkpoint_dir;   // the job's checkpoint folder (shared between nodes)
  std::string notice_file;      // written by the agent when it gives notice
  std::string checkpoint_file;  // where `tidepool checkpoint` appends its reports
  std::string server_url;
  // CUDA_VISIBLE_DEVICES names: GPU UUIDs with NVML, indices for fake GPUs; by GPU index.
  std::vector<std::string> gpu_names;
};

// The task's whole environment, sorted by name: the job's env, then (overriding it) the variables
// of Tidepool and torchrun: CUDA_VISIBLE_DEVICES, TIDEPOOL_JOB_ID, TIDEPOOL_TASK_INDEX,
// TIDEPOOL_RUN, WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, TIDEPOOL_CHECKPOINT_DIR,
// TIDEPOOL_RESUME_FROM (only when the job has a checkpoint), TIDEPOOL_NOTICE_FILE,
// TIDEPOOL_CHECKPOINT_REPORT and TIDEPOOL_SERVER; PATH (agent_dir, /usr/local/bin, /usr/bin, /bin)
// and HOME (run_dir) unless the job sets them.
std::vector<std::pair<std::string, std::string>> task_environment(const NodeAssignment& assignment,
                                                                  const AssignedTask& task,
                                                                  const TaskSetting& setting);

}  // namespace tidepool
