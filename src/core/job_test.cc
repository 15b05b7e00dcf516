#include "core/job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/tenants.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// A valid job: 2 tasks x 8 whole GPUs under one leaf switch.
Job training_job() {
  Job job;
  job.id = JobId{7};
  job.tenant = TenantId{1};
  job.queue = QueueId{2};
  job.job_class = JobClass::kTraining;
  job.priority_class = 10;
  job.preemptible = true;
  job.checkpoint_interval = 1800;
  job.runtime_estimate = 7200;
  job.submit_time = 100;
  job.deadline = 100'000;
  job.gang.task_count = 2;
  job.gang.task = TaskShape{.gpu_count = 8,
                            .milli_per_gpu = 1000,
                            .milli_cpu = 64'000,
                            .memory_mib = 512 * 1024,
                            .models = ModelSet::any()};
  job.gang.topology = {TopologyLevel::kLeaf, TopologyStrength::kRequired};
  job.caps.max_gpus = 16;
  job.caps.max_runtime = 86'400;
  return job;
}

// The field named by make_job's error, or "" when the job is valid.
std::string failing_job_field(const Job& job) {
  auto made = make_job(job);
  return made ? std::string() : made.error().field;
}

TEST(JobTest, ValidJobIsReturnedUnchanged) {
  auto job = make_job(training_job());
  ASSERT_TRUE(job.has_value()) << job.error().message();
  EXPECT_EQ(job->id, JobId{7});
  EXPECT_EQ(job->gang.task_count, 2);
  EXPECT_EQ(job->total_milli_gpu(), 16'000);
  EXPECT_EQ(job->checkpoint_interval, 1800);
}

TEST(JobTest, OptionalFiguresMayBeAbsent) {
  Job job = training_job();
  job.checkpoint_interval.reset();
  job.runtime_estimate.reset();
  job.deadline.reset();
  job.caps = {};
  EXPECT_EQ(failing_job_field(job), "");
}

TEST(JobTest, FractionalAndCpuOnlyTasks) {
  Job half = training_job();
  half.gang.task_count = 1;
  half.gang.task.gpu_count = 1;
  half.gang.task.milli_per_gpu = 500;
  half.caps.max_gpus = 1;
  EXPECT_EQ(failing_job_field(half), "");
  EXPECT_EQ(half.total_milli_gpu(), 500);

  Job cpu = training_job();
  cpu.gang.task.gpu_count = 0;
  cpu.gang.task.milli_per_gpu = 0;
  EXPECT_EQ(failing_job_field(cpu), "");
  EXPECT_EQ(cpu.total_milli_gpu(), 0);
}

TEST(JobTest, GangErrorsNameTheField) {
  Job job = training_job();
  job.gang.task_count = 0;
  EXPECT_EQ(failing_job_field(job), "task_count");
  job.gang.task_count = kMaxGangTasks + 1;
  EXPECT_EQ(failing_job_field(job), "task_count");

  job = training_job();
  job.gang.task.gpu_count = kMaxGpusPerNode + 1;
  auto made = make_job(job);
  ASSERT_FALSE(made.has_value());
  EXPECT_EQ(made.error().field, "gpus_per_task");
  EXPECT_THAT(made.error().reason, HasSubstr("got 17"));
  job.gang.task.gpu_count = -1;
  EXPECT_EQ(failing_job_field(job), "gpus_per_task");

  job = training_job();
  job.gang.task.milli_per_gpu = 500;  // a fraction with 8 GPUs
  EXPECT_EQ(failing_job_field(job), "milli_per_gpu");
  job.gang.task.milli_per_gpu = 1001;
  EXPECT_EQ(failing_job_field(job), "milli_per_gpu");

  job = training_job();  // a fraction in a gang of 2
  job.gang.task.gpu_count = 1;
  job.gang.task.milli_per_gpu = 250;
  EXPECT_EQ(failing_job_field(job), "task_count");

  job = training_job();
  job.gang.task.milli_cpu = -1;
  EXPECT_EQ(failing_job_field(job), "cpu_milli");
  job = training_job();
  job.gang.task.memory_mib = -1;
  EXPECT_EQ(failing_job_field(job), "memory_mib");
  job = training_job();
  job.gang.topology.level = static_cast<TopologyLevel>(9);
  EXPECT_EQ(failing_job_field(job), "topology");
}

TEST(JobTest, MaxGpusCapNamesTheNumbers) {
  Job job = training_job();
  job.caps.max_gpus = 8;
  auto made = make_job(job);
  ASSERT_FALSE(made.has_value());
  EXPECT_EQ(made.error().field, "max_gpus");
  EXPECT_EQ(made.error().message(), "max_gpus: job asks 16 GPUs, cap is 8");

  job.caps.max_gpus = 0;
  EXPECT_EQ(failing_job_field(job), "max_gpus");
  job.caps.max_gpus = std::int64_t{1} << 62;  // far above any gang: never binding, no overflow
  EXPECT_EQ(failing_job_field(job), "");
}

TEST(JobTest, TimeErrorsNameTheField) {
  Job job = training_job();
  job.checkpoint_interval = 0;
  EXPECT_EQ(failing_job_field(job), "checkpoint_interval");

  job = training_job();
  job.runtime_estimate = -5;
  EXPECT_EQ(failing_job_field(job), "runtime_estimate");
  job.runtime_estimate = 90'000;  // above max_runtime 86'400
  auto made = make_job(job);
  ASSERT_FALSE(made.has_value());
  EXPECT_EQ(made.error().field, "runtime_estimate");
  EXPECT_THAT(made.error().reason, HasSubstr("86400"));

  job = training_job();
  job.caps.max_runtime = 0;
  EXPECT_EQ(failing_job_field(job), "max_runtime");

  job = training_job();
  job.deadline = job.submit_time;
  EXPECT_EQ(failing_job_field(job), "deadline");

  job = training_job();
  job.submit_time = -1;
  job.deadline.reset();
  EXPECT_EQ(failing_job_field(job), "submit_time");
}

TEST(JobTest, PriorityAndClass) {
  Job job = training_job();
  job.priority_class = kMaxPriorityClass + 1;
  EXPECT_EQ(failing_job_field(job), "priority_class");
  job.priority_class = -kMaxPriorityClass;
  EXPECT_EQ(failing_job_field(job), "");
  job.job_class = static_cast<JobClass>(4);
  EXPECT_EQ(failing_job_field(job), "class");
}

TEST(JobTest, ClassNamesRoundTrip) {
  for (JobClass c : {JobClass::kTraining, JobClass::kInference, JobClass::kDev, JobClass::kBatch}) {
    auto parsed = parse_job_class(job_class_name(c));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(job_class_name(JobClass::kInference), "inference");
  auto bad = parse_job_class("Training");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "class");
}

TEST(JobTest, TenancyIsCheckedAgainstTheBook) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("H100").has_value());
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  org.tenants.push_back(TenantSpec{.name = "search", .weight = 1, .quotas = {}, .queues = {"a"}});
  org.tenants.push_back(TenantSpec{.name = "ads", .weight = 2, .quotas = {}, .queues = {"b", "c"}});
  spec.orgs.push_back(org);
  auto book = TenantBook::create(spec, models);
  ASSERT_TRUE(book.has_value()) << book.error().message();

  Job job = training_job();
  job.tenant = TenantId{1};
  job.queue = QueueId{2};  // ads/c
  EXPECT_TRUE(validate_job_tenancy(job, *book).has_value());
  job.queue = QueueId{0};  // search/a
  auto wrong = validate_job_tenancy(job, *book);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.error().field, "queue");
  EXPECT_THAT(wrong.error().reason, HasSubstr("search"));
  job.tenant = TenantId{5};
  EXPECT_EQ(validate_job_tenancy(job, *book).error().field, "tenant");
  job.tenant = TenantId{0};
  job.queue = QueueId{9};
  EXPECT_EQ(validate_job_tenancy(job, *book).error().field, "queue");
}

}  // namespace
}  // namespace tidepool
