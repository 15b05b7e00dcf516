#include "core/efficiency_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kH100;

// 2 spines (spine-0 1:1, spine-1 2:1) x 2 leaves x 4 nodes x 8 GPUs in 2 NVLink domains of 4
// (`domains` changes that); node n is in leaf n / 4, leaf l under spine l / 2. Default links:
// NVLink 2400, PCIe 256, leaf 200, spine 200 Gbit/s.
Pool two_spine_pool(int domains = 2) {
  return test_support::make_test_pool({.spine_oversubscription = {1, 2},
                                       .leaves_per_spine = 2,
                                       .nodes_per_leaf = 4,
                                       .domains = domains});
}

// The first `count` GPUs of each listed node.
std::vector<Assignment> on_nodes(const std::vector<std::uint32_t>& nodes, int count) {
  std::vector<Assignment> out;
  for (std::uint32_t n : nodes) out.push_back({NodeId{n}, (GpuSet{1} << count) - 1});
  return out;
}

constexpr JobCommProfile kProfile{4'000'000'000, 500'000};  // 4 GB of gradients, 0.5 s compute

Bottleneck bottleneck_of(const Pool& pool, const std::vector<Assignment>& assignments) {
  return bottleneck(pool.topology().links, ring_span(pool, assignments));
}

TEST(EfficiencyModel, BottleneckPerSpanLevel) {
  const Pool pool = two_spine_pool();
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0}, 1)).link, CommLink::kNone);
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0}, 4)), (Bottleneck{CommLink::kNvlink, 2400, 1}));
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0}, 8)), (Bottleneck{CommLink::kPcie, 256, 1}));
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0, 1}, 4)), (Bottleneck{CommLink::kLeaf, 200, 1}));
  // Across leaves of the 1:1 spine the spine ties with the NIC; the outer link is named.
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0, 4}, 4)), (Bottleneck{CommLink::kSpine, 200, 1}));
  EXPECT_EQ(bottleneck_of(pool, on_nodes({8, 12}, 4)), (Bottleneck{CommLink::kSpine, 200, 2}));
  // Crossing both spines: the worst oversubscription counts.
  EXPECT_EQ(bottleneck_of(pool, on_nodes({0, 8}, 4)), (Bottleneck{CommLink::kSpine, 200, 2}));
}

TEST(EfficiencyModel, SlowestLinkWinsWhateverItsLevel) {
  Pool pool = two_spine_pool();
  LinkSpeeds links = pool.topology().links;
  links.leaf_gbps = 400;  // NIC faster than PCIe: PCIe binds inside a node split over domains
  const RingSpan ring = ring_span(pool, on_nodes({0, 1}, 8));
  EXPECT_EQ(bottleneck(links, ring), (Bottleneck{CommLink::kPcie, 256, 1}));
  // One GPU per node: no PCIe crossed, the NIC binds.
  EXPECT_EQ(bottleneck(links, ring_span(pool, on_nodes({0, 1, 2}, 1))).link, CommLink::kLeaf);
}

