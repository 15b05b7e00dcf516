#include "core/burst.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "core/job.h"
#include "core/scheduler.h"
#include "core/test_pool.h"
#include "core/test_units.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kCredit;
using test_support::kH100;
using ::testing::HasSubstr;

std::vector<BurstOffer> offers() {
  BurstOffer on_demand{.name = "od",
                       .provider = "cloud",
                       .model = kH100,
                       .spot = false,
                       .price_per_gpu_hour = 4 * kCredit,
                       .startup_delay = 600,
                       .max_gpus = 16,
                       .interruption_per_hour = 0};
  BurstOffer spot = on_demand;
  spot.name = "spot";
  spot.spot = true;
  spot.price_per_gpu_hour = 2 * kCredit;
  spot.interruption_per_hour = 50'000;
  return {on_demand, spot};
}

BurstCandidate candidate(std::uint32_t id, Seconds waited, std::int64_t gpus = 8) {
  return BurstCandidate{.job = JobId{id},
                        .tenant = TenantId{0},
                        .models = ModelSet::only(kH100),
                        .gpus = gpus,
                        .waited = waited,
                        .predicted_runtime = 3000,
                        .preemptible = false,
                        .checkpoints = false};
}

TEST(Burst, OnlyJobsPastTheThresholdGoAndNonPreemptibleOnesNeverToSpot) {
  const BurstPolicy policy{.threshold = 3600};
  const std::vector<BurstCandidate> jobs = {candidate(1, 3599), candidate(2, 3600)};
  const BurstChoice choice = choose_bursts(jobs, offers(), {}, {}, policy);
  ASSERT_EQ(choice.decisions.size(), 1U);
  EXPECT_EQ(choice.decisions[0].job, JobId{2});
  EXPECT_EQ(choice.decisions[0].offer, 0U);  // on demand: the job cannot be preempted
  // 8 GPUs x (3000 + 600) s x 4 per GPU-hour = 32.00
  EXPECT_EQ(choice.decisions[0].estimated_cost, 32 * kCredit);
}

TEST(Burst, PreemptibleJobsThatCheckpointTakeTheCheaperSpot) {
  BurstCandidate job = candidate(1, 7200);
  job.preemptible = true;
  job.checkpoints = true;
  const BurstChoice choice = choose_bursts(std::vector{job}, offers(), {}, {}, {});
  ASSERT_EQ(choice.decisions.size(), 1U);
  EXPECT_EQ(choice.decisions[0].offer, 1U);
  EXPECT_EQ(choice.decisions[0].estimated_cost, 16 * kCredit);
  job.checkpoints = false;
  EXPECT_EQ(choose_bursts(std::vector{job}, offers(), {}, {}, {}).decisions[0].offer, 0U);
}

TEST(Burst, LongestWaitFirstWithinTheOffersRoom) {
  const std::vector<BurstCandidate> jobs = {candidate(1, 8000), candidate(2, 9000),
                                            candidate(3, 9000)};
  const std::vector<std::int64_t> rented = {0, 0};
  const BurstChoice choice = choose_bursts(jobs, offers(), rented, {}, {});
  ASSERT_EQ(choice.decisions.size(), 2U);
  EXPECT_EQ(choice.decisions[0].job, JobId{2});
  EXPECT_EQ(choice.decisions[1].job, JobId{3});
  ASSERT_EQ(choice.refusals.size(), 1U);
  EXPECT_EQ(choice.refusals[0].job, JobId{1});
  EXPECT_THAT(choice.refusals[0].reason, HasSubstr("has 0 GPUs free, the job needs 8"));
}

TEST(Burst, ABudgetLimitsWhatItsTenantRentsAndNoBudgetLimitsNothing) {
  const std::vector<BurstCandidate> jobs = {candidate(1, 9000), candidate(2, 8000)};
  const std::vector<std::optional<Micros>> budget = {40 * kCredit};
  const BurstChoice choice = choose_bursts(jobs, offers(), {}, budget, {});
  ASSERT_EQ(choice.decisions.size(), 1U);
  ASSERT_EQ(choice.refusals.size(), 1U);
  EXPECT_EQ(choice.refusals[0].reason,
            "budget: the tenant has 8.00 left, the cheapest offer needs 32.00");
  const std::vector<std::optional<Micros>> none = {std::nullopt};
  EXPECT_EQ(choose_bursts(jobs, offers(), {}, none, {}).decisions.size(), 2U);
}

TEST(Burst, AJobOfAnotherModelHasNoOffer) {
  BurstCandidate job = candidate(1, 9000);
  job.models = ModelSet::only(kA100);
  const BurstChoice choice = choose_bursts(std::vector{job}, offers(), {}, {}, {});
  EXPECT_TRUE(choice.decisions.empty());
  ASSERT_EQ(choice.refusals.size(), 1U);
  EXPECT_THAT(choice.refusals[0].reason, HasSubstr("no offer rents"));
}

TEST(Burst, ValidatesOffersAndPolicy) {
  EXPECT_TRUE(validate_burst(offers(), {}).has_value());
  auto bad = offers();
  bad[1].name = "od";
  EXPECT_EQ(validate_burst(bad, {}).error().field, "offers[1].name");
  bad = offers();
  bad[0].interruption_per_hour = 1;
  EXPECT_EQ(validate_burst(bad, {}).error().field, "offers[0].interruption_per_hour");
  bad = offers();
  bad[0].max_gpus = 0;
  EXPECT_EQ(validate_burst(bad, {}).error().field, "offers[0].max_gpus");
  EXPECT_EQ(validate_burst(offers(), BurstPolicy{.threshold = 0}).error().field, "threshold");
}

