#include "sim/inference_generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr Seconds kHour = 3600;
constexpr Seconds kDay = 86400;

// Three days of the default service, from sim time 0 = midnight.
InferenceServiceSpec three_days() {
  InferenceServiceSpec spec;
  spec.end = 3 * kDay;
  return spec;
}

// The integral of the generated count over [start, end), in GPU-seconds.
std::int64_t count_integral(const InferenceServiceSpec& spec) {
  std::int64_t total = 0;
  for (Seconds b = spec.start; b < spec.end;) {
    const Seconds next = std::min(spec.end, (b / spec.step + 1) * spec.step);
    total += replica_target(spec, b) * (next - b);
    b = next;
  }
  return total;
}

std::int64_t gpu_seconds(const std::vector<InferenceReplica>& replicas) {
  std::int64_t total = 0;
  for (const auto& r : replicas) total += r.duration;
  return total;
}

// The field named by validate's error, or "" when the spec is valid.
std::string failing_field(const InferenceServiceSpec& spec) {
  auto valid = validate(spec);
  return valid ? std::string() : valid.error().field;
}

TEST(InferenceGeneratorTest, CountNeverExceedsPeakNorGoesNegative) {
  InferenceServiceSpec spec = three_days();
  spec.jitter_permille = 1000;  // the widest noise
  spec.trough_gpus = 50;
  for (Seconds t = 0; t < spec.end; t += spec.step) {
    const std::int64_t count = replica_target(spec, t);
    EXPECT_GE(count, 0) << t;
    EXPECT_LE(count, spec.peak_gpus) << t;
  }
}

TEST(InferenceGeneratorTest, TroughAtNight) {
  InferenceServiceSpec spec = three_days();
  spec.jitter_permille = 0;
  for (Seconds t = 0; t < spec.end; t += spec.step) {
    const Seconds tod = t % kDay;
    if (tod < spec.day_start) {
      EXPECT_EQ(replica_target(spec, t), spec.trough_gpus) << t;
    }
  }
  EXPECT_EQ(replica_target(spec, 8 * kHour), spec.trough_gpus);  // sin(0): the curve starts there
  EXPECT_GT(replica_target(spec, 9 * kHour), spec.trough_gpus);
}

TEST(InferenceGeneratorTest, PeakInTheMiddleOfTheDayWithoutJitter) {
  InferenceServiceSpec spec = three_days();
  spec.jitter_permille = 0;
  std::int64_t highest = 0;
  Seconds when = 0;
  for (Seconds t = 0; t < kDay; t += spec.step) {
    if (replica_target(spec, t) > highest) {
      highest = replica_target(spec, t);
      when = t;
    }
  }
  EXPECT_EQ(highest, spec.peak_gpus);
  // The window 08:00-24:00 peaks at 16:00; rounding makes the peak a plateau around it.
  EXPECT_NEAR(static_cast<double>(when), 16.0 * kHour, 1.0 * kHour);
  EXPECT_EQ(replica_target(spec, 16 * kHour), spec.peak_gpus);
}

TEST(InferenceGeneratorTest, DayOffsetShiftsTheCurve) {
  InferenceServiceSpec spec = three_days();
  spec.jitter_permille = 0;
  spec.day_offset = 16 * kHour;  // sim time 0 is 16:00
  EXPECT_EQ(replica_target(spec, 0), spec.peak_gpus);
  EXPECT_EQ(replica_target(spec, 10 * kHour), spec.trough_gpus);  // 02:00
}

TEST(InferenceGeneratorTest, CountIsConstantWithinAStepAndIndependentOfCallOrder) {
  const InferenceServiceSpec spec = three_days();
  const std::int64_t late = replica_target(spec, 2 * kDay + 13 * kHour + 5);
  EXPECT_EQ(replica_target(spec, 2 * kDay + 13 * kHour), late);
  EXPECT_EQ(replica_target(spec, 2 * kDay + 13 * kHour + spec.step - 1), late);
  EXPECT_EQ(replica_target(spec, 2 * kDay + 13 * kHour + 5), late);
}

TEST(InferenceGeneratorTest, ReplicaGpuSecondsEqualTheIntegralOfTheCount) {
  InferenceServiceSpec spec = three_days();
  spec.start = 1234;  // not on a step boundary
  spec.end = 3 * kDay - 77;
  auto replicas = generate_inference_replicas(spec);
  ASSERT_TRUE(replicas.has_value()) << replicas.error().message();
  EXPECT_FALSE(replicas->empty());
  EXPECT_EQ(gpu_seconds(*replicas), count_integral(spec));
  for (const auto& r : *replicas) {
    EXPECT_GE(r.submit, spec.start);
    EXPECT_GT(r.duration, 0);
    EXPECT_LE(r.submit + r.duration, spec.end);
  }
}

TEST(InferenceGeneratorTest, LiveReplicasMatchTheCountAtEveryStep) {
  InferenceServiceSpec spec = three_days();
  spec.end = kDay;
  spec.step = 3600;
  auto replicas = generate_inference_replicas(spec);
  ASSERT_TRUE(replicas.has_value()) << replicas.error().message();
  for (Seconds t = 0; t < spec.end; t += spec.step) {
    const auto live = std::count_if(replicas->begin(), replicas->end(), [&](const auto& r) {
      return r.submit <= t && t < r.submit + r.duration;
    });
    EXPECT_EQ(live, replica_target(spec, t)) << t;
  }
}

