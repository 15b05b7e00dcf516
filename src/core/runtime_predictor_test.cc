#include "core/runtime_predictor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/rng.h"

namespace tidepool {
namespace {

constexpr TenantId kTenant1{1};
constexpr TenantId kTenant2{2};
constexpr TenantId kTenant3{3};

RuntimePredictor make_predictor(RuntimePredictorConfig config) {
  auto predictor = RuntimePredictor::create(config);
  EXPECT_TRUE(predictor.has_value()) << predictor.error().message();
  return *predictor;
}

void observe(RuntimePredictor& p, TenantId tenant, int gpus, Seconds actual) {
  auto ok = p.observe({.tenant = tenant, .gpus = gpus, .actual = actual});
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

Prediction predict(const RuntimePredictor& p, TenantId tenant, int gpus,
                   std::optional<Seconds> estimate = std::nullopt) {
  auto prediction = p.predict({.tenant = tenant, .gpus = gpus, .estimate = estimate});
  EXPECT_TRUE(prediction.has_value()) << prediction.error().message();
  return *prediction;
}

TEST(RuntimePredictorTest, GpuBucketsAreOneTwoToFourFiveToEightNineTo32AndMore) {
  EXPECT_EQ(gpu_bucket(1), 0);
  EXPECT_EQ(gpu_bucket(2), 1);
  EXPECT_EQ(gpu_bucket(4), 1);
  EXPECT_EQ(gpu_bucket(5), 2);
  EXPECT_EQ(gpu_bucket(8), 2);
  EXPECT_EQ(gpu_bucket(9), 3);
  EXPECT_EQ(gpu_bucket(32), 3);
  EXPECT_EQ(gpu_bucket(33), 4);
  EXPECT_EQ(gpu_bucket(1024), 4);
}

TEST(RuntimePredictorTest, WithoutHistoryPredictsTheDefaultOrTheEstimate) {
  RuntimePredictor p;
  Prediction blind = predict(p, kTenant1, 8);
  EXPECT_EQ(blind.runtime, 3600);
  EXPECT_EQ(blind.rule, PredictionRule::kDefault);
  EXPECT_FALSE(blind.from_estimate);

  Prediction estimated = predict(p, kTenant1, 8, 7200);
  EXPECT_EQ(estimated.runtime, 7200);
  EXPECT_EQ(estimated.rule, PredictionRule::kDefault);
  EXPECT_TRUE(estimated.from_estimate);
}

TEST(RuntimePredictorTest, FallsBackFromTenantAndBucketToTenantToBucketToPool) {
  RuntimePredictor p;  // min_samples 3
  for (int i = 0; i < 3; ++i) observe(p, kTenant1, 1, 100);

  Prediction own = predict(p, kTenant1, 1);
  EXPECT_EQ(own.runtime, 100);
  EXPECT_EQ(own.rule, PredictionRule::kTenantAndGpuBucket);

  Prediction tenant = predict(p, kTenant1, 8);  // A has no 8-GPU history
  EXPECT_EQ(tenant.runtime, 100);
  EXPECT_EQ(tenant.rule, PredictionRule::kTenant);

  Prediction pool = predict(p, kTenant2, 8);  // nobody has 8-GPU history, B has none at all
  EXPECT_EQ(pool.runtime, 100);
  EXPECT_EQ(pool.rule, PredictionRule::kPool);

  for (int i = 0; i < 3; ++i) observe(p, kTenant3, 8, 5000);
  Prediction bucket = predict(p, kTenant2, 8);
  EXPECT_EQ(bucket.runtime, 5000);
  EXPECT_EQ(bucket.rule, PredictionRule::kGpuBucket);
  EXPECT_EQ(predict(p, kTenant2, 1).runtime, 100);
  EXPECT_EQ(predict(p, kTenant2, 1).rule, PredictionRule::kGpuBucket);

  // Two runtimes are below min_samples: B's own history is not used yet.
  observe(p, kTenant2, 8, 9);
  observe(p, kTenant2, 8, 9);
  EXPECT_EQ(predict(p, kTenant2, 8).rule, PredictionRule::kGpuBucket);
  observe(p, kTenant2, 8, 9);
  EXPECT_EQ(predict(p, kTenant2, 8).runtime, 9);
  EXPECT_EQ(predict(p, kTenant2, 8).rule, PredictionRule::kTenantAndGpuBucket);
}

TEST(RuntimePredictorTest, WindowKeepsOnlyTheMostRecentRuntimes) {
  RuntimePredictor p = make_predictor({.window = 3, .min_samples = 1, .quantile_permille = 1000});
  observe(p, kTenant1, 1, 500);
  observe(p, kTenant1, 1, 1);
  observe(p, kTenant1, 1, 2);
  EXPECT_EQ(predict(p, kTenant1, 1).runtime, 500);  // the maximum of the window
  observe(p, kTenant1, 1, 3);                       // pushes 500 out
  EXPECT_EQ(predict(p, kTenant1, 1).runtime, 3);
  for (int i = 0; i < 100; ++i) observe(p, kTenant1, 1, 7);
  EXPECT_EQ(predict(p, kTenant1, 1).runtime, 7);
  EXPECT_EQ(p.observed(), 104);
}

TEST(RuntimePredictorTest, PredictsTheLowerMedianAndIgnoresOutliers) {
  RuntimePredictor odd = make_predictor({.min_samples = 1});
  for (Seconds s : {5, 1, 100}) observe(odd, kTenant1, 1, s);
  EXPECT_EQ(predict(odd, kTenant1, 1).runtime, 5);

  RuntimePredictor even = make_predictor({.min_samples = 1});
  for (Seconds s : {100, 3, 1, 2}) observe(even, kTenant1, 1, s);
  EXPECT_EQ(predict(even, kTenant1, 1).runtime, 2);  // element 1 of {1, 2, 3, 100}

  RuntimePredictor outlier;
  for (int i = 0; i < 9; ++i) observe(outlier, kTenant1, 1, 600);
  observe(outlier, kTenant1, 1, 1'000'000);
  EXPECT_EQ(predict(outlier, kTenant1, 1).runtime, 600);
}

TEST(RuntimePredictorTest, OtherQuantilesUseTheLowerNearestRank) {
  RuntimePredictor p = make_predictor({.min_samples = 1, .quantile_permille = 900});
  for (Seconds s = 10; s >= 1; --s) observe(p, kTenant1, 1, s);
  EXPECT_EQ(predict(p, kTenant1, 1).runtime, 9);  // element floor(0.9 * 9) = 8 of 1..10
  RuntimePredictor low = make_predictor({.min_samples = 1, .quantile_permille = 0});
  for (Seconds s = 10; s >= 1; --s) observe(low, kTenant1, 1, s);
  EXPECT_EQ(predict(low, kTenant1, 1).runtime, 1);
}

TEST(RuntimePredictorTest, UserEstimateCapsTheLearnedRuntime) {
  RuntimePredictor p;
  for (int i = 0; i < 3; ++i) observe(p, kTenant1, 4, 1000);
  Prediction capped = predict(p, kTenant1, 4, 500);
  EXPECT_EQ(capped.runtime, 500);
  EXPECT_TRUE(capped.from_estimate);
  EXPECT_EQ(capped.rule, PredictionRule::kTenantAndGpuBucket);

  Prediction learned = predict(p, kTenant1, 4, 2000);
  EXPECT_EQ(learned.runtime, 1000);
  EXPECT_FALSE(learned.from_estimate);
}

TEST(RuntimePredictorTest, RejectsBadInputAndLearnsNothingFromIt) {
  RuntimePredictor p;
  auto no_gpus = p.observe({.tenant = kTenant1, .gpus = 0, .actual = 10});
  ASSERT_FALSE(no_gpus.has_value());
  EXPECT_EQ(no_gpus.error().field, "gpus");
  auto negative = p.observe({.tenant = kTenant1, .gpus = 1, .actual = -1});
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().field, "actual");
  auto zero_estimate = p.observe({.tenant = kTenant1, .gpus = 1, .estimate = 0, .actual = 10});
  ASSERT_FALSE(zero_estimate.has_value());
  EXPECT_EQ(zero_estimate.error().field, "estimate");
  EXPECT_EQ(p.observed(), 0);

  EXPECT_FALSE(p.predict({.tenant = kTenant1, .gpus = -3}).has_value());
  EXPECT_FALSE(p.predict({.tenant = kTenant1, .gpus = 1, .estimate = -5}).has_value());

  EXPECT_EQ(RuntimePredictor::create({.window = 0}).error().field, "window");
  EXPECT_EQ(RuntimePredictor::create({.window = 4, .min_samples = 5}).error().field, "min_samples");
  EXPECT_EQ(RuntimePredictor::create({.quantile_permille = 1001}).error().field,
            "quantile_permille");
  EXPECT_EQ(RuntimePredictor::create({.default_runtime = 0}).error().field, "default_runtime");
}

TEST(RuntimePredictorTest, SameObservationsGiveSamePredictions) {
  auto run = [] {
    RuntimePredictor p;
    Rng rng(7);
    std::vector<Seconds> predictions;
    for (int i = 0; i < 2000; ++i) {
      const TenantId tenant{static_cast<std::uint32_t>(rng.below(5))};
      const int gpus = 1 + static_cast<int>(rng.below(64));
      const std::optional<Seconds> estimate =
          rng.below(3) == 0 ? std::optional<Seconds>(1 + static_cast<Seconds>(rng.below(90'000)))
                            : std::nullopt;
      Prediction pr = predict(p, tenant, gpus, estimate);
      predictions.push_back(pr.runtime);
      predictions.push_back(static_cast<Seconds>(pr.rule));
      observe(p, tenant, gpus, static_cast<Seconds>(rng.below(100'000)));
    }
    return predictions;
  };
  EXPECT_EQ(run(), run());
}

TEST(RuntimeBaselineTest, TenantMeanThenPoolMeanThenDefault) {
  TenantMeanBaseline baseline(3600);
  EXPECT_EQ(baseline.predict(kTenant1), 3600);
  ASSERT_TRUE(baseline.observe(kTenant1, 10).has_value());
  ASSERT_TRUE(baseline.observe(kTenant1, 21).has_value());
  EXPECT_EQ(baseline.predict(kTenant1), 16);  // 15.5 rounds up
  ASSERT_TRUE(baseline.observe(kTenant2, 100).has_value());
  EXPECT_EQ(baseline.predict(kTenant2), 100);
  EXPECT_EQ(baseline.predict(kTenant3), 44);  // pool: 131 / 3 = 43.67
  EXPECT_FALSE(baseline.observe(kTenant3, -1).has_value());
  EXPECT_EQ(baseline.predict(kTenant3), 44);
}

TEST(PredictorErrorsTest, MedianAbsoluteErrorsOnHandExamples) {
  PredictorErrors errors;
  EXPECT_EQ(errors.count(), 0);
  EXPECT_EQ(errors.median_abs_error(), 0);
  EXPECT_EQ(errors.baseline_median_abs_error(), 0);

  errors.record(/*predicted=*/100, /*baseline=*/200, /*actual=*/150);  // 50, 50
  errors.record(0, 1000, 10);                                          // 10, 990
  errors.record(300, 300, 300);                                        // 0, 0
  EXPECT_EQ(errors.count(), 3);
  EXPECT_EQ(errors.median_abs_error(), 10);           // {0, 10, 50}
  EXPECT_EQ(errors.baseline_median_abs_error(), 50);  // {0, 50, 990}

  errors.record(400, 0, 100);                         // 300, 100
  EXPECT_EQ(errors.median_abs_error(), 30);           // {0, 10, 50, 300}: (10 + 50) / 2
  EXPECT_EQ(errors.baseline_median_abs_error(), 75);  // {0, 50, 100, 990}: (50 + 100) / 2

  PredictorErrors halves;
  halves.record(1, 0, 0);
  halves.record(2, 0, 0);
  EXPECT_EQ(halves.median_abs_error(), 1);  // 1.5 rounds down
}

// One tenant runs two kinds of work: 1-GPU jobs of about 10 minutes and 8-GPU jobs of about 10
// hours. The tenant's mean lies between the two and is far from both; the per-bucket median finds
// each population.
TEST(PredictorErrorsTest, PredictorBeatsTenantMeanOnTwoPopulations) {
  RuntimePredictor predictor;
  TenantMeanBaseline baseline;
  PredictorErrors errors;
  Rng rng(2024);
  for (int i = 0; i < 5000; ++i) {
    const bool big = rng.below(10) < 3;
    const int gpus = big ? 8 : 1;
    const Seconds typical = big ? 36'000 : 600;
    // Within +-20% of the typical runtime.
    const Seconds actual =
        typical * 8 / 10 +
        static_cast<Seconds>(rng.below(static_cast<std::uint64_t>(typical * 4 / 10)));
    const Prediction predicted = predict(predictor, kTenant1, gpus);
    const Seconds base = baseline.predict(kTenant1);
    errors.record(predicted.runtime, base, actual);
    observe(predictor, kTenant1, gpus, actual);
    ASSERT_TRUE(baseline.observe(kTenant1, actual).has_value());
  }
  EXPECT_EQ(errors.count(), 5000);
  EXPECT_LT(errors.median_abs_error(), 300);
  EXPECT_GT(errors.baseline_median_abs_error(), 5000);
  EXPECT_LT(errors.median_abs_error() * 10, errors.baseline_median_abs_error());
}

}  // namespace
}  // namespace tidepool