TEST(Burst, RentedCostRoundsHalfAwayFromZero) {
  EXPECT_EQ(rented_cost(1, 1, 1800), 1);  // 0.5 micro-credits
  EXPECT_EQ(rented_cost(2, 3600, 3 * kCredit), 6 * kCredit);
}

// --- the candidates ------------------------------------------------------------------------------

// A job of `tasks` tasks of `gpus` GPUs (`milli` each) of tenant A, not yet submitted.
Job waiting_job(std::uint32_t id, int tasks = 1, int gpus = 1, std::int64_t milli = 1000,
                std::optional<Seconds> estimate = std::nullopt) {
  Job job;
  job.id = JobId{id};
  job.tenant = TenantId{0};
  job.queue = QueueId{0};
  job.runtime_estimate = estimate;
  job.gang.task_count = tasks;
  job.gang.task = *make_task_shape(gpus, gpus == 0 ? 0 : milli, 1000, 1024);
  job.gang.topology = {TopologyLevel::kSpine, TopologyStrength::kPreferred};
  return job;
}

Scheduler make_scheduler(Seconds default_runtime = 5400) {
  auto config = scheduler_policy("fifo-firstfit");
  EXPECT_TRUE(config.has_value());
  config->predictor.default_runtime = default_runtime;
  auto s = Scheduler::create(
      test_support::make_test_pool(),
      test_support::two_tenant_book(test_support::one_model_catalog("H100"), 8), *config);
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return std::move(*s);
}

TEST(BurstCandidates, RentOneWholeGpuPerTaskGpu) {
  EXPECT_EQ(rented_gpus(waiting_job(0, 2, 4)), 8);
  EXPECT_EQ(rented_gpus(waiting_job(0, 3, 1, 500)), 3);  // a fraction rents a whole GPU
  EXPECT_EQ(rented_gpus(waiting_job(0, 2, 0)), 0);
}

TEST(BurstCandidates, JobsPastTheThresholdWithGpusLongestWaitFirst) {
  const Scheduler s = make_scheduler();
  const std::vector<Job> jobs = {waiting_job(5), waiting_job(3),       waiting_job(4),
                                 waiting_job(1), waiting_job(2, 1, 0), waiting_job(6, 2, 4)};
  const std::vector<WaitingJob> waiting = {{&jobs[0], 4000}, {&jobs[1], 5000}, {&jobs[2], 5000},
                                           {&jobs[3], 3599}, {&jobs[4], 9000}, {&jobs[5], 3600}};
  const auto candidates = burst_candidates(waiting, s, BurstPolicy{.threshold = 3600});
  std::vector<std::uint32_t> ids;
  for (const BurstCandidate& c : candidates) ids.push_back(c.job.value);
  // Job 1 has not waited long enough; job 2 has no GPUs; ties on the wait go by id.
  EXPECT_EQ(ids, (std::vector<std::uint32_t>{3, 4, 5, 6}));
  EXPECT_EQ(candidates[0].waited, 5000);
  EXPECT_EQ(candidates[3].gpus, 8);
  EXPECT_EQ(candidates[3].tenant, TenantId{0});
  EXPECT_TRUE(candidates[3].models.accepts(kH100));
}

TEST(BurstCandidates, AtMostTheLongestWaitingThousand) {
  const Scheduler s = make_scheduler();
  std::vector<Job> jobs;
  for (std::uint32_t i = 0; i < kMaxBurstCandidates + 5; ++i) jobs.push_back(waiting_job(i));
  std::vector<WaitingJob> waiting;
  for (const Job& job : jobs) waiting.push_back({&job, 10'000 + job.id.value});
  const auto candidates = burst_candidates(waiting, s, BurstPolicy{.threshold = 1});
  ASSERT_EQ(candidates.size(), kMaxBurstCandidates);
  EXPECT_EQ(candidates.front().job.value, kMaxBurstCandidates + 4);
  EXPECT_EQ(candidates.back().job.value, 5U);
}

TEST(BurstCandidates, RuntimeIsTheSchedulersPredictionElseTheEstimateElseItsDefault) {
  Scheduler s = make_scheduler(/*default_runtime=*/5400);
  // Three finished one-GPU jobs of 100 s teach the predictor.
  for (std::uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.submit(waiting_job(i), 0));
    ASSERT_EQ(s.pass(0).started.size(), 1U);
    ASSERT_TRUE(s.finish(JobId{i}, 100, 100));
  }
  // Submitted with an estimate of 5000 s: predicted 100 s (the learned figure is lower).
  const Job submitted = waiting_job(10, 1, 1, 1000, 5000);
  ASSERT_TRUE(s.submit(submitted, 100));
  ASSERT_EQ(s.prediction(submitted.id)->runtime, 100);
  // Unknown to the scheduler: the estimate, else the predictor's default.
  const Job estimated = waiting_job(11, 1, 1, 1000, 5000);
  const Job unknown = waiting_job(12);
  const std::vector<WaitingJob> waiting = {{&submitted, 30}, {&estimated, 20}, {&unknown, 10}};
  const auto candidates = burst_candidates(waiting, s, BurstPolicy{.threshold = 1});
  ASSERT_EQ(candidates.size(), 3U);
  EXPECT_EQ(candidates[0].predicted_runtime, 100);
  EXPECT_EQ(candidates[1].predicted_runtime, 5000);
  EXPECT_EQ(candidates[2].predicted_runtime, 5400);
}

}  // namespace
}  // namespace tidepool