TEST(InferenceGeneratorTest, FallingCountEndsTheNewestReplicasFirst) {
  InferenceServiceSpec spec;
  spec.peak_gpus = 2;
  spec.trough_gpus = 0;
  spec.day_start = 0;
  spec.day_end = 4 * kHour;  // 0, 1 (01:00), 2 (02:00), 1 (03:00), 0 (04:00 on), step 1 h
  spec.step = kHour;
  spec.end = 5 * kHour;
  spec.jitter_permille = 0;
  ASSERT_EQ(replica_target(spec, kHour), 1);
  ASSERT_EQ(replica_target(spec, 2 * kHour), 2);
  ASSERT_EQ(replica_target(spec, 3 * kHour), 1);
  auto replicas = generate_inference_replicas(spec);
  ASSERT_TRUE(replicas.has_value()) << replicas.error().message();
  // The one started at 02:00 ends at 03:00; the one started at 01:00 lasts until 04:00.
  EXPECT_EQ(*replicas, (std::vector<InferenceReplica>{{kHour, 3 * kHour}, {2 * kHour, kHour}}));
}

TEST(InferenceGeneratorTest, ReplicasAliveAtTheEndEndThere) {
  InferenceServiceSpec spec = three_days();
  spec.jitter_permille = 0;
  spec.end = 10 * kHour + 1;
  auto replicas = generate_inference_replicas(spec);
  ASSERT_TRUE(replicas.has_value()) << replicas.error().message();
  const auto at_end = std::count_if(replicas->begin(), replicas->end(), [&](const auto& r) {
    return r.submit + r.duration == spec.end;
  });
  EXPECT_EQ(at_end, replica_target(spec, 10 * kHour));
}

TEST(InferenceGeneratorTest, OutputIsSortedBySubmitThenLongestFirst) {
  auto replicas = generate_inference_replicas(three_days());
  ASSERT_TRUE(replicas.has_value()) << replicas.error().message();
  EXPECT_TRUE(std::is_sorted(replicas->begin(), replicas->end(), [](const auto& a, const auto& b) {
    return a.submit != b.submit ? a.submit < b.submit : a.duration > b.duration;
  }));
}

TEST(InferenceGeneratorTest, SameSeedSameOutputDifferentSeedDifferentOutput) {
  InferenceServiceSpec spec = three_days();
  auto first = generate_inference_replicas(spec);
  auto again = generate_inference_replicas(spec);
  spec.seed = 43;
  auto other = generate_inference_replicas(spec);
  ASSERT_TRUE(first && again && other);
  EXPECT_EQ(*first, *again);
  EXPECT_NE(*first, *other);
}

TEST(InferenceGeneratorTest, ValidationNamesTheField) {
  const InferenceServiceSpec good = three_days();
  EXPECT_EQ(failing_field(good), "");
  const struct {
    void (*change)(InferenceServiceSpec&);
    const char* field;
  } cases[] = {
      {[](auto& s) { s.peak_gpus = 0; }, "peak_gpus"},
      {[](auto& s) { s.peak_gpus = kMaxInferenceGpus + 1; }, "peak_gpus"},
      {[](auto& s) { s.trough_gpus = -1; }, "trough_gpus"},
      {[](auto& s) { s.trough_gpus = s.peak_gpus + 1; }, "trough_gpus"},
      {[](auto& s) { s.day_start = -1; }, "day_start"},
      {[](auto& s) { s.day_start = kDay; }, "day_start"},
      {[](auto& s) { s.day_end = s.day_start; }, "day_end"},
      {[](auto& s) { s.day_end = kDay + 1; }, "day_end"},
      {[](auto& s) { s.step = 0; }, "step"},
      {[](auto& s) { s.step = kDay + 1; }, "step"},
      {[](auto& s) { s.start = -1; }, "start"},
      {[](auto& s) { s.end = s.start; }, "end"},
      {[](auto& s) { s.end = kMaxInferenceTime + 1; }, "end"},
      {[](auto& s) {
         s.step = 1;
         s.end = kMaxInferenceSteps + 1;
       },
       "end"},
      {[](auto& s) { s.day_offset = -1; }, "day_offset"},
      {[](auto& s) { s.day_offset = kDay; }, "day_offset"},
      {[](auto& s) { s.jitter_permille = -1; }, "jitter_permille"},
      {[](auto& s) { s.jitter_permille = 1001; }, "jitter_permille"},
  };
  for (const auto& c : cases) {
    InferenceServiceSpec spec = good;
    c.change(spec);
    EXPECT_EQ(failing_field(spec), c.field);
    auto generated = generate_inference_replicas(spec);
    ASSERT_FALSE(generated.has_value()) << c.field;
    EXPECT_EQ(generated.error().field, c.field);
  }
  InferenceServiceSpec spec = good;
  spec.peak_gpus = 0;
  EXPECT_THAT(validate(spec).error().reason, HasSubstr("got 0"));
}

TEST(InferenceGeneratorTest, RefusesAnOversizedOutput) {
  InferenceServiceSpec spec;
  spec.peak_gpus = 1'000'000;
  spec.trough_gpus = 0;
  spec.step = 1;
  spec.end = 1000;
  spec.jitter_permille = 1000;
  spec.day_start = 0;
  spec.day_offset = 12 * 3600;  // near the top of the curve
  auto generated = generate_inference_replicas(spec);
  ASSERT_FALSE(generated.has_value());
  EXPECT_EQ(generated.error().field, "end");
  EXPECT_THAT(generated.error().reason, HasSubstr("more than"));
}

}  // namespace
}  // namespace tidepool
