// How the agent composes the environment of a task the server assigned to its node: the
// assignment is the heartbeat reply's (api/agent_wire.h: NodeAssignment, AssignedTask), the
// folders and names are the agent's.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu_backend.h"
#include "api/agent_wire.h"
#include "core/error.h"
#include "core/mig.h"

namespace tidepool {

// Where a task's files are and what the agent adds to its environment.
struct TaskSetting {
  std::string agent_dir;        // the folder of the agent's executable: first on a default PATH
  std::string run_dir;          // the task's own folder (default working dir and HOME)
  std::string checkpoint_dir;   // the job's checkpoint folder (shared between nodes)
  std::string notice_file;      // written by the agent when it gives notice
  std::string checkpoint_file;  // where `tidepool checkpoint` appends its reports
  std::string step_file{};      // where the task appends its step lines (api/step_report.h)
  std::string server_url;
  // CUDA_VISIBLE_DEVICES names: GPU UUIDs with NVML, indices for fake GPUs; by GPU index.
  std::vector<std::string> gpu_names;
};

// The task's whole environment, sorted by name: the job's env, then (overriding it) the variables
// of Tidepool and torchrun: CUDA_VISIBLE_DEVICES (the task's GPUs by gpu_names, or for a task on a
// MIG instance that instance's uuid alone), TIDEPOOL_JOB_ID, TIDEPOOL_TASK_INDEX,
// TIDEPOOL_RUN, WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, TIDEPOOL_CHECKPOINT_DIR,
// TIDEPOOL_RESUME_FROM (only when the job has a checkpoint), TIDEPOOL_NOTICE_FILE,
// TIDEPOOL_CHECKPOINT_REPORT, TIDEPOOL_STEP_REPORT and TIDEPOOL_SERVER; PATH (agent_dir,
// /usr/local/bin, /usr/bin, /bin) and HOME (run_dir) unless the job sets them.
std::vector<std::pair<std::string, std::string>> task_environment(const NodeAssignment& assignment,
                                                                  const AssignedTask& task,
                                                                  const TaskSetting& setting);

// The MIG instance a task runs on, as the core's layout rules see it; nullopt for a task on whole
// GPUs (or a share of one).
[[nodiscard]] std::optional<MigInstance> mig_instance(const AssignedTask& task);

// Whether the agent's own discovery (`gpus`, GpuInfo::index naming each) has the MIG instance the
// task was assigned: on the task's one GPU, of the same uuid, profile and start. A task without a
// MIG instance passes. Otherwise the task must not start; the Error (no field) says what is
// missing and what the GPU has instead: "GPU 1 has no 3g.40gb MIG instance at memory slice 4 with
// uuid MIG-...; it has 3g.40gb at memory slice 0 (MIG-...)".
Result<void> check_mig_instance(const AssignedTask& task, std::span<const GpuInfo> gpus);

}  // namespace tidepool
