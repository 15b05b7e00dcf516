#include "core/replica_spread.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "core/simple_placement.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::make_test_pool;

TaskShape replica_task(int gpus, MilliGpu milli = kMilliPerGpu) {
  auto task = make_task_shape(gpus, milli, 1000, 1024);
  EXPECT_TRUE(task.has_value());
  return *task;
}

TEST(ReplicaSpreadTest, NamesParse) {
  EXPECT_EQ(parse_spread_level("node"), SpreadLevel::kNode);
  EXPECT_EQ(parse_spread_level("leaf"), SpreadLevel::kLeaf);
  auto bad = parse_spread_level("rack");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "spread");
  EXPECT_EQ(spread_level_name(SpreadLevel::kLeaf), "leaf");
}

TEST(ReplicaSpreadTest, SpreadsOverNodesThenLeavesAndPacksWithinTheLeastUsed) {
  // 2 leaves x 2 nodes of 8 GPUs: n0, n1 under leaf-0, n2, n3 under leaf-1.
  Pool pool = make_test_pool({.leaves_per_spine = 2});
  const TaskShape one = replica_task(1);
  // Another job half fills n1: best fit prefers it among the empty-of-replicas nodes.
  ASSERT_TRUE(pool.allocate(replica_task(4), {NodeId{1}, 0b1111}).has_value());
  auto first = place_replica(pool, one, {}, {});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->node, NodeId{1});
  EXPECT_EQ(first->gpus, GpuSet{0b1'0000});
  // With a replica on n1, the next goes to another node; by leaf, to the other leaf.
  const std::vector<NodeId> on_n1 = {NodeId{1}};
  EXPECT_NE(place_replica(pool, one, on_n1, {})->node, NodeId{1});
  const NodeId by_leaf = place_replica(pool, one, on_n1, {SpreadLevel::kLeaf, 0})->node;
  EXPECT_TRUE(by_leaf == NodeId{2} || by_leaf == NodeId{3});
  // Every node holds one: a second per node, at most max_per_node.
  const std::vector<NodeId> everywhere = {NodeId{0}, NodeId{1}, NodeId{2}, NodeId{3}};
  EXPECT_TRUE(place_replica(pool, one, everywhere, {}).has_value());
  EXPECT_FALSE(place_replica(pool, one, everywhere, {SpreadLevel::kNode, 1}).has_value());
  // Room on no node (each has a GPU taken): none.
  for (std::uint32_t n : {0U, 2U, 3U}) {
    ASSERT_TRUE(pool.allocate(one, {NodeId{n}, 0b1}).has_value());
  }
  EXPECT_FALSE(place_replica(pool, replica_task(8), {}, {}).has_value());
}

// Replicas placed one at a time on random pools, with other work taking room at random: a node
// (or leaf) gets another replica only while every node (leaf) with fewer has no room, and
// max_per_node always holds.
TEST(ReplicaSpreadPropertyTest, NoNodeOrLeafStacksReplicasWhileOneWithFewerHasRoom) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng(seed);
    Pool pool = make_test_pool({.leaves_per_spine = 1 + static_cast<int>(rng.below(3)),
                                .nodes_per_leaf = 1 + static_cast<int>(rng.below(4))});
    const ReplicaSpread spread{rng.below(2) == 0 ? SpreadLevel::kNode : SpreadLevel::kLeaf,
                               static_cast<int>(rng.below(3))};
    const TaskShape replica =
        rng.below(3) == 0 ? replica_task(1, 500) : replica_task(1 + static_cast<int>(rng.below(3)));
    std::vector<NodeId> replicas;
    for (int step = 0; step < 40; ++step) {
      if (rng.below(3) == 0) {  // other work takes a whole GPU somewhere, when it can
        const NodeId node{static_cast<std::uint32_t>(rng.below(pool.node_count()))};
        const TaskShape other = replica_task(1);
        if (fits(pool.spec(node), pool.state(node), other)) {
          ASSERT_TRUE(
              pool.allocate(other, {node, task_gpus_on_node(pool.spec(node), pool.state(node),
                                                            other, NodeRule::kFirstFit)})
                  .has_value());
        }
        continue;
      }
      // What each node and leaf holds before this replica.
      std::vector<int> on_node(pool.node_count(), 0);
      std::vector<int> on_leaf(pool.topology().leaves.size(), 0);
      for (NodeId n : replicas) {
        ++on_node[n.value];
        ++on_leaf[pool.spec(n).leaf.value];
      }
      const auto count = [&](NodeId n) {
        return spread.level == SpreadLevel::kNode ? on_node[n.value]
                                                  : on_leaf[pool.spec(n).leaf.value];
      };
      const auto allowed = [&](NodeId n) {
        return fits(pool.spec(n), pool.state(n), replica) &&
               (spread.max_per_node == 0 || on_node[n.value] < spread.max_per_node);
      };
      const auto placed = place_replica(pool, replica, replicas, spread);
      bool any = false;
      for (int i = 0; i < pool.node_count(); ++i) any = any || allowed(NodeId{std::uint32_t(i)});
      ASSERT_EQ(placed.has_value(), any) << "seed " << seed << " step " << step;
      if (!placed) continue;
      ASSERT_TRUE(allowed(placed->node));
      for (int i = 0; i < pool.node_count(); ++i) {
        const NodeId other{static_cast<std::uint32_t>(i)};
        EXPECT_FALSE(allowed(other) && count(other) < count(placed->node))
            << "seed " << seed << " step " << step << ": node " << placed->node.value
            << " got a replica while node " << i << " with fewer had room";
      }
      ASSERT_TRUE(pool.allocate(replica, *placed).has_value());
      replicas.push_back(placed->node);
    }
  }
}

}  // namespace
}  // namespace tidepool
