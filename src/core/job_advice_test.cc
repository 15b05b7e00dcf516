#include "core/job_advice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// 8 GPUs: on two nodes of one leaf now, on one node's NVLink domain at best.
AdvicePlacement two_nodes_of_eight() {
  AdvicePlacement p;
  p.actual = RingSpan{8, GangSpan{2, 2, 1, 1, 0}, 1};
  p.ideal = RingSpan{8, GangSpan{1, 1, 1, 1, 0}, 1};
  p.links = LinkSpeeds{};  // leaf 200 Gbit/s = 25 GB/s a node
  return p;
}

// A step of 1 s: 600 ms computing, 400 ms all-reducing `bytes`.
MeasuredSteps step_of(std::int64_t bytes) {
  return MeasuredSteps{.gpus = 8,
                       .step_us = 1'000'000,
                       .compute_us = 600'000,
                       .allreduce_us = 400'000,
                       .allreduce_bytes = bytes};
}

// Bus bandwidth bytes x 2 x 7/8 / 0.4 s = 22.5 GB/s: 90% of the leaf link.
constexpr std::int64_t kSaturatingBytes = 5'142'857'143;

TEST(JobAdviceTest, AccumulatesJustEnoughToBringABandwidthBoundShareUnderTheTarget) {
  const JobAdvice advice =
      advise_job(step_of(kSaturatingBytes), two_nodes_of_eight(), {}, AdviceConfig{});
  ASSERT_TRUE(advice.accumulate) << advice.comm_note;
  const AccumulationAdvice& a = *advice.accumulate;
  // k x 600 x 100 >= 400 x 900: k = 6; 400 / (6 x 600 + 400) = 10%.
  EXPECT_EQ(a.steps, 6);
  EXPECT_EQ(a.comm_share_now_permille, 400);
  EXPECT_EQ(a.comm_share_expected_permille, 100);
  EXPECT_EQ(a.expected_us, 600'000 + 66'667);
  EXPECT_EQ(a.link.link, CommLink::kLeaf);
  EXPECT_EQ(a.bus_permille_of_link, 900);
  EXPECT_EQ(expected_gain_permille(a.now_us, a.expected_us), 1499);
}

TEST(JobAdviceTest, AdvisesNoAccumulationWhenTheAllReduceIsNotBandwidthBound) {
  // A ninth of the bytes in the same time: 10% of the link, latency or software bound.
  const JobAdvice advice =
      advise_job(step_of(571'428'572), two_nodes_of_eight(), {}, AdviceConfig{});
  EXPECT_FALSE(advice.accumulate);
  EXPECT_THAT(advice.comm_note, HasSubstr("not bandwidth-bound"));
  EXPECT_THAT(advice.comm_note, HasSubstr("10.0% of its leaf"));
}

TEST(JobAdviceTest, AdvisesNothingUnderTheTarget) {
  MeasuredSteps steps = step_of(kSaturatingBytes);
  steps.compute_us = 950'000;  // 5% communication
  const JobAdvice advice = advise_job(steps, std::nullopt, {}, AdviceConfig{});
  EXPECT_TRUE(advice.empty());
  EXPECT_THAT(advice.comm_note, HasSubstr("5.0% is at or under the target 10.0%"));
}

