#include "core/service_replicas.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"

namespace tidepool {
namespace {

using P = ReplicaPhase;

TEST(ServiceReplicasTest, ShortOfTheCountItAddsTheDifferenceDrainingNotCounted) {
  const std::vector<ReplicaView> replicas = {
      {1, P::kReady, 0}, {2, P::kDraining, 5}, {3, P::kStarting, 9}};
  EXPECT_EQ(live_replicas(replicas), 2);
  const ReplicaPlan plan = plan_replicas(replicas, 5);
  EXPECT_EQ(plan.add, 3);
  EXPECT_TRUE(plan.withdraw.empty() && plan.stop.empty() && plan.drain.empty());
  EXPECT_EQ(plan_replicas(replicas, 2).add, 0);
}

TEST(ServiceReplicasTest, OverTheCountItTakesWaitingThenStartingThenTheNewestReady) {
  const std::vector<ReplicaView> replicas = {{1, P::kReady, 0},     {2, P::kReady, 50},
                                             {3, P::kStarting, 60}, {4, P::kPending, 70},
                                             {5, P::kPending, 80},  {6, P::kDraining, 90}};
  const ReplicaPlan one = plan_replicas(replicas, 4);
  EXPECT_EQ(one.withdraw, (std::vector<std::uint32_t>{5}));
  EXPECT_TRUE(one.stop.empty() && one.drain.empty());
  const ReplicaPlan four = plan_replicas(replicas, 1);
  EXPECT_EQ(four.withdraw, (std::vector<std::uint32_t>{5, 4}));
  EXPECT_EQ(four.stop, (std::vector<std::uint32_t>{3}));
  EXPECT_EQ(four.drain, (std::vector<std::uint32_t>{2}));
  const ReplicaPlan all = plan_replicas(replicas, -3);
  EXPECT_EQ(all.drain, (std::vector<std::uint32_t>{2, 1}));
  EXPECT_EQ(all.add, 0);
}

// Property: whatever the replicas, the plan leaves exactly `wanted` live ones, touches no
// draining replica, and takes a ready one only when no pending or starting one is left.
TEST(ServiceReplicasTest, ThePlanAlwaysLeavesTheWantedCount) {
  Rng rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<ReplicaView> replicas;
    const int n = static_cast<int>(rng.below(12));
    for (int i = 0; i < n; ++i) {
      replicas.push_back({static_cast<std::uint32_t>(i), static_cast<P>(rng.below(4)),
                          static_cast<Seconds>(rng.below(100))});
    }
    const int wanted = static_cast<int>(rng.below(14));
    const ReplicaPlan plan = plan_replicas(replicas, wanted);
    const int removed =
        static_cast<int>(plan.withdraw.size() + plan.stop.size() + plan.drain.size());
    EXPECT_EQ(live_replicas(replicas) + plan.add - removed, wanted) << round;
    EXPECT_TRUE(plan.add == 0 || removed == 0);
    int waiting = 0;
    for (const ReplicaView& r : replicas) {
      waiting += r.phase == P::kPending || r.phase == P::kStarting ? 1 : 0;
    }
    if (!plan.drain.empty()) {
      EXPECT_EQ(static_cast<int>(plan.withdraw.size() + plan.stop.size()), waiting) << round;
    }
    for (const std::uint32_t id : plan.drain) EXPECT_EQ(replicas[id].phase, P::kReady);
  }
}

}  // namespace
}  // namespace tidepool
