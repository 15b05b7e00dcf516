#include "core/lane_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tidepool {
namespace {

// One contract over every order (as EveryPolicyTest is for placement policies).
class EveryLaneOrderTest : public ::testing::TestWithParam<LaneOrderKind> {
 protected:
  void SetUp() override {
    auto made = make_lane_order(GetParam(), LaneOrderConfig{});
    ASSERT_TRUE(made.has_value());
    order_ = std::move(*made);
  }

  // Jobs with attained and remaining service across all bands, from a seed.
  static std::vector<LaneJob> jobs(std::uint32_t seed, int count) {
    std::mt19937 rng(seed);
    std::vector<LaneJob> out;
    for (int i = 0; i < count; ++i) {
      const std::int64_t gpus = 1 << (rng() % 4);
      out.push_back(LaneJob{JobId{static_cast<std::uint32_t>(i)},
                            static_cast<Seconds>(rng() % 1000), gpus,
                            static_cast<std::int64_t>(rng() % 100'000),
                            60 * gpus + static_cast<std::int64_t>(rng() % 200'000)});
    }
    return out;
  }

  std::vector<JobId> sorted(std::vector<LaneJob> lane) const {
    std::sort(lane.begin(), lane.end(), [&](const LaneJob& a, const LaneJob& b) {
      const LaneRank ra = order_->rank(a), rb = order_->rank(b);
      return ra != rb ? ra < rb : a.id < b.id;
    });
    std::vector<JobId> ids;
    for (const LaneJob& j : lane) ids.push_back(j.id);
    return ids;
  }

  std::unique_ptr<LaneOrder> order_;
};

TEST_P(EveryLaneOrderTest, RanksTheSameJobTheSameAndNeverAsPromoted) {
  for (const LaneJob& job : jobs(1, 200)) {
    const LaneRank rank = order_->rank(job);
    EXPECT_EQ(rank, order_->rank(job));
    EXPECT_GT(rank.band, kPromotedBand);
  }
}

TEST_P(EveryLaneOrderTest, GivesOneOrderWhateverTheInputOrder) {
  auto lane = jobs(2, 300);
  const auto first = sorted(lane);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(lane.begin(), lane.end(), rng);
    EXPECT_EQ(sorted(lane), first);
  }
}

TEST_P(EveryLaneOrderTest, SlicesOnlyJobsPastTheFirstThresholdAndNeverBothWays) {
  const auto lane = jobs(3, 120);
  for (const LaneJob& running : lane) {
    const bool passed = running.attained_gpu_seconds >= LaneOrderConfig{}.las_thresholds.front();
    for (const LaneJob& waiting : lane) {
      const LaneRank rank = order_->rank(waiting);
      const bool one = order_->may_slice(running, rank);
      const bool other = order_->may_slice(waiting, order_->rank(running));
      EXPECT_FALSE(one && other) << running.id.value << " and " << waiting.id.value;
      if (!one) continue;
      EXPECT_TRUE(order_->slices() && passed);
      EXPECT_LT(rank, order_->rank(running));
      // Another waiting job of the same slice class may stop the same running job.
      for (const LaneJob& same : lane) {
        if (order_->slice_class(order_->rank(same)) == order_->slice_class(rank)) {
          EXPECT_TRUE(order_->may_slice(running, order_->rank(same)));
        }
      }
    }
  }
}

TEST_P(EveryLaneOrderTest, IsClearlyAheadOfEveryJobRankedBehindOneItIsClearlyAheadOf) {
  // The scheduler looks for a slicing victim by comparing with the sliceable job ranked last.
  const auto lane = jobs(5, 120);
  for (const LaneJob& waiting : lane) {
    const LaneRank w = order_->rank(waiting);
    for (const LaneJob& a : lane) {
      if (!order_->clearly_ahead(w, order_->rank(a))) continue;
      for (const LaneJob& b : lane) {
        if (order_->rank(a) <= order_->rank(b)) {
          EXPECT_TRUE(order_->clearly_ahead(w, order_->rank(b)));
        }
      }
    }
    for (const LaneJob& running : lane) {
      EXPECT_EQ(order_->may_slice(running, w),
                order_->sliceable(running) && order_->clearly_ahead(w, order_->rank(running)));
    }
  }
}

TEST_P(EveryLaneOrderTest, NamesItselfAndExplainsARank) {
  EXPECT_EQ(order_->name(), lane_order_name(GetParam()));
  EXPECT_EQ(parse_lane_order(order_->name()), GetParam());
  EXPECT_FALSE(order_->explain(jobs(4, 1).front()).empty());
}

INSTANTIATE_TEST_SUITE_P(Orders, EveryLaneOrderTest,
                         ::testing::Values(LaneOrderKind::kFifo, LaneOrderKind::kLeastAttained,
                                           LaneOrderKind::kShortestRemaining),
                         [](const auto& info) { return std::string(lane_order_name(info.param)); });

TEST(LaneOrder, FifoIsSubmissionOrderAndNeverSlices) {
  auto order = *make_lane_order(LaneOrderKind::kFifo, {});
  const LaneJob early{JobId{2}, 10, 1, 90'000, 60};
  const LaneJob late{JobId{1}, 20, 1, 0, 60};
  EXPECT_LT(order->rank(early), order->rank(late));
  EXPECT_FALSE(order->slices());
  EXPECT_FALSE(order->may_slice(early, order->rank(late)));
}

TEST(LaneOrder, LeastAttainedBandsByThresholdThenSubmission) {
  auto order = *make_lane_order(LaneOrderKind::kLeastAttained,
                                LaneOrderConfig{.las_thresholds = {3600, 36000}});
  const LaneJob fresh{JobId{1}, 50, 1, 0, 60};
  const LaneJob served{JobId{2}, 10, 1, 3600, 60};    // at the first threshold: band 1
  const LaneJob long_run{JobId{3}, 5, 1, 40000, 60};  // past the last: band 2
  EXPECT_EQ(order->rank(fresh).band, 0);
  EXPECT_EQ(order->rank(served).band, 1);
  EXPECT_EQ(order->rank(long_run).band, 2);
  EXPECT_LT(order->rank(fresh), order->rank(served));
  // A fresh job may stop one past a threshold, not one of its own band.
  EXPECT_TRUE(order->may_slice(served, order->rank(fresh)));
  EXPECT_FALSE(order->may_slice(fresh, order->rank(served)));
  const LaneJob other_served{JobId{4}, 1, 1, 5000, 60};
  EXPECT_FALSE(order->may_slice(served, order->rank(other_served)));
  EXPECT_EQ(order->explain(served), "attained 1.0 GPU-h, band 2 of 3");
}

TEST(LaneOrder, ShortestRemainingSlicesOnlyForWorkAtMostHalfAsLong) {
  auto order = *make_lane_order(LaneOrderKind::kShortestRemaining, {});
  const LaneJob running{JobId{1}, 0, 1, 7200, 10'000};
  EXPECT_TRUE(order->may_slice(running, order->rank(LaneJob{JobId{2}, 5, 1, 0, 5'000})));
  EXPECT_FALSE(order->may_slice(running, order->rank(LaneJob{JobId{3}, 5, 1, 0, 5'001})));
  EXPECT_LT(order->rank(LaneJob{JobId{2}, 99, 1, 0, 5'000}),
            order->rank(LaneJob{JobId{3}, 1, 1, 0, 5'001}));
}

TEST(LaneOrder, RefusesBadThresholdsAndUnknownNames) {
  for (auto bad : {std::vector<std::int64_t>{}, std::vector<std::int64_t>{0, 10},
                   std::vector<std::int64_t>{10, 5}, std::vector<std::int64_t>{10, 10}}) {
    auto made =
        make_lane_order(LaneOrderKind::kLeastAttained, LaneOrderConfig{.las_thresholds = bad});
    ASSERT_FALSE(made.has_value());
    EXPECT_EQ(made.error().field, "las_thresholds");
  }
  auto unknown = parse_lane_order("sjf");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "order");
  EXPECT_NE(unknown.error().reason.find("fifo, las, srpt"), std::string::npos);
}

TEST(LaneOrder, PromotionAfterTheLimitOnly) {
  EXPECT_FALSE(promoted_at(100, 100 + 3599, 3600));
  EXPECT_TRUE(promoted_at(100, 100 + 3600, 3600));
  EXPECT_FALSE(promoted_at(0, 1'000'000, 0));  // 0: never
}

}  // namespace
}  // namespace tidepool
