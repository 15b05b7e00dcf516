#include "sim/capacity_search.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "config/test_source_dir.h"
#include "sim/scaled_pool.h"

namespace tidepool {
namespace {

TEST(NextProbeSizes, WhileEveryProbeMissesTheLargestIsDoubledOncePerThread) {
  EXPECT_EQ(next_probe_sizes({{64, false}}, 1000, 1), (std::vector<int>{128}));
  EXPECT_EQ(next_probe_sizes({{64, false}, {128, false}}, 1000, 2), (std::vector<int>{256, 512}));
  // Capped at the largest allowed, then over once that misses too.
  EXPECT_EQ(next_probe_sizes({{64, false}}, 100, 3), (std::vector<int>{100}));
  EXPECT_TRUE(next_probe_sizes({{64, false}, {100, false}}, 100, 3).empty());
}

TEST(NextProbeSizes, WhileEveryProbeMeetsTheSmallestIsHalved) {
  EXPECT_EQ(next_probe_sizes({{64, true}}, 1000, 1), (std::vector<int>{32}));
  EXPECT_EQ(next_probe_sizes({{64, true}, {128, true}}, 1000, 2), (std::vector<int>{32, 16}));
  EXPECT_TRUE(next_probe_sizes({{1, true}}, 1000, 2).empty());  // one node meets it
}

TEST(NextProbeSizes, BisectsBetweenTheLargestMissAndTheSmallestMeet) {
  // (64, 128) in threads + 1 equal parts.
  EXPECT_EQ(next_probe_sizes({{64, false}, {128, true}}, 1000, 1), (std::vector<int>{96}));
  EXPECT_EQ(next_probe_sizes({{64, false}, {128, true}}, 1000, 3), (std::vector<int>{80, 96, 112}));
  // A meet above the smallest meet, or a miss above it, does not move the bracket.
  EXPECT_EQ(next_probe_sizes({{64, false}, {96, true}, {200, false}}, 1000, 1),
            (std::vector<int>{80}));
  // Adjacent sizes: over.
  EXPECT_TRUE(next_probe_sizes({{95, false}, {96, true}}, 1000, 4).empty());
}

TEST(ScaledPoolText, CountsGpusOfRepeatedNodesAndNamesTheShape) {
  const ClusterSpec philly = test_support::shipped_cluster("philly-512");
  EXPECT_EQ(gpus_of_scaled(philly, 64), 512);
  EXPECT_EQ(gpus_of_scaled(philly, 65), 520);
  auto scaled = scale_cluster(philly, 80);
  ASSERT_TRUE(scaled.has_value()) << scaled.error().message();
  EXPECT_EQ(pool_shape_text(*scaled), "80 nodes of 8 P100 on 10 leaves");
  EXPECT_EQ(gpus_of_scaled(philly, 80), 640);
}

}  // namespace
}  // namespace tidepool
