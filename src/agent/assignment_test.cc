#include "agent/assignment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "api/test_assignments.h"

namespace tidepool {
namespace {

using test_support::gang_task_1;

TEST(Assignment, TheTaskEnvironmentHasTidepoolsAndTorchrunsVariables) {
  const NodeAssignment a = gang_task_1();
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
  AssignedTask cpu_only{.index = 0, .gpus = {}};
  const auto env = task_environment(gang_task_1(), cpu_only, TaskSetting{});
  std::map<std::string, std::string> vars(env.begin(), env.end());
  ASSERT_TRUE(vars.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "");
}

}  // namespace
}  // namespace tidepool
