#include "core/step_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/gpu_peak_flops.h"
#include "core/rng.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using test_support::chance;
using test_support::draw64;

StepSample step_sample_of(std::int64_t step, std::int64_t us,
                          std::optional<std::int64_t> compute = {},
                          std::optional<std::int64_t> allreduce = {},
                          std::optional<std::int64_t> bytes = {}) {
  return StepSample{.step = step,
                    .step_us = us,
                    .compute_us = compute,
                    .allreduce_us = allreduce,
                    .allreduce_bytes = bytes};
}

TEST(StepSampleTest, ChecksEachFigureNamingItsKey) {
  EXPECT_TRUE(check_step_sample(step_sample_of(0, 100, 60, 40, 1000)));
  EXPECT_TRUE(check_step_sample(step_sample_of(kMaxStepNumber, kMaxStepMicros)));
  const auto field = [](const StepSample& s) {
    auto ok = check_step_sample(s);
    return ok ? std::string("ok") : ok.error().field;
  };
  EXPECT_EQ(field(step_sample_of(-1, 100)), "step");
  EXPECT_EQ(field(step_sample_of(kMaxStepNumber + 1, 100)), "step");
  EXPECT_EQ(field(step_sample_of(0, -1)), "time_us");
  EXPECT_EQ(field(step_sample_of(0, kMaxStepMicros + 1)), "time_us");
  EXPECT_EQ(field(step_sample_of(0, 100, 101)), "compute_us");
  EXPECT_EQ(field(step_sample_of(0, 100, -1)), "compute_us");
  EXPECT_EQ(field(step_sample_of(0, 100, {}, 101)), "allreduce_us");
  EXPECT_EQ(field(step_sample_of(0, 100, {}, 50, -1)), "allreduce_bytes");
  EXPECT_EQ(field(step_sample_of(0, 100, {}, 50, kMaxAllreduceBytes + 1)), "allreduce_bytes");
  EXPECT_EQ(field(step_sample_of(0, 100, {}, {}, 10)), "allreduce_bytes");
  EXPECT_EQ(check_step_sample(step_sample_of(0, 100, 101)).error().message(),
            "compute_us: 101 is out of range 0..100 (the step's time_us)");
}

TEST(StepHistogramTest, BucketsAreContiguousAndNarrow) {
  EXPECT_EQ(StepHistogram::bucket_of(kMaxStepMicros) + 1, StepHistogram::kBuckets);
  for (int b = 0; b < StepHistogram::kBuckets; ++b) {
    const std::int64_t low = StepHistogram::bucket_low(b);
    const std::int64_t high = StepHistogram::bucket_high(b);
    ASSERT_LE(low, high) << b;
    EXPECT_EQ(StepHistogram::bucket_of(low), b);
    EXPECT_EQ(StepHistogram::bucket_of(high), b);
    if (b > 0) {
      EXPECT_EQ(StepHistogram::bucket_high(b - 1) + 1, low) << b;
    }
    // At most 1/16 of its lowest value wide: its middle is within 1/32 of any value in it.
    EXPECT_LE((high - low) * 16, std::max<std::int64_t>(low, 16)) << b;
  }
}

