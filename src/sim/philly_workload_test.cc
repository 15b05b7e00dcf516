#include "sim/philly_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// Org "philly" with tenant "a" (queues q1, q2) and tenant "b" (the default queue).
TenantBook book() {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern("P100").has_value());
  TenantSpec a;
  a.name = "a";
  a.queues = {"q1", "q2"};
  TenantSpec b;
  b.name = "b";
  TenantsSpec spec;
  spec.orgs.push_back(OrgSpec{"philly", {}, {a, b}});
  auto result = TenantBook::create(std::move(spec), models);
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return std::move(*result);
}

// Three jobs in file order: the second is submitted first, the first and third at the same time.
PhillyTrace trace() {
  PhillyTrace t;
  t.jobs = {
      PhillyJob{"philly-0", 100, 3600, 8, "a"},
      PhillyJob{"philly-1", 0, 60, 16, "b"},
      PhillyJob{"philly-2", 100, 0, 1, "b"},
  };
  return t;
}

TEST(PhillyWorkloadTest, OrdersBySubmitThenFileIndexWithIdsEqualToIndices) {
  const TenantBook b = book();
  auto jobs = philly_workload(trace(), b, PhillyWorkloadOptions{});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 3U);
  EXPECT_EQ((*jobs)[0].name, "philly-1");
  EXPECT_EQ((*jobs)[1].name, "philly-0");
  EXPECT_EQ((*jobs)[2].name, "philly-2");
  for (std::size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].job.id.value, i);
  EXPECT_EQ((*jobs)[0].job.submit_time, 0);
  EXPECT_EQ((*jobs)[1].job.submit_time, 100);
  EXPECT_EQ((*jobs)[1].duration, 3600);
  EXPECT_EQ((*jobs)[2].duration, 0);
}

TEST(PhillyWorkloadTest, BuildsTrainingGangsOfOneGpuTasks) {
  const TenantBook b = book();
  PhillyWorkloadOptions options;
  options.cpu_per_gpu = 6000;
  options.memory_per_gpu = 1024;
  auto jobs = philly_workload(trace(), b, options);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();

  const Job& eight = (*jobs)[1].job;  // philly-0: 8 GPUs of tenant a
  EXPECT_EQ(b.tenant_name(eight.tenant), "a");
  EXPECT_EQ(b.queue_name(eight.queue), "q1");  // the tenant's first queue
  EXPECT_EQ(eight.job_class, JobClass::kTraining);
  EXPECT_EQ(eight.priority_class, 0);
  EXPECT_TRUE(eight.preemptible);
  EXPECT_EQ(eight.checkpoint_interval, 1800);
  EXPECT_EQ(eight.gang.task_count, 8);
  EXPECT_EQ(eight.gang.task.gpu_count, 1);
  EXPECT_EQ(eight.gang.task.milli_per_gpu, kMilliPerGpu);
  EXPECT_EQ(eight.gang.task.milli_cpu, 6000);
  EXPECT_EQ(eight.gang.task.memory_mib, 1024);
  EXPECT_TRUE(eight.gang.task.models.is_any());
  EXPECT_EQ(eight.gang.topology.level, TopologyLevel::kNode);
  EXPECT_EQ(eight.gang.topology.strength, TopologyStrength::kRequired);
  EXPECT_EQ(eight.total_milli_gpu(), 8000);

  const Job& sixteen = (*jobs)[0].job;  // philly-1: 16 GPUs, more than a node
  EXPECT_EQ(b.tenant_name(sixteen.tenant), "b");
  EXPECT_EQ(b.queue_name(sixteen.queue), "default");
  EXPECT_EQ(sixteen.gang.task_count, 16);
  EXPECT_EQ(sixteen.gang.topology.level, TopologyLevel::kLeaf);
  EXPECT_EQ(sixteen.gang.topology.strength, TopologyStrength::kPreferred);
}

TEST(PhillyWorkloadTest, CheckpointIntervalZeroMeansNone) {
  const TenantBook b = book();
  PhillyWorkloadOptions options;
  options.checkpoint_interval = 0;
  auto jobs = philly_workload(trace(), b, options);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  for (const SimJob& job : *jobs) EXPECT_FALSE(job.job.checkpoint_interval.has_value());
}

TEST(PhillyWorkloadTest, NodeSizeDecidesTheTopologyLevel) {
  const TenantBook b = book();
  PhillyWorkloadOptions options;
  options.gpus_per_node = 4;
  auto jobs = philly_workload(trace(), b, options);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  EXPECT_EQ((*jobs)[1].job.gang.topology.level, TopologyLevel::kLeaf);  // 8 > 4
  EXPECT_EQ((*jobs)[2].job.gang.topology.level, TopologyLevel::kNode);  // 1 <= 4
}

TEST(PhillyWorkloadTest, UnknownTenantNamesJobsAndTheTenant) {
  const TenantBook b = book();
  PhillyTrace t = trace();
  t.jobs[2].tenant = "zz";
  auto jobs = philly_workload(t, b, PhillyWorkloadOptions{});
  ASSERT_FALSE(jobs.has_value());
  EXPECT_EQ(jobs.error().field, "jobs");
  EXPECT_THAT(jobs.error().reason, HasSubstr("'zz'"));
  EXPECT_THAT(jobs.error().reason, HasSubstr("philly-2"));
}

TEST(PhillyWorkloadTest, RefusedJobsNameJobs) {
  const TenantBook b = book();
  PhillyWorkloadOptions options;
  options.cpu_per_gpu = -1;
  auto jobs = philly_workload(trace(), b, options);
  ASSERT_FALSE(jobs.has_value());
  EXPECT_EQ(jobs.error().field, "jobs");
  EXPECT_THAT(jobs.error().reason, HasSubstr("philly-1"));
}

TEST(AppendInferenceReplicasTest, AppendsOneGpuInferenceJobsWithContinuingIds) {
  const TenantBook b = book();
  auto jobs = philly_workload(trace(), b, PhillyWorkloadOptions{});
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  const std::vector<InferenceReplica> replicas = {{0, 600}, {600, 1200}};
  const TenantId tenant = *b.find_tenant("b");
  append_inference_replicas(*jobs, replicas, tenant, b.queues_of(tenant).front(),
                            PhillyWorkloadOptions{});
  ASSERT_EQ(jobs->size(), 5U);
  for (std::size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].job.id.value, i);
  const SimJob& second = (*jobs)[4];
  EXPECT_EQ((*jobs)[3].name, "inference-0");
  EXPECT_EQ(second.name, "inference-1");
  EXPECT_EQ(second.job.submit_time, 600);
  EXPECT_EQ(second.duration, 1200);
  EXPECT_EQ(second.job.tenant, tenant);
  EXPECT_EQ(second.job.job_class, JobClass::kInference);
  EXPECT_EQ(second.job.priority_class, 1000);
  EXPECT_FALSE(second.job.preemptible);
  EXPECT_FALSE(second.job.checkpoint_interval.has_value());
  EXPECT_EQ(second.job.gang.task_count, 1);
  EXPECT_EQ(second.job.gang.task.gpu_count, 1);
  EXPECT_EQ(second.job.gang.task.milli_per_gpu, kMilliPerGpu);
  EXPECT_EQ(second.job.gang.task.milli_cpu, 4000);
  EXPECT_EQ(second.job.gang.task.memory_mib, 32768);
  EXPECT_EQ(second.job.gang.topology.level, TopologyLevel::kNode);
  EXPECT_TRUE(validate_job(second.job).has_value());
}

}  // namespace
}  // namespace tidepool