TEST(JobAdviceTest, TakesCommunicationFromTheAllReduceWhenComputeIsNotReported) {
  MeasuredSteps steps = step_of(kSaturatingBytes);
  steps.compute_us.reset();
  const JobAdvice advice = advise_job(steps, two_nodes_of_eight(), {}, AdviceConfig{});
  ASSERT_TRUE(advice.accumulate);
  EXPECT_EQ(advice.accumulate->compute_us, 600'000);
  EXPECT_EQ(advice.accumulate->comm_us, 400'000);
}

TEST(JobAdviceTest, WithoutPlacementOrBytesAdvisesOnTheShareAlone) {
  MeasuredSteps steps = step_of(0);
  steps.allreduce_bytes.reset();
  const JobAdvice advice = advise_job(steps, std::nullopt, {}, AdviceConfig{});
  ASSERT_TRUE(advice.accumulate);
  EXPECT_EQ(advice.accumulate->bus_bytes_per_second, 0);
  EXPECT_EQ(advice.accumulate->steps, 6);
}

TEST(JobAdviceTest, CapsTheAccumulation) {
  MeasuredSteps steps = step_of(kSaturatingBytes);
  steps.compute_us = 1'000;  // nearly all communication
  AdviceConfig config;
  config.max_accumulation_steps = 8;
  steps.allreduce_bytes.reset();
  const JobAdvice advice = advise_job(steps, std::nullopt, {}, config);
  ASSERT_TRUE(advice.accumulate);
  EXPECT_EQ(advice.accumulate->steps, 8);
  EXPECT_GT(advice.accumulate->comm_share_expected_permille, 100);
}

TEST(JobAdviceTest, ShowsTheCompactPlacementAndTheSlowdownPaidNow) {
  const AdvicePlacement placement = two_nodes_of_eight();
  const JobAdvice advice = advise_job(step_of(kSaturatingBytes), placement, {}, AdviceConfig{});
  ASSERT_TRUE(advice.compact);
  const PlacementAdvice& p = *advice.compact;
  EXPECT_EQ(p.actual_link.link, CommLink::kLeaf);
  EXPECT_EQ(p.ideal_link.link, CommLink::kNvlink);
  // Communication scales with the model's ratio: about 200 / 2400 of the leaf's time.
  const JobCommProfile profile{kSaturatingBytes, 0};
  const std::int64_t now = step_time(profile, placement.links, placement.actual).comm_us();
  const std::int64_t ideal = step_time(profile, placement.links, placement.ideal).comm_us();
  EXPECT_EQ(p.expected_us, 600'000 + (400'000 * ideal + now - 1) / now);
  EXPECT_LT(p.expected_us, 640'000);
  EXPECT_EQ(p.now_us, 1'000'000);
}

TEST(JobAdviceTest, NoPlacementAdviceOnTheCompactSpan) {
  AdvicePlacement placement = two_nodes_of_eight();
  placement.actual = placement.ideal;
  const JobAdvice advice = advise_job(step_of(kSaturatingBytes), placement, {}, AdviceConfig{});
  EXPECT_FALSE(advice.compact);
}

// A GPU is idle when low for the window; one low only now is not, but counts in the mean as it is.
TEST(JobAdviceTest, CountsIdleGpus) {
  const std::vector<GpuUse> gpus{{0, true}, {5, true}, {90, false}, {50, false}, {2, false}};
  const JobAdvice advice = advise_job(MeasuredSteps{}, std::nullopt, gpus, AdviceConfig{});
  ASSERT_TRUE(advice.idle);
  EXPECT_EQ(advice.idle->idle_gpus, 2);
  EXPECT_EQ(advice.idle->gpus, 5);
  EXPECT_EQ(advice.idle->mean_utilization_percent, 29);
  const std::vector<GpuUse> busy{{40, true}, {60, true}, {1, false}};
  EXPECT_FALSE(advise_job(MeasuredSteps{}, std::nullopt, busy, AdviceConfig{}).idle);
}

TEST(JobAdviceTest, SaysWhyThereIsNoCommunicationAdvice) {
  MeasuredSteps steps;
  steps.gpus = 1;
  steps.step_us = 5;
  EXPECT_THAT(advise_job(steps, std::nullopt, {}, {}).comm_note, HasSubstr("one GPU"));
  steps.gpus = 4;
  EXPECT_THAT(advise_job(steps, std::nullopt, {}, {}).comm_note, HasSubstr("neither"));
  steps.step_us = 0;
  EXPECT_THAT(advise_job(steps, std::nullopt, {}, {}).comm_note, HasSubstr("no step times"));
}

TEST(JobAdviceTest, WritesEachAdviceWithItsNumbers) {
  std::vector<GpuUse> gpus(8, GpuUse{80, false});
  gpus[0] = {0, true};
  const JobAdvice advice =
      advise_job(step_of(kSaturatingBytes), two_nodes_of_eight(), gpus, AdviceConfig{});
  const std::vector<std::string> lines = advice_lines(advice);
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_THAT(lines[0], HasSubstr("over 6 micro-batches"));
  EXPECT_THAT(lines[0], HasSubstr("40.0% of a step now, 10.0% then"));
  EXPECT_THAT(lines[0], HasSubstr("22.5 GB/s, 90.0% of its leaf (200 Gbit/s) link"));
  EXPECT_THAT(lines[1], HasSubstr("8 GPUs on 2 nodes"));
  EXPECT_THAT(lines[1], HasSubstr("8 GPUs on 1 node in 1 NVLink domain"));
  EXPECT_THAT(lines[2], HasSubstr("1 of its 8 GPUs idle"));
}

TEST(JobAdviceTest, TheModelsMfuRisesWithEachAdvice) {
  const AdvicePlacement placement = two_nodes_of_eight();
  const JobCommProfile profile{kSaturatingBytes, 600'000};
  const AdvisedMfu mfu = advised_mfu(profile, placement, AdviceConfig{});
  const StepTime now = step_time(profile, placement.links, placement.actual);
  EXPECT_DOUBLE_EQ(mfu.now, now.est_mfu());
  EXPECT_GT(mfu.accumulate, mfu.now);
  EXPECT_GT(mfu.compact, mfu.now);
  EXPECT_GE(mfu.both, mfu.compact);
  EXPECT_LE(mfu.both, kMfuWithoutComm);
  // On the compact span already: nothing to gain from placement.
  AdvicePlacement compact = placement;
  compact.actual = compact.ideal;
  const AdvisedMfu there = advised_mfu(profile, compact, AdviceConfig{});
  EXPECT_DOUBLE_EQ(there.compact, there.now);
  EXPECT_DOUBLE_EQ(there.both, there.accumulate);
}

TEST(JobAdviceTest, RefusesABadConfigNamingTheField) {
  AdviceConfig config;
  EXPECT_TRUE(validate(config).has_value());
  config.comm_share_target_permille = 0;
  ASSERT_FALSE(validate(config).has_value());
  EXPECT_EQ(validate(config).error().field, "comm_share_target_permille");
  config = AdviceConfig{};
  config.max_accumulation_steps = 1;
  EXPECT_EQ(validate(config).error().field, "max_accumulation_steps");
}

}  // namespace
}  // namespace tidepool