TEST(StepHistogramTest, CountsQuantilesAndMean) {
  StepHistogram h;
  EXPECT_EQ(h.quantile_us(0.5), 0);
  EXPECT_EQ(h.mean_us(), 0);
  for (int us = 1; us <= 20; ++us) h.add(us);
  EXPECT_EQ(h.count(), 20);
  EXPECT_EQ(h.sum_us(), 210);
  EXPECT_EQ(h.mean_us(), 11);  // 10.5 rounded
  EXPECT_EQ(h.quantile_us(0.5), 10);
  EXPECT_EQ(h.quantile_us(0.9), 18);
  EXPECT_EQ(h.quantile_us(0.0), 1);
  EXPECT_EQ(h.quantile_us(1.0), 20);
  EXPECT_EQ(h.min_us(), 1);
  EXPECT_EQ(h.max_us(), 20);
  StepHistogram one;
  one.add(123'456);
  EXPECT_EQ(one.quantile_us(0.5), 123'456);  // kept within [min, max]
}

TEST(StepHistogramTest, FromPartsRebuildsAndRefusesWhatDisagrees) {
  StepHistogram h;
  for (std::int64_t us : {5, 5, 700, 90'000, 90'001}) h.add(us);
  auto back = StepHistogram::from_parts(h.buckets(), h.sum_us(), h.min_us(), h.max_us());
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, h);
  const auto buckets = h.buckets();
  const auto field = [&](std::vector<std::pair<int, std::int64_t>> b, std::int64_t sum,
                         std::int64_t min, std::int64_t max) {
    auto r = StepHistogram::from_parts(b, sum, min, max);
    return r ? std::string("ok") : r.error().field;
  };
  EXPECT_EQ(field({}, 0, 0, 0), "ok");
  EXPECT_EQ(field({}, 1, 0, 0), "buckets");
  EXPECT_EQ(field({{3, 1}, {3, 1}}, 6, 3, 3), "buckets[1]");
  EXPECT_EQ(field({{4, 1}, {3, 1}}, 7, 3, 4), "buckets[1]");
  EXPECT_EQ(field({{StepHistogram::kBuckets, 1}}, 1, 1, 1), "buckets[0]");
  EXPECT_EQ(field({{3, 0}}, 0, 3, 3), "buckets[0]");
  EXPECT_EQ(field({{3, 2}}, 6, 4, 4), "min_us");
  EXPECT_EQ(field({{3, 1}, {5, 1}}, 8, 3, 6), "max_us");
  EXPECT_EQ(field({{3, 1}, {5, 1}}, 11, 3, 5), "sum_us");
  EXPECT_EQ(field({{3, 1}, {5, 1}}, 5, 3, 5), "sum_us");
  EXPECT_EQ(field({{3, 1}, {5, 1}}, 7, 3, 5), "ok");
  EXPECT_EQ(field(buckets, h.sum_us(), h.min_us(), h.max_us()), "ok");
}

// Property: whatever the values, a quantile is within 1/32 of the value of its rank, the mean is
// exact, and merging two histograms is adding all their values into one.
TEST(StepHistogramTest, QuantilesWithinABucketAndMergeIsExact) {
  Rng rng(20261207);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::int64_t> values;
    StepHistogram a;
    StepHistogram b;
    StepHistogram all;
    const int n = static_cast<int>(draw64(rng, 1, 300));
    const std::int64_t top = chance(rng, 50) ? 2'000 : kMaxStepMicros;
    for (int i = 0; i < n; ++i) {
      const std::int64_t v = draw64(rng, 0, top);
      values.push_back(v);
      (chance(rng, 50) ? a : b).add(v);
      all.add(v);
    }
    StepHistogram merged = a;
    merged.merge(b);
    ASSERT_EQ(merged, all);
    std::ranges::sort(values);
    for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 1.0}) {
      const auto rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(q * n)));
      const std::int64_t truth = values[static_cast<std::size_t>(rank - 1)];
      const std::int64_t got = all.quantile_us(q);
      EXPECT_LE(std::abs(got - truth) * 32, std::max<std::int64_t>(truth, 1))
          << "q " << q << " truth " << truth << " got " << got;
    }
    std::int64_t sum = 0;
    for (std::int64_t v : values) sum += v;
    EXPECT_EQ(all.sum_us(), sum);
  }
}

TEST(StepStatsTest, CommShareFromComputeTimeElseAllreduce) {
  StepStats stats;
  EXPECT_FALSE(stats.comm_share());
  stats.add(step_sample_of(0, 1000, {}, 200, 4'000'000));
  stats.add(step_sample_of(1, 1000, {}, 300, 4'000'000));
  auto share = stats.comm_share();
  ASSERT_TRUE(share);
  EXPECT_DOUBLE_EQ(share->share, 0.25);
  EXPECT_EQ(share->source, CommShareSource::kAllreduceTime);
  // Compute time known: step - compute, whatever the all-reduce took (it hides waiting too).
  stats.add(step_sample_of(2, 2000, 1500, 400, 4'000'000));
  share = stats.comm_share();
  ASSERT_TRUE(share);
  EXPECT_DOUBLE_EQ(share->share, 0.25);
  EXPECT_EQ(share->source, CommShareSource::kComputeTime);
  EXPECT_STREQ(comm_share_source_name(share->source), "step_minus_compute");
  EXPECT_EQ(stats.mean_compute_us(), 1500);
  EXPECT_EQ(stats.mean_allreduce_us(), 300);
  EXPECT_EQ(stats.mean_allreduce_bytes(), 4'000'000);
  EXPECT_EQ(stats.last_step, 2);
  EXPECT_EQ(stats.steps.count(), 3);
}

