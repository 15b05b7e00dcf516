#include "agent/assignment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "agent/gpu_backend.h"
#include "api/test_assignments.h"

namespace tidepool {
namespace {

using test_support::gang_task_1;
using test_support::mig_notebook;

TEST(Assignment, TheTaskEnvironmentHasTidepoolsAndTorchrunsVariables) {
  const NodeAssignment a = gang_task_1();
  const TaskSetting setting{.agent_dir = "/opt/tidepool/bin",
                            .run_dir = "/var/lib/agent/runs/12/run-2/task-1",
                            .checkpoint_dir = "/ckpt/12",
                            .notice_file = "/run/notice",
                            .checkpoint_file = "/run/checkpoints.jsonl",
                            .step_file = "/run/steps.txt",
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
  EXPECT_EQ(vars["TIDEPOOL_STEP_REPORT"], "/run/steps.txt");
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

TEST(Assignment, ATaskOnAMigInstanceSeesThatInstanceAlone) {
  const NodeAssignment a = mig_notebook();
  TaskSetting setting;
  setting.gpu_names = {"GPU-a", "GPU-b", "GPU-c"};
  const auto env = task_environment(a, a.tasks[0], setting);
  std::map<std::string, std::string> vars(env.begin(), env.end());
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "MIG-4f1e2d3c-5b6a-5978-8695-a4b3c2d1e0f9");
  EXPECT_EQ(mig_instance(a.tasks[0]), (MigInstance{.profile = MigProfile::k3g40gb, .start = 4}));
  EXPECT_FALSE(mig_instance(gang_task_1().tasks[0]).has_value());
}

// The GPUs of a fake node: GPU 0 whole, GPUs 1 and 2 each in MIG mode with two 3g.40gb instances
// (packing puts the first at memory slice 4, the second at 0), GPU 3 in MIG mode with none.
std::vector<GpuInfo> fake_mig_node() {
  auto backend = make_gpu_backend("fake:1xA100,2xA100[3g.40gb+3g.40gb],1xH100[]", "n1");
  EXPECT_TRUE(backend.has_value()) << backend.error().message();
  auto gpus = (*backend)->discover();
  EXPECT_TRUE(gpus.has_value());
  return gpus.value_or(std::vector<GpuInfo>{});
}

AssignedTask on_instance(int gpu, MigProfile profile, int start, std::string uuid) {
  return AssignedTask{
      .index = 0,
      .gpus = {gpu},
      .mig = AssignedMig{.profile = profile, .start = start, .uuid = std::move(uuid)}};
}

TEST(Assignment, AMigInstanceMustBeOneTheAgentDiscovered) {
  const std::vector<GpuInfo> gpus = fake_mig_node();
  ASSERT_EQ(gpus.size(), 4U);
  ASSERT_EQ(gpus[1].mig.size(), 2U);
  EXPECT_EQ(gpus[1].mig[0].uuid, "MIG-fake-n1-1-0");
  EXPECT_EQ(gpus[1].mig[0].start, 4);
  EXPECT_EQ(gpus[1].mig[1].start, 0);
  // Each discovered instance, on its GPU with its uuid, profile and start.
  for (const GpuInfo& gpu : gpus) {
    for (const MigDevice& m : gpu.mig) {
      EXPECT_TRUE(check_mig_instance(on_instance(gpu.index, m.profile, m.start, m.uuid), gpus))
          << m.uuid;
    }
  }
  // A task on whole GPUs has nothing to check.
  EXPECT_TRUE(check_mig_instance(gang_task_1().tasks[0], gpus).has_value());

  const auto why = [&](const AssignedTask& task) {
    auto checked = check_mig_instance(task, gpus);
    EXPECT_FALSE(checked.has_value());
    return checked ? std::string() : checked.error().message();
  };
  const std::string gpu1_has =
      "; it has 3g.40gb at memory slice 4 (MIG-fake-n1-1-0), 3g.40gb at memory slice 0 "
      "(MIG-fake-n1-1-1)";
  EXPECT_EQ(why(on_instance(1, MigProfile::k3g40gb, 4, "MIG-other")),
            "GPU 1 has no 3g.40gb MIG instance at memory slice 4 with uuid MIG-other" + gpu1_has);
  // The right uuid with another start or profile than discovered.
  EXPECT_EQ(
      why(on_instance(1, MigProfile::k3g40gb, 0, "MIG-fake-n1-1-0")),
      "GPU 1 has no 3g.40gb MIG instance at memory slice 0 with uuid MIG-fake-n1-1-0" + gpu1_has);
  EXPECT_EQ(
      why(on_instance(1, MigProfile::k4g40gb, 0, "MIG-fake-n1-1-1")),
      "GPU 1 has no 4g.40gb MIG instance at memory slice 0 with uuid MIG-fake-n1-1-1" + gpu1_has);
  // Another GPU's instance.
  EXPECT_EQ(why(on_instance(2, MigProfile::k3g40gb, 4, "MIG-fake-n1-1-0")),
            "GPU 2 has no 3g.40gb MIG instance at memory slice 4 with uuid MIG-fake-n1-1-0; it "
            "has 3g.40gb at memory slice 4 (MIG-fake-n1-2-0), 3g.40gb at memory slice 0 "
            "(MIG-fake-n1-2-1)");
  EXPECT_EQ(why(on_instance(0, MigProfile::k1g10gb, 0, "MIG-x")),
            "GPU 0 has no 1g.10gb MIG instance at memory slice 0 with uuid MIG-x; it is not in MIG "
            "mode");
  EXPECT_EQ(why(on_instance(3, MigProfile::k1g10gb, 0, "MIG-x")),
            "GPU 3 has no 1g.10gb MIG instance at memory slice 0 with uuid MIG-x; it has no "
            "instances");
  EXPECT_EQ(why(on_instance(7, MigProfile::k1g10gb, 0, "MIG-x")),
            "GPU 7 has no 1g.10gb MIG instance at memory slice 0 with uuid MIG-x; the node has no "
            "GPU 7 (4 found)");
  AssignedTask two = on_instance(1, MigProfile::k3g40gb, 4, "MIG-fake-n1-1-0");
  two.gpus = {1, 2};
  EXPECT_EQ(why(two), "a task on a MIG instance has one GPU, got 2");
}

}  // namespace
}  // namespace tidepool
