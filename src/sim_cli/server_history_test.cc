#include "sim_cli/server_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A job as GET /v1/jobs lists it, with the fields read_server_history needs; `transitions` are
// (state, at_ms) pairs.
nlohmann::json job_json(std::int64_t id, std::int64_t submitted_ms, std::string state,
                        const std::vector<std::pair<std::string, std::int64_t>>& transitions,
                        nlohmann::json spec = {{"name", "train"}, {"tenant", "vision"}}) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [to, at] : transitions) {
    list.push_back({{"state", to}, {"at_ms", at}, {"reason", ""}});
  }
  return {{"id", id},
          {"spec", std::move(spec)},
          {"state", std::move(state)},
          {"transitions", std::move(list)},
          {"submitted_ms", submitted_ms},
          {"started_ms", 0},
          {"ended_ms", 0}};
}

nlohmann::json reply(std::vector<nlohmann::json> jobs) {
  return {{"jobs", nlohmann::json(std::move(jobs))}};
}

constexpr HistoryWindow kAll{100'000, 0};

TEST(ReadServerHistoryTest, SumsTheRunsOfAnEndedJobRoundedUpToSeconds) {
  // Ran 1.0..5.0 s, preempted, ran again 8.0..10.5 s: 6.5 s of running.
  auto history = read_server_history(reply({job_json(7, 0, "succeeded",
                                                     {{"pending", 0},
                                                      {"running", 1000},
                                                      {"preempted", 5000},
                                                      {"pending", 5000},
                                                      {"running", 8000},
                                                      {"succeeded", 10'500}})}),
                                     kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  ASSERT_EQ(history->jobs.size(), 1U);
  EXPECT_EQ(history->jobs[0].id, 7);
  EXPECT_EQ(history->jobs[0].runtime, 7);
  EXPECT_TRUE(history->jobs[0].ran);
  EXPECT_FALSE(history->jobs[0].running);
}

TEST(ReadServerHistoryTest, FailedAndCancelledRunsEndAtTheirTransition) {
  auto history = read_server_history(
      reply({job_json(1, 0, "failed", {{"pending", 0}, {"running", 0}, {"failed", 3000}}),
             job_json(2, 0, "cancelled", {{"pending", 0}, {"running", 500}, {"cancelled", 2500}})}),
      kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  ASSERT_EQ(history->jobs.size(), 2U);
  EXPECT_EQ(history->jobs[0].runtime, 3);
  EXPECT_EQ(history->jobs[1].runtime, 2);
}

TEST(ReadServerHistoryTest, ARunningJobCountsUpToNow) {
  auto history = read_server_history(
      reply({job_json(3, 1000, "running", {{"pending", 1000}, {"running", 2000}})}),
      HistoryWindow{4500, 0});
  ASSERT_TRUE(history.has_value()) << history.error().message();
  ASSERT_EQ(history->jobs.size(), 1U);
  EXPECT_EQ(history->jobs[0].runtime, 3);  // 2.5 s rounded up
  EXPECT_TRUE(history->jobs[0].running);
  EXPECT_EQ(history->start_ms, 1000);
}

TEST(ReadServerHistoryTest, AnOpenRunOfAnEndedJobEndsAtEndedMs) {
  nlohmann::json job = job_json(4, 0, "succeeded", {{"pending", 0}, {"running", 1000}});
  job["ended_ms"] = 4000;
  auto history = read_server_history(reply({job}), kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  EXPECT_EQ(history->jobs[0].runtime, 3);
}

TEST(ReadServerHistoryTest, AJobThatNeverRanTakesItsEstimateElseItsMaxRuntimeElseIsLeftOut) {
  auto history = read_server_history(
      reply({job_json(1, 0, "pending", {{"pending", 0}},
                      {{"name", "a"}, {"tenant", "vision"}, {"runtime_estimate", "2h"}}),
             job_json(2, 0, "cancelled", {{"pending", 0}, {"cancelled", 100}},
                      {{"name", "b"}, {"tenant", "vision"}, {"max_runtime", 600}}),
             job_json(3, 0, "pending", {{"pending", 0}}),
             job_json(4, 0, "cancelled", {{"pending", 0}, {"cancelled", 100}})}),
      kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  ASSERT_EQ(history->jobs.size(), 2U);
  EXPECT_EQ(history->jobs[0].runtime, 7200);
  EXPECT_FALSE(history->jobs[0].ran);
  EXPECT_EQ(history->jobs[1].runtime, 600);
  EXPECT_THAT(history->unknown_runtime, ElementsAre(3, 4));
}

TEST(ReadServerHistoryTest, JobsSubmittedBeforeTheWindowAreCountedNotRead) {
  nlohmann::json old = {{"id", 1}, {"submitted_ms", 500}};  // nothing else: never read
  auto history = read_server_history(
      reply({old, job_json(2, 2000, "succeeded",
                           {{"pending", 2000}, {"running", 2000}, {"succeeded", 3000}})}),
      HistoryWindow{10'000, 1000});
  ASSERT_TRUE(history.has_value()) << history.error().message();
  EXPECT_EQ(history->before_window, 1);
  ASSERT_EQ(history->jobs.size(), 1U);
  EXPECT_EQ(history->jobs[0].id, 2);
  EXPECT_EQ(history->start_ms, 2000);
}

TEST(ReadServerHistoryTest, NoJobsIsAnEmptyHistory) {
  auto history = read_server_history(reply({}), kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  EXPECT_TRUE(history->jobs.empty());
  EXPECT_EQ(history->start_ms, 0);
}

TEST(ReadServerHistoryTest, ErrorsNameTheJobAndTheField) {
  const auto error = [](nlohmann::json value) {
    auto history = read_server_history(value, kAll);
    EXPECT_FALSE(history.has_value());
    return history ? std::string() : history.error().message();
  };
  EXPECT_THAT(error({{"items", 1}}), HasSubstr("jobs: missing or not a list"));
  EXPECT_THAT(error(nlohmann::json::array()), HasSubstr("jobs: expected an object"));
  nlohmann::json job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job.erase("id");
  EXPECT_THAT(error(reply({job})), HasSubstr("jobs[0] id: missing"));
  job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job.erase("submitted_ms");
  EXPECT_EQ(error(reply({job})), "job 7 submitted_ms: missing");
  job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job["submitted_ms"] = "yesterday";
  EXPECT_THAT(error(reply({job})), HasSubstr("job 7 submitted_ms: expected an integer"));
  job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job.erase("state");
  EXPECT_EQ(error(reply({job})), "job 7 state: missing");
  job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job.erase("spec");
  EXPECT_EQ(error(reply({job})), "job 7 spec: missing");
  job = job_json(7, 0, "succeeded", {{"pending", 0}}, {{"name", "a"}});
  EXPECT_THAT(error(reply({job})), HasSubstr("job 7 spec.tenant"));
  job = job_json(7, 0, "succeeded", {{"pending", 0}});
  job.erase("transitions");
  EXPECT_EQ(error(reply({job})), "job 7 transitions: missing");
  job = job_json(7, 0, "succeeded", {{"pending", 0}, {"running", 1}});
  job["transitions"][1].erase("at_ms");
  EXPECT_EQ(error(reply({job})), "job 7 transitions[1] at_ms: missing");
}

// Org "research" with tenant "vision" (queues default, detection) and tenant "search".
TenantBook book(const GpuModelCatalog& models) {
  TenantSpec vision;
  vision.name = "vision";
  vision.queues = {"default", "detection"};
  TenantSpec search;
  search.name = "search";
  TenantsSpec spec;
  spec.orgs.push_back(OrgSpec{"research", {}, {vision, search}});
  auto result = TenantBook::create(std::move(spec), models);
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return std::move(*result);
}

GpuModelCatalog catalog() {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern("H100").has_value());
  EXPECT_TRUE(models.intern("A100").has_value());
  return models;
}

TEST(HistoryWorkloadTest, OrdersBySubmitThenIdWithSubmitTimesFromTheEarliest) {
  const GpuModelCatalog models = catalog();
  const TenantBook b = book(models);
  const std::vector<std::pair<std::string, std::int64_t>> ran = {
      {"pending", 0}, {"running", 0}, {"succeeded", 1000}};
  auto history = read_server_history(reply({job_json(9, 1'700'000'090'500, "succeeded", ran),
                                            job_json(8, 1'700'000'000'000, "succeeded", ran),
                                            job_json(5, 1'700'000'090'500, "succeeded", ran)}),
                                     HistoryWindow{1'800'000'000'000, 0});
  ASSERT_TRUE(history.has_value()) << history.error().message();
  EXPECT_EQ(history->start_ms, 1'700'000'000'000);
  auto jobs = history_workload(*history, b, models);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 3U);
  EXPECT_EQ((*jobs)[0].name, "job-8");
  EXPECT_EQ((*jobs)[1].name, "job-5");
  EXPECT_EQ((*jobs)[2].name, "job-9");
  for (std::size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].job.id.value, i);
  EXPECT_EQ((*jobs)[0].job.submit_time, 0);
  EXPECT_EQ((*jobs)[1].job.submit_time, 90);  // 90.5 s, rounded down
  EXPECT_EQ((*jobs)[2].job.submit_time, 90);
}

TEST(HistoryWorkloadTest, KeepsTheSpecOfEachJob) {
  const GpuModelCatalog models = catalog();
  const TenantBook b = book(models);
  const nlohmann::json spec = {{"name", "big"},
                               {"tenant", "vision"},
                               {"queue", "detection"},
                               {"class", "inference"},
                               {"priority", 50},
                               {"tasks", 4},
                               {"gpus_per_task", 8},
                               {"gpu_model", {"A100"}},
                               {"cpu_milli_per_task", 8000},
                               {"memory_mib_per_task", 65536},
                               {"topology", {{"within", "leaf"}, {"mode", "required"}}},
                               {"runtime_estimate", "1h"},
                               {"max_runtime", "2h"},
                               {"preemptible", false},
                               {"checkpoint_interval", "30m"}};
  auto history = read_server_history(
      reply({job_json(1, 0, "succeeded", {{"pending", 0}, {"running", 0}, {"succeeded", 60'000}},
                      spec)}),
      kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  auto jobs = history_workload(*history, b, models);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 1U);
  const SimJob& sim = (*jobs)[0];
  EXPECT_EQ(sim.duration, 60);
  const Job& job = sim.job;
  EXPECT_EQ(b.tenant_name(job.tenant), "vision");
  EXPECT_EQ(b.queue_name(job.queue), "detection");
  EXPECT_EQ(job.job_class, JobClass::kInference);
  EXPECT_EQ(job.priority_class, 50);
  EXPECT_FALSE(job.preemptible);
  EXPECT_EQ(job.checkpoint_interval, Seconds{1800});
  EXPECT_EQ(job.runtime_estimate, Seconds{3600});
  EXPECT_EQ(job.caps.max_runtime, Seconds{7200});
  EXPECT_EQ(job.gang.task_count, 4);
  EXPECT_EQ(job.gang.task.gpu_count, 8);
  EXPECT_EQ(job.gang.task.milli_per_gpu, kMilliPerGpu);
  EXPECT_EQ(job.gang.task.milli_cpu, 8000);
  EXPECT_EQ(job.gang.task.memory_mib, 65536);
  EXPECT_FALSE(job.gang.task.models.accepts(*models.find("H100")));
  EXPECT_TRUE(job.gang.task.models.accepts(*models.find("A100")));
  EXPECT_EQ(job.gang.topology.level, TopologyLevel::kLeaf);
  EXPECT_EQ(job.gang.topology.strength, TopologyStrength::kRequired);
}

TEST(HistoryWorkloadTest, AFractionOfAGpuStaysAFraction) {
  const GpuModelCatalog models = catalog();
  const TenantBook b = book(models);
  auto history = read_server_history(
      reply({job_json(
          1, 0, "pending", {{"pending", 0}},
          {{"name", "nb"}, {"tenant", "search"}, {"gpu_milli", 250}, {"runtime_estimate", 60}})}),
      kAll);
  ASSERT_TRUE(history.has_value()) << history.error().message();
  auto jobs = history_workload(*history, b, models);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  EXPECT_TRUE((*jobs)[0].job.gang.task.is_fractional());
  EXPECT_EQ((*jobs)[0].job.gang.task.milli_per_gpu, 250);
  EXPECT_TRUE((*jobs)[0].job.gang.task.models.is_any());
}

TEST(HistoryWorkloadTest, UnknownTenantQueueOrModelNamesTheJob) {
  const GpuModelCatalog models = catalog();
  const TenantBook b = book(models);
  const auto error = [&](nlohmann::json spec) {
    auto history = read_server_history(
        reply({job_json(12, 0, "succeeded", {{"pending", 0}, {"running", 0}, {"succeeded", 1}},
                        std::move(spec))}),
        kAll);
    EXPECT_TRUE(history.has_value()) << history.error().message();
    auto jobs = history_workload(*history, b, models);
    EXPECT_FALSE(jobs.has_value());
    return jobs ? std::string() : jobs.error().message();
  };
  EXPECT_EQ(error({{"name", "a"}, {"tenant", "ads"}}),
            "job 12 tenant: 'ads' is not a tenant of the tenants file");
  EXPECT_EQ(error({{"name", "a"}, {"tenant", "search"}, {"queue", "ctr"}}),
            "job 12 queue: tenant 'search' has no queue 'ctr' in the tenants file");
  EXPECT_EQ(error({{"name", "a"}, {"tenant", "search"}, {"gpu_model", {"H100", "V100"}}}),
            "job 12 gpu_model[1]: the cluster has no GPU model 'V100'; models: H100, A100");
}

}  // namespace
}  // namespace tidepool