TEST(EfficiencyModel, OversubscriptionHalvesSpineBandwidth) {
  const Pool pool = two_spine_pool();
  const LinkSpeeds& links = pool.topology().links;
  const StepTime full = step_time(kProfile, links, ring_span(pool, on_nodes({0, 4}, 8)));
  const StepTime half = step_time(kProfile, links, ring_span(pool, on_nodes({8, 12}, 8)));
  EXPECT_EQ(full.latency_us, half.latency_us);
  EXPECT_NEAR(static_cast<double>(half.bandwidth_us), 2.0 * static_cast<double>(full.bandwidth_us),
              2.0);
  // 2 x 15/16 x 4 GB x 8 bit / 200 Gbit/s = 0.3 s at 1:1.
  EXPECT_EQ(full.bandwidth_us, 300'000);
  EXPECT_EQ(full.latency_us, 2 * 15 * kRingHopLatencyUs);
}

TEST(EfficiencyModel, CompactPlacementHasNoSlowdown) {
  const Pool pool = two_spine_pool();
  for (const auto& assignments :
       {on_nodes({0}, 1), on_nodes({0}, 4), on_nodes({0}, 8), on_nodes({0, 1, 2, 3}, 8),
        on_nodes({0, 1, 2, 3, 4, 5, 6, 7}, 8)}) {
    const PlacementEfficiency e = placement_efficiency(kProfile, pool, assignments);
    EXPECT_EQ(e.actual.total_us(), e.ideal.total_us());
    EXPECT_DOUBLE_EQ(e.slowdown(), 1.0);
    EXPECT_EQ(scale_runtime(3600, e), 3600);
  }
  // What place_gang picks on an empty pool is the ideal.
  auto task = make_task_shape(8, kMilliPerGpu, 1000, 1024, ModelSet::any());
  ASSERT_TRUE(task.has_value());
  const GangResult placed = place_gang(pool, GangRequest{3, *task, {}});
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(scale_runtime(3600, placement_efficiency(kProfile, pool, placed->assignments)), 3600);
}

TEST(EfficiencyModel, IdealSpanFollowsThePoolShape) {
  const Pool pool = two_spine_pool();
  const auto ideal = [&](int gpus) { return ideal_ring_span(pool, gpus); };
  EXPECT_EQ(ideal(4).span, (GangSpan{1, 1, 1, 1, 0}));
  EXPECT_EQ(ideal(8).span, (GangSpan{2, 1, 1, 1, 0}));
  EXPECT_EQ(ideal(20).span, (GangSpan{5, 3, 1, 1, 0}));
  EXPECT_EQ(ideal(64).span, (GangSpan{16, 8, 2, 1, 0}));
  EXPECT_EQ(ideal(64).oversubscription, 1);  // the better spine holds 64 GPUs
  EXPECT_EQ(ideal(128).span, (GangSpan{32, 16, 4, 2, 0}));
  EXPECT_EQ(ideal(128).oversubscription, 2);
  EXPECT_EQ(ideal(1).gpus, 1);
  EXPECT_EQ(ideal(0).span, GangSpan{});
  // A ring of whole nodes reaches as far as the ideal (its tasks are split over domains).
  const GangSpan actual = ring_span(pool, on_nodes({0, 1, 2}, 8)).span;
  EXPECT_EQ(actual, (GangSpan{6, 3, 1, 1, 3}));
  EXPECT_EQ(ideal(24).span, (GangSpan{6, 3, 1, 1, 0}));
}

TEST(EfficiencyModel, SpanningLeavesIsSlowerThanSpanningNodes) {
  const Pool pool = two_spine_pool();
  const auto nodes = placement_efficiency(kProfile, pool, on_nodes({8, 9}, 8));
  const auto leaves = placement_efficiency(kProfile, pool, on_nodes({8, 12}, 8));
  EXPECT_GT(leaves.actual.comm_us(), nodes.actual.comm_us());
  EXPECT_GT(leaves.slowdown(), nodes.slowdown());
  EXPECT_GT(scale_runtime(3600, leaves), scale_runtime(3600, nodes));
  EXPECT_LT(leaves.est_mfu(), nodes.est_mfu());
}

TEST(EfficiencyModel, ScatteredPlacementIsSlowerThanCompact) {
  const Pool pool = two_spine_pool();
  // 8 GPUs, one per node, over two leaves of the 2:1 spine, against one node.
  const auto e = placement_efficiency(kProfile, pool, on_nodes({8, 9, 10, 11, 12, 13, 14, 15}, 1));
  EXPECT_EQ(e.ideal_bottleneck.link, CommLink::kPcie);
  EXPECT_EQ(e.actual_bottleneck, (Bottleneck{CommLink::kSpine, 200, 2}));
  EXPECT_GT(e.slowdown(), 1.4);  // (0.5 + 0.56) / (0.5 + 0.219) s
  EXPECT_GT(scale_runtime(3600, e), 3600);
  EXPECT_LE(static_cast<double>(scale_runtime(3600, e)), 3600.0 * e.slowdown() + 1.0);
  EXPECT_GE(static_cast<double>(scale_runtime(3600, e)), 3600.0 * e.slowdown() - 1.0);
}

TEST(EfficiencyModel, CommNeverFasterWithMoreGpusOrSlowerLinks) {
  const Pool pool = two_spine_pool(/*domains=*/1);  // one domain of 8 per node
  const LinkSpeeds& links = pool.topology().links;
  for (std::uint64_t job = 0; job < 50; ++job) {
    const JobCommProfile profile = draw_comm_profile(7, job);
    std::int64_t previous = 0;
    for (int n = 1; n <= 8; ++n) {
      const std::int64_t comm =
          step_time(profile, links, ring_span(pool, on_nodes({0}, n))).comm_us();
      EXPECT_GE(comm, previous) << "job " << job << ", " << n << " GPUs in one domain";
      previous = comm;
    }
    // 8 GPUs: one domain, then one per node in a leaf, then over leaves at 1:1 and 2:1.
    const std::int64_t domain =
        step_time(profile, links, ring_span(pool, on_nodes({0}, 8))).comm_us();
    const std::int64_t leaf =
        step_time(profile, links, ring_span(pool, on_nodes({0, 1, 2, 3}, 2))).comm_us();
    const std::int64_t spine =
        step_time(profile, links, ring_span(pool, on_nodes({0, 1, 4, 5}, 2))).comm_us();
    const std::int64_t oversubscribed =
        step_time(profile, links, ring_span(pool, on_nodes({8, 9, 12, 13}, 2))).comm_us();
    EXPECT_LT(domain, leaf);
    EXPECT_LE(leaf, spine);
    EXPECT_LT(spine, oversubscribed);
  }
}

TEST(EfficiencyModel, ProfilesAreDeterministicPerSeedAndJob) {
  std::set<std::int64_t> sizes;
  int small = 0, large = 0;
  for (std::uint64_t job = 0; job < 2000; ++job) {
    const JobCommProfile a = draw_comm_profile(42, job);
    const JobCommProfile b = draw_comm_profile(42, job);
    EXPECT_EQ(a.gradient_bytes, b.gradient_bytes);
    EXPECT_EQ(a.compute_us, b.compute_us);
    EXPECT_GE(a.gradient_bytes, kMinGradientBytes);
    EXPECT_LE(a.gradient_bytes, kMaxGradientBytes);
    EXPECT_GE(a.compute_us, kMinComputeUs);
    EXPECT_LE(a.compute_us, kMaxComputeUs);
    sizes.insert(a.gradient_bytes);
    // Log-uniform: a quarter of the log range below 378 MB, a quarter above 5.3 GB.
    if (a.gradient_bytes < 378'000'000) ++small;
    if (a.gradient_bytes > 5'300'000'000) ++large;
  }
  EXPECT_GT(sizes.size(), 1500U);
  EXPECT_NEAR(small, 500, 100);
  EXPECT_NEAR(large, 500, 100);
  // Another seed draws other profiles; the order of asking does not matter.
  int same = 0;
  for (std::uint64_t job = 0; job < 100; ++job) {
    same += draw_comm_profile(43, job).gradient_bytes == draw_comm_profile(42, job).gradient_bytes;
  }
  EXPECT_LT(same, 5);
  Rng rng(99);
  const JobCommProfile first = draw_comm_profile(rng);
  Rng again(99);
  EXPECT_EQ(draw_comm_profile(again).gradient_bytes, first.gradient_bytes);
}

TEST(EfficiencyModel, MfuAndCommShareStayInBounds) {
  const Pool pool = two_spine_pool();
  const std::vector<std::vector<Assignment>> placements = {
      on_nodes({0}, 1),    on_nodes({0}, 2),    on_nodes({0}, 8),
      on_nodes({0, 1}, 8), on_nodes({0, 8}, 1), on_nodes({0, 4, 8, 12}, 8)};
  for (std::uint64_t job = 0; job < 200; ++job) {
    const JobCommProfile profile = draw_comm_profile(1, job);
    for (const auto& assignments : placements) {
      const PlacementEfficiency e = placement_efficiency(profile, pool, assignments);
      EXPECT_GT(e.est_mfu(), 0.0);
      EXPECT_LE(e.est_mfu(), kMfuWithoutComm);
      EXPECT_GE(e.comm_share(), 0.0);
      EXPECT_LT(e.comm_share(), 1.0);
      EXPECT_NEAR(e.est_mfu(), kMfuWithoutComm * (1.0 - e.comm_share()), 1e-12);
      EXPECT_GE(e.slowdown(), 1.0);
      EXPECT_GE(scale_runtime(1000, e), 1000);
    }
  }
  // A single GPU does not communicate: full MFU, no comm share.
  const PlacementEfficiency single = placement_efficiency(kProfile, pool, on_nodes({3}, 1));
  EXPECT_EQ(single.actual.comm_us(), 0);
  EXPECT_DOUBLE_EQ(single.est_mfu(), kMfuWithoutComm);
  EXPECT_DOUBLE_EQ(single.comm_share(), 0.0);
}

}  // namespace
}  // namespace tidepool
