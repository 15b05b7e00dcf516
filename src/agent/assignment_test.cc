#include "agent/assignment.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

nlohmann::json reply_with(nlohmann::json assignment) {
  return {{"node", "node-1"}, {"assignments", nlohmann::json::array({std::move(assignment)})}};
}

nlohmann::json gang_task_1() {
  return {{"job", 12},
          {"run", 2},
          {"name", "bert"},
          {"tenant", "vision"},
          {"world_size", 4},
          {"tasks", {{{"index", 1}, {"gpus", {4, 5}}}}},
          {"master_addr", "10.0.0.7"},
          {"master_port", 20012},
          {"command", {"python", "train.py"}},
          {"env", {{"EPOCHS", "3"}, {"RANK", "99"}, {"PATH", "/opt/bin"}}},
          {"working_dir", "/data"},
          {"cpu_milli_per_task", 4000},
          {"memory_mib_per_task", 1024},
          {"checkpoints", true},
          {"resume_from", "/ckpt/12/step-40"}};
}

TEST(Assignment, ReadsTheHeartbeatReply) {
  auto read = assignments_from_json(reply_with(gang_task_1()));
  ASSERT_TRUE(read) << read.error().message();
  ASSERT_EQ(read->size(), 1U);
  const NodeAssignment& a = read->front();
  EXPECT_EQ(a.job, 12);
  EXPECT_EQ(a.run, 2);
  EXPECT_EQ(a.world_size, 4);
  ASSERT_EQ(a.tasks.size(), 1U);
  EXPECT_EQ(a.tasks[0].index, 1);
  EXPECT_EQ(a.tasks[0].gpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(a.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_TRUE(a.checkpoints);
  EXPECT_EQ(a.resume_from, "/ckpt/12/step-40");
  EXPECT_EQ(a.memory_mib_per_task, 1024);
}

TEST(Assignment, NoAssignmentsIsAnEmptyList) {
  auto read = assignments_from_json({{"node", "node-1"}, {"jobs", nlohmann::json::array()}});
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->empty());
}

TEST(Assignment, RefusesMalformedEntriesNamingTheField) {
  const auto error_field = [](nlohmann::json assignment) {
    auto read = assignments_from_json(reply_with(std::move(assignment)));
    return read ? std::string("accepted") : read.error().field;
  };
  auto bad_type = gang_task_1();
  bad_type["world_size"] = "four";
  EXPECT_EQ(error_field(bad_type), "assignments[0].world_size");
  auto no_command = gang_task_1();
  no_command["command"] = nlohmann::json::array();
  EXPECT_EQ(error_field(no_command), "assignments[0].command");
  auto bad_index = gang_task_1();
  bad_index["tasks"][0]["index"] = 4;
  EXPECT_EQ(error_field(bad_index), "assignments[0].tasks[0].index");
  auto no_job = gang_task_1();
  no_job.erase("job");
  EXPECT_EQ(error_field(no_job), "assignments[0].job");
  EXPECT_FALSE(assignments_from_json(nlohmann::json::array()));
}

// One job without a command (or with a field of the wrong type) is rejected on its own, with the
// job it is about; the others in the reply are kept.
TEST(Assignment, ABadAssignmentIsRejectedAloneAndTheOthersKept) {
  auto no_command = gang_task_1();
  no_command["job"] = 7;
  no_command["run"] = 3;
  no_command.erase("command");
  auto empty_command = gang_task_1();
  empty_command["job"] = 8;
  empty_command["command"] = nlohmann::json::array();
  const nlohmann::json reply = {
      {"assignments", {no_command, gang_task_1(), empty_command, "not an object"}}};
  auto parsed = parse_assignments(reply);
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_EQ(parsed->accepted.size(), 1U);
  EXPECT_EQ(parsed->accepted[0].job, 12);
  ASSERT_EQ(parsed->rejected.size(), 3U);
  EXPECT_EQ(parsed->rejected[0].job, 7);
  EXPECT_EQ(parsed->rejected[0].run, 3);
  EXPECT_EQ(parsed->rejected[0].error.field, "assignments[0].command");
  EXPECT_EQ(parsed->rejected[0].error.reason, "the job has no command to run");
  EXPECT_EQ(parsed->rejected[1].job, 8);
  EXPECT_EQ(parsed->rejected[1].error.field, "assignments[2].command");
  EXPECT_EQ(parsed->rejected[2].job, 0);
  EXPECT_EQ(parsed->rejected[2].error.field, "assignments[3]");
  EXPECT_FALSE(parse_assignments(nlohmann::json::array()));
  EXPECT_FALSE(parse_assignments({{"assignments", "x"}}));
}

TEST(Assignment, TheTaskEnvironmentHasTidepoolsAndTorchrunsVariables) {
  auto read = assignments_from_json(reply_with(gang_task_1()));
  ASSERT_TRUE(read);
  const NodeAssignment& a = read->front();
  const TaskSetting setting{.agent_dir = "/opt/tidepool/bin",
                            .run_dir = "/var/lib/agent/runs/12/run-2/task-1",
                            .checkpoint_dir = "/ckpt/12",
                            .notice_file = "/run/notice",
                            .checkpoint_file = "/run/checkpoints.jsonl",
                            .server_url = "http://server:8470",
                            .gpu_names = {"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e", "GPU-f"}};
  const auto env = task_environment(a, a.tasks[0], setting);
  std::map<std::string, std::string> vars(env.begin(), env.end());
  EXPECT_EQ(vars.size(), env.size()) << "a variable is given twice";
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "GPU-e,GPU-f");
  EXPECT_EQ(vars["RANK"], "1");  // the job's own RANK is overridden
  EXPECT_EQ(vars["WORLD_SIZE"], "4");
  EXPECT_EQ(vars["MASTER_ADDR"], "10.0.0.7");
  EXPECT_EQ(vars["MASTER_PORT"], "20012");
  EXPECT_EQ(vars["TIDEPOOL_JOB_ID"], "12");
  EXPECT_EQ(vars["TIDEPOOL_TASK_INDEX"], "1");
  EXPECT_EQ(vars["TIDEPOOL_RUN"], "2");
  EXPECT_EQ(vars["TIDEPOOL_CHECKPOINT_DIR"], "/ckpt/12");
  EXPECT_EQ(vars["TIDEPOOL_RESUME_FROM"], "/ckpt/12/step-40");
  EXPECT_EQ(vars["TIDEPOOL_NOTICE_FILE"], "/run/notice");
  EXPECT_EQ(vars["TIDEPOOL_CHECKPOINT_REPORT"], "/run/checkpoints.jsonl");
  EXPECT_EQ(vars["EPOCHS"], "3");
  EXPECT_EQ(vars["PATH"], "/opt/bin");  // the job's own PATH is kept
  EXPECT_EQ(vars["HOME"], setting.run_dir);

  NodeAssignment first_run = a;
  first_run.resume_from.clear();
  first_run.env.clear();
  const auto fresh = task_environment(first_run, a.tasks[0], setting);
  std::map<std::string, std::string> fresh_vars(fresh.begin(), fresh.end());
  EXPECT_FALSE(fresh_vars.contains("TIDEPOOL_RESUME_FROM"));
  EXPECT_EQ(fresh_vars["PATH"], "/opt/tidepool/bin:/usr/local/bin:/usr/bin:/bin");
}

TEST(Assignment, ATaskWithoutGpusSeesNone) {
  auto read = assignments_from_json(reply_with(gang_task_1()));
  ASSERT_TRUE(read);
  AssignedTask cpu_only{.index = 0, .gpus = {}};
  const auto env = task_environment(read->front(), cpu_only, TaskSetting{});
  std::map<std::string, std::string> vars(env.begin(), env.end());
  ASSERT_TRUE(vars.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "");
}

}  // namespace
}  // namespace tidepool
