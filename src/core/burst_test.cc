#include "core/burst.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace tidepool
