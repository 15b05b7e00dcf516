#include "agent/assignment.h"

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
  vars["TIDEPOOL_SERVER"] = setting.server_url;
  return {vars.begin(), vars.end()};
}

}  // namespace tidepool
