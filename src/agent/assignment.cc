#include "agent/assignment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace tidepool {

std::vector<std::pair<std::string, std::string>> task_environment(const NodeAssignment& assignment,
                                                                  const AssignedTask& task,
                                                                  const TaskSetting& setting) {
  std::map<std::string, std::string> vars = assignment.env;
  std::string devices;
  for (int g : task.gpus) {
    if (!devices.empty()) devices += ',';
    devices += g >= 0 && static_cast<std::size_t>(g) < setting.gpu_names.size()
                   ? setting.gpu_names[static_cast<std::size_t>(g)]
                   : std::to_string(g);
  }
  // CUDA names an instance by its uuid, and a process sees one instance at most.
  if (task.mig) devices = task.mig->uuid;
  vars.try_emplace("PATH", setting.agent_dir.empty()
                               ? std::string("/usr/local/bin:/usr/bin:/bin")
                               : setting.agent_dir + ":/usr/local/bin:/usr/bin:/bin");
  vars.try_emplace("HOME", setting.run_dir);
  vars["CUDA_VISIBLE_DEVICES"] = devices;
  vars["TIDEPOOL_JOB_ID"] = std::to_string(assignment.job);
  vars["TIDEPOOL_TASK_INDEX"] = std::to_string(task.index);
  vars["TIDEPOOL_RUN"] = std::to_string(assignment.run);
  vars["WORLD_SIZE"] = std::to_string(assignment.world_size);
  vars["RANK"] = std::to_string(task.index);
  vars["MASTER_ADDR"] = assignment.master_addr;
  vars["MASTER_PORT"] = std::to_string(assignment.master_port);
  vars["TIDEPOOL_CHECKPOINT_DIR"] = setting.checkpoint_dir;
  if (assignment.resume_from.empty()) {
    vars.erase("TIDEPOOL_RESUME_FROM");
  } else {
    vars["TIDEPOOL_RESUME_FROM"] = assignment.resume_from;
  }
  vars["TIDEPOOL_NOTICE_FILE"] = setting.notice_file;
  vars["TIDEPOOL_CHECKPOINT_REPORT"] = setting.checkpoint_file;
  vars["TIDEPOOL_STEP_REPORT"] = setting.step_file;
  vars["TIDEPOOL_SERVER"] = setting.server_url;
  return {vars.begin(), vars.end()};
}

std::optional<MigInstance> mig_instance(const AssignedTask& task) {
  if (!task.mig) return std::nullopt;
  return MigInstance{.profile = task.mig->profile, .start = task.mig->start};
}

Result<void> check_mig_instance(const AssignedTask& task, std::span<const GpuInfo> gpus) {
  if (!task.mig) return {};
  const AssignedMig& want = *task.mig;
  if (task.gpus.size() != 1) {
    return fail("", fmt::format("a task on a MIG instance has one GPU, got {}", task.gpus.size()));
  }
  const int gpu = task.gpus.front();
  const std::string missing =
      fmt::format("GPU {} has no {} MIG instance at memory slice {} with uuid {}", gpu,
                  mig_profile_spec(want.profile).name, want.start, want.uuid);
  const auto info = std::ranges::find(gpus, gpu, &GpuInfo::index);
  if (info == gpus.end()) {
    return fail("",
                fmt::format("{}; the node has no GPU {} ({} found)", missing, gpu, gpus.size()));
  }
  if (!info->mig_enabled) return fail("", missing + "; it is not in MIG mode");
  std::vector<std::string> has;
  for (const MigDevice& m : info->mig) {
    if (m.uuid == want.uuid && m.profile == want.profile && m.start == want.start) return {};
    has.push_back(fmt::format("{} at memory slice {} ({})", mig_profile_spec(m.profile).name,
                              m.start, m.uuid));
  }
  if (has.empty()) return fail("", missing + "; it has no instances");
  return fail("", fmt::format("{}; it has {}", missing, fmt::join(has, ", ")));
}

}  // namespace tidepool