TEST(StepStatsTest, BandwidthAsNcclTestsDefineIt) {
  StepStats stats;
  // 1 GB in 10 ms: 100 GB/s algorithm bandwidth; a ring of 8 carries 2 x 7/8 of it per link.
  stats.add(step_sample_of(0, 50'000, 40'000, 10'000, 1'000'000'000));
  EXPECT_DOUBLE_EQ(*stats.allreduce_alg_bytes_per_s(), 1e11);
  EXPECT_DOUBLE_EQ(*stats.allreduce_bus_bytes_per_s(8), 1.75e11);
  EXPECT_DOUBLE_EQ(*stats.allreduce_bus_bytes_per_s(1), 0.0);
  EXPECT_FALSE(stats.allreduce_bus_bytes_per_s(0));
  // A timed all-reduce without its bytes: no bandwidth (it would be understated).
  stats.add(step_sample_of(1, 50'000, 40'000, 10'000));
  EXPECT_FALSE(stats.allreduce_alg_bytes_per_s());
  EXPECT_FALSE(stats.mean_allreduce_bytes());
}

TEST(StepStatsTest, MfuFromDeclaredFlopsAndPeak) {
  StepStats stats;
  EXPECT_FALSE(stats.mfu(1e15, 1e15));
  stats.add(step_sample_of(0, 1'000'000));
  stats.add(step_sample_of(1, 3'000'000));
  // 2 s per step; 8 H100 at 989.4 TFLOP/s; 7.9152e15 FLOPs per step: 50%.
  const double peak = 8.0 * static_cast<double>(find_gpu_peak_flops("H100")->flops_per_s);
  EXPECT_NEAR(*stats.mfu(7.9152e15, peak), 0.5, 1e-12);
  EXPECT_FALSE(stats.mfu(0, peak));
  EXPECT_FALSE(stats.mfu(1e15, 0));
}

TEST(StepStatsTest, MergeAddsEverythingAndSaturates) {
  StepStats a;
  a.add(step_sample_of(4, 100, 80));
  a.refused_lines = 2;
  StepStats b;
  b.add(step_sample_of(9, 200, {}, 50, 64));
  StepStats both = a;
  both.merge(b);
  StepStats direct;
  direct.add(step_sample_of(4, 100, 80));
  direct.add(step_sample_of(9, 200, {}, 50, 64));
  direct.refused_lines = 2;
  EXPECT_EQ(both, direct);
  StepStats huge;
  huge.compute_us = std::numeric_limits<std::int64_t>::max() - 1;
  huge.merge(huge);
  EXPECT_EQ(huge.compute_us, std::numeric_limits<std::int64_t>::max());
}

TEST(GpuPeakFlopsTest, LooksUpNamesAsClustersAndDriversWriteThem) {
  const auto peak = [](std::string_view name) -> std::int64_t {
    auto found = find_gpu_peak_flops(name);
    return found ? found->flops_per_s : 0;
  };
  constexpr std::int64_t kTera = 1'000'000'000'000;
  EXPECT_EQ(peak("H100"), 989'400'000'000'000);
  EXPECT_EQ(peak("NVIDIA H100 80GB HBM3"), 989'400'000'000'000);
  EXPECT_EQ(peak("NVIDIA H100 PCIe"), 756'500'000'000'000);
  EXPECT_EQ(peak("h100-pcie-80gb"), 756'500'000'000'000);
  EXPECT_EQ(peak("NVIDIA A100-SXM4-80GB"), 312 * kTera);
  EXPECT_EQ(peak("A10"), 125 * kTera);
  EXPECT_EQ(peak("A10G"), 0);
  EXPECT_EQ(peak("L40S"), 362'050'000'000'000);
  EXPECT_EQ(peak("NVIDIA L4"), 121 * kTera);
  EXPECT_EQ(peak("Tesla V100-SXM2-32GB"), 125 * kTera);
  EXPECT_EQ(peak("Tesla V100-PCIE-16GB"), 112 * kTera);
  EXPECT_EQ(peak("V100M32"), 125 * kTera);
  EXPECT_EQ(peak("Tesla T4"), 65 * kTera);
  EXPECT_EQ(peak("P100"), 18'700'000'000'000);
  EXPECT_EQ(peak("G2"), 0);
  EXPECT_EQ(peak(""), 0);
  for (const GpuPeakFlops& entry : gpu_peak_flops_table()) {
    EXPECT_EQ(find_gpu_peak_flops(entry.key)->key, entry.key) << entry.key;
    EXPECT_GT(entry.flops_per_s, 0);
  }
}

}  // namespace
}  // namespace tidepool
