#include "agent/assignment.h"

#include <fmt/format.h>

#include <set>

namespace tidepool {
namespace {

using Json = nlohmann::json;

// Reads `object[key]` as T into `out`; absent or null keeps `out`. A wrong type fails naming
// path.key.
template <class T>
Result<void> read(const Json& object, const std::string& path, const char* key, T& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return {};
  try {
    out = it->get<T>();
  } catch (const Json::exception& e) {
    return fail(path + "." + key, fmt::format("unexpected value: {}", e.what()));
  }
  return {};
}

Result<NodeAssignment> node_assignment_from_json(const Json& value, const std::string& path) {
  if (!value.is_object()) return fail(path, "expected an object");
  NodeAssignment a;
  Json tasks = Json::array();
  for (Result<void> ok :
       {read(value, path, "job", a.job), read(value, path, "run", a.run),
        read(value, path, "name", a.name), read(value, path, "tenant", a.tenant),
        read(value, path, "world_size", a.world_size), read(value, path, "tasks", tasks),
        read(value, path, "master_addr", a.master_addr),
        read(value, path, "master_port", a.master_port), read(value, path, "command", a.command),
        read(value, path, "env", a.env), read(value, path, "working_dir", a.working_dir),
        read(value, path, "cpu_milli_per_task", a.cpu_milli_per_task),
        read(value, path, "memory_mib_per_task", a.memory_mib_per_task),
        read(value, path, "checkpoints", a.checkpoints),
        read(value, path, "resume_from", a.resume_from)}) {
    if (!ok) return std::unexpected(ok.error());
  }
  if (a.job <= 0) return fail(path + ".job", "expected a job id above 0");
  if (a.world_size < 1) return fail(path + ".world_size", "expected at least 1");
  if (a.command.empty()) return fail(path + ".command", "the job has no command to run");
  if (!tasks.is_array()) return fail(path + ".tasks", "expected a list");
  std::set<int> gpus_seen;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const std::string task_path = fmt::format("{}.tasks[{}]", path, i);
    AssignedTask task;
    if (!tasks[i].is_object()) return fail(task_path, "expected an object");
    for (Result<void> ok : {read(tasks[i], task_path, "index", task.index),
                            read(tasks[i], task_path, "gpus", task.gpus)}) {
      if (!ok) return std::unexpected(ok.error());
    }
    if (task.index < 0 || task.index >= a.world_size) {
      return fail(task_path + ".index",
                  fmt::format("{} is not a task of a job of {}", task.index, a.world_size));
    }
    a.tasks.push_back(std::move(task));
  }
  return a;
}

}  // namespace

Result<ParsedAssignments> parse_assignments(const nlohmann::json& reply) {
  ParsedAssignments out;
  if (!reply.is_object()) return fail("reply", "expected a JSON object");
  auto it = reply.find("assignments");
  if (it == reply.end() || it->is_null()) return out;
  if (!it->is_array()) return fail("assignments", "expected a list");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& value = (*it)[i];
    auto a = node_assignment_from_json(value, fmt::format("assignments[{}]", i));
    if (a) {
      out.accepted.push_back(std::move(*a));
      continue;
    }
    RejectedAssignment rejected{.job = 0, .run = 0, .error = a.error()};
    if (value.is_object()) {
      (void)read(value, "", "job", rejected.job);
      (void)read(value, "", "run", rejected.run);
    }
    out.rejected.push_back(std::move(rejected));
  }
  return out;
}

Result<std::vector<NodeAssignment>> assignments_from_json(const nlohmann::json& reply) {
  auto parsed = parse_assignments(reply);
  if (!parsed) return std::unexpected(parsed.error());
  if (!parsed->rejected.empty()) return std::unexpected(parsed->rejected.front().error);
  return std::move(parsed->accepted);
}

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
