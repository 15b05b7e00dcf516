#include "core/queueing_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tidepool {
namespace {

TEST(QueueingModelTest, ErlangCMatchesItsTabulatedValues) {
  // One server: the chance to wait is the utilisation.
  EXPECT_NEAR(erlang_c(1, 0.5), 0.5, 1e-12);
  // Two servers at load 1.5: 0.6429 (B(2) = 0.9 / 2.9; C = B / (1 - 0.75 (1 - B))).
  EXPECT_NEAR(erlang_c(2, 1.5), 0.642857, 1e-6);
  // Ten servers at load 8: 0.4092 (tables of Erlang C).
  EXPECT_NEAR(erlang_c(10, 8.0), 0.4092, 1e-4);
}

TEST(QueueingModelTest, OneReplicaIsAnMM1Queue) {
  // M/M/1: the response time is exponential of rate mu - lambda; its p95 is ln(20) / (mu - lambda).
  // mu 10/s, lambda 5/s: 2.9957 / 5 s = 599 ms.
  EXPECT_EQ(response_percentile_ms(5, 0.1, 1), 599);
  // No load: the service alone, ln(20) x 100 ms = 300 ms.
  EXPECT_EQ(response_percentile_ms(0, 0.1, 1), 300);
  // At or past the replicas' capacity there is no steady state.
  EXPECT_FALSE(response_percentile_ms(10, 0.1, 1).has_value());
  EXPECT_FALSE(response_percentile_ms(25, 0.1, 2).has_value());
  EXPECT_FALSE(response_percentile_ms(5, 0, 1).has_value());
  EXPECT_FALSE(response_percentile_ms(5, 0.1, 0).has_value());
}

TEST(QueueingModelTest, MoreReplicasNeverSlowItDownAndTheFewestMeetingTheTargetIsFound) {
  // 80 requests a second of 100 ms each: at least 9 replicas to keep up.
  std::int64_t previous = INT64_MAX;
  for (int c = 9; c <= 20; ++c) {
    const auto p95 = response_percentile_ms(80, 0.1, c);
    ASSERT_TRUE(p95.has_value()) << c;
    EXPECT_LE(*p95, previous) << c;
    previous = *p95;
  }
  // Never below the service's own p95 (300 ms).
  EXPECT_GE(previous, 300);
  const auto needed = replicas_for_p95(80, 0.1, 400, 50);
  ASSERT_TRUE(needed.has_value());
  EXPECT_LE(*response_percentile_ms(80, 0.1, *needed), 400);
  EXPECT_GT(response_percentile_ms(80, 0.1, *needed - 1).value_or(INT64_MAX), 400);
  // A target under the service's own p95 cannot be met by replicas.
  EXPECT_FALSE(replicas_for_p95(80, 0.1, 250, 1000).has_value());
}

// At the edge of saturation the answer is a figure or "cannot keep up", always, and at once.
TEST(QueueingModel, NearSaturationItAnswersInBoundedTime) {
  for (const int servers : {1, 8, 64, 512}) {
    for (const double gap : {1e-3, 1e-6, 1e-9, 1e-12, 1e-15}) {
      const double rate = servers * 10.0 * (1 - gap);  // 100 ms each: 10/s per server
      const auto p95 = response_percentile_ms(rate, 0.1, servers);
      if (p95) {
        EXPECT_GT(*p95, 100) << servers << " " << gap;
      }
    }
  }
  EXPECT_FALSE(response_percentile_ms(80 * (1 - 1e-15), 0.1, 8).has_value());
}

// Replicas that each serve several requests at once are that many servers of the queue: the count
// found is the first whose servers meet the target, the same as a linear search finds.
TEST(QueueingModel, ReplicasWithSeveralSlotsAreFoundByBisectionAsByALinearSearch) {
  for (const int slots : {1, 2, 4, 8}) {
    for (const double rate : {0.0, 3.0, 40.0, 250.0, 900.0}) {
      std::optional<int> linear;
      for (int c = 1; c <= 200 && !linear; ++c) {
        const auto p95 = response_percentile_ms(rate, 0.08, c * slots);
        if (p95 && *p95 <= 300) linear = c;
      }
      EXPECT_EQ(replicas_for_p95(rate, 0.08, 300, 200, slots), linear) << slots << " " << rate;
    }
  }
  EXPECT_FALSE(replicas_for_p95(10, 0.08, 300, 0).has_value());
  EXPECT_FALSE(replicas_for_p95(10, 0.08, 300, 5, 0).has_value());
}

}  // namespace
}  // namespace tidepool
