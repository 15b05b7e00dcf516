#include "core/mig_placement.h"

#include <gtest/gtest.h>

#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/feasibility.h"
#include "core/job.h"
#include "core/replica_spread.h"
#include "core/rng.h"
#include "core/simple_placement.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using P = MigProfile;
using test_support::kA100;
using test_support::kT4;
using test_support::single_leaf_pool;

NodeSpec a100_node(std::string name, int gpus, GpuSet on_demand) {
  NodeSpec node{.name = std::move(name),
                .model = kA100,
                .gpu_count = gpus,
                .milli_cpu = 64'000,
                .memory_mib = 512 * 1024,
                .leaf = LeafId{0}};
  node.mig_on_demand = on_demand;
  return node;
}

TaskShape mig_task(P profile, MilliCpu cpu = 1000) {
  auto task = make_mig_task_shape(profile, cpu, 1024);
  EXPECT_TRUE(task.has_value());
  return *task;
}

TaskShape whole(int gpus) { return *make_task_shape(gpus, kMilliPerGpu, 1000, 1024); }

void expect_invariants(const Pool& pool) {
  const auto ok = pool.check_invariants();
  EXPECT_TRUE(ok.has_value()) << ok.error().message();
}

TEST(MigTaskShapeTest, CountsTheProfilesShareAndRunsAlone) {
  const TaskShape small = mig_task(P::k1g10gb);
  EXPECT_EQ(small.gpu_count, 1);
  EXPECT_EQ(small.milli_per_gpu, 143);  // 1 of 7 compute slices, rounded up
  EXPECT_FALSE(small.is_fractional());
  EXPECT_TRUE(small.is_mig());
  EXPECT_EQ(task_class(small), kFractionalClass);
  EXPECT_EQ(mig_task(P::k7g80gb).milli_per_gpu, kMilliPerGpu);
  EXPECT_TRUE(check_mig_task(small, 1).has_value());
  const auto gang = check_mig_task(small, 2);
  ASSERT_FALSE(gang.has_value());
  EXPECT_EQ(gang.error().field, "task_count");
  TaskShape wrong = small;
  wrong.milli_per_gpu = 500;
  EXPECT_EQ(check_mig_task(wrong, 1).error().field, "mig_profile");
  EXPECT_NE(TaskShapeHash{}(small), TaskShapeHash{}(*make_task_shape(1, 143, 1000, 1024)));
}

TEST(MigPoolTest, RefusesMigWhereItCannotBe) {
  const auto create = [](const NodeSpec& node) {
    return Pool::create(test_support::t4_and_a100_catalog(), Topology::single_leaf(), {node});
  };
  NodeSpec t4 = a100_node("t4", 4, 0b1);
  t4.model = kT4;
  EXPECT_FALSE(create(t4).has_value());
  EXPECT_FALSE(create(a100_node("past", 4, 0b1'0000)).has_value());
  NodeSpec twice = a100_node("twice", 4, 0b1);
  twice.mig_partitions.push_back({0, {{P::k7g80gb, 0}}});
  EXPECT_FALSE(create(twice).has_value());
  NodeSpec invalid = a100_node("invalid", 4, 0);
  invalid.mig_partitions.push_back({1, {{P::k4g40gb, 0}, {P::k3g40gb, 0}}});
  const auto refused = create(invalid);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("GPU 1"), std::string::npos)
      << refused.error().message();
  NodeSpec empty = a100_node("empty", 4, 0);
  empty.mig_partitions.push_back({2, {}});
  EXPECT_FALSE(create(empty).has_value());
}

TEST(MigPoolTest, AnOnDemandGpuIsPartitionedWhileItHoldsInstancesAndWholeAgainAfter) {
  Pool pool = single_leaf_pool({a100_node("a", 2, 0b11)});
  const NodeId a{0};
  EXPECT_EQ(pool.state(a).whole_free_gpus, 2);
  const TaskShape small = mig_task(P::k1g10gb);
  const auto first = pack_mig_task(pool, small);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->gpus, GpuSet{0b01});
  ASSERT_TRUE(pool.allocate(small, *first).has_value());
  expect_invariants(pool);
  // GPU 0 is in MIG mode: no whole or shared task goes there, quotas count the slice.
  EXPECT_EQ(pool.state(a).mig_gpus, GpuSet{0b01});
  EXPECT_EQ(pool.state(a).free_milli[0], 0);
  EXPECT_EQ(pool.state(a).whole_free_gpus, 1);
  EXPECT_EQ(pool.allocated_milli_gpu(), 143);
  EXPECT_FALSE(fits(pool.spec(a), pool.state(a), whole(2)));
  EXPECT_FALSE(pool.allocate(whole(1), {a, 0b01}).has_value());
  // The next small instance joins it on GPU 0 rather than breaking GPU 1.
  const auto second = pack_mig_task(pool, small);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->gpus, GpuSet{0b01});
  ASSERT_TRUE(pool.allocate(small, *second).has_value());
  // A whole task on GPU 1 closes it to MIG; a 7g.80gb then fits nowhere.
  ASSERT_TRUE(pool.allocate(whole(1), {a, 0b10}).has_value());
  EXPECT_FALSE(fits(pool.spec(a), pool.state(a), mig_task(P::k7g80gb)));
  EXPECT_FALSE(pack_mig_task(pool, mig_task(P::k7g80gb)).has_value());
  EXPECT_FALSE(pool.allocate(mig_task(P::k7g80gb), {a, 0b10, 0}).has_value());
  expect_invariants(pool);
  // The instances leave: GPU 0 is whole again.
  ASSERT_TRUE(pool.release(small, *second).has_value());
  ASSERT_TRUE(pool.release(small, *first).has_value());
  EXPECT_FALSE(pool.release(small, *first).has_value());
  EXPECT_EQ(pool.state(a).mig_gpus, GpuSet{0});
  EXPECT_EQ(pool.state(a).free_milli[0], kMilliPerGpu);
  EXPECT_EQ(pool.allocated_milli_gpu(), kMilliPerGpu);
  expect_invariants(pool);
}

TEST(MigPoolTest, APartitionedGpuOffersOnlyItsInstances) {
  NodeSpec node = a100_node("p", 2, 0);
  node.mig_partitions.push_back({1, {{P::k3g40gb, 4}, {P::k2g20gb, 0}, {P::k1g10gb, 2}}});
  Pool pool = single_leaf_pool({node});
  const NodeId p{0};
  // GPU 1 is in MIG mode from the start: whole tasks get GPU 0 only.
  EXPECT_EQ(pool.state(p).mig_gpus, GpuSet{0b10});
  EXPECT_EQ(pool.state(p).whole_free_gpus, 1);
  EXPECT_FALSE(fits(pool.spec(p), pool.state(p), whole(2)));
  EXPECT_FALSE(fits(pool.spec(p), pool.state(p), mig_task(P::k4g40gb)));
  EXPECT_FALSE(pool.allocate(mig_task(P::k1g10gb), {p, 0b10, 3}).has_value());  // not offered
  const auto third = pack_mig_task(pool, mig_task(P::k3g40gb));
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(*third, (Assignment{p, 0b10, 4}));
  ASSERT_TRUE(pool.allocate(mig_task(P::k3g40gb), *third).has_value());
  EXPECT_FALSE(fits(pool.spec(p), pool.state(p), mig_task(P::k3g40gb)));
  EXPECT_TRUE(fits(pool.spec(p), pool.state(p), mig_task(P::k1g10gb)));
  expect_invariants(pool);
  // Released, the GPU stays in MIG mode.
  ASSERT_TRUE(pool.release(mig_task(P::k3g40gb), *third).has_value());
  EXPECT_EQ(pool.state(p).mig_gpus, GpuSet{0b10});
  EXPECT_EQ(pool.state(p).free_milli[1], 0);
  expect_invariants(pool);
  // Feasibility knows which profiles the pool could ever hold.
  Job job;
  job.gang.task = mig_task(P::k4g40gb);
  EXPECT_FALSE(check_can_ever_start(job, pool, nullptr).has_value());
  job.gang.task = mig_task(P::k2g20gb);
  EXPECT_TRUE(check_can_ever_start(job, pool, nullptr).has_value());
}

TEST(MigPoolTest, ACordonedNodeOffersNoInstance) {
  Pool pool = single_leaf_pool({a100_node("a", 1, 0b1), a100_node("b", 1, 0b1)});
  ASSERT_TRUE(pool.set_schedulable(NodeId{0}, false).has_value());
  EXPECT_FALSE(pool.mig_usable(NodeId{0}, 0));
  const auto where = pack_mig_task(pool, mig_task(P::k2g20gb));
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->node, NodeId{1});
  ASSERT_TRUE(pool.set_schedulable(NodeId{1}, false).has_value());
  EXPECT_FALSE(pack_mig_task(pool, mig_task(P::k2g20gb)).has_value());
  EXPECT_FALSE(pool.allocate(mig_task(P::k2g20gb), *where).has_value());
  expect_invariants(pool);
}

TEST(MigPoolTest, EveryGangEntryPointAndTheReplicaSpreadPlaceMigTasks) {
  Pool pool = single_leaf_pool({a100_node("a", 2, 0b11), a100_node("b", 2, 0b11)});
  const GangRequest request{.task_count = 1, .task = mig_task(P::k3g40gb), .topology = {}};
  // Packing opens the high half for a 3g.40gb (the low one is a 4g.40gb's only place); first fit
  // takes the lowest start.
  for (const auto& [placed, start] :
       {std::pair{place_gang(pool, request), 4},
        std::pair{place_gang_by_node_rule(pool, request, NodeRule::kBestFit), 4},
        std::pair{place_gang_by_node_rule(pool, request, NodeRule::kFirstFit), 0}}) {
    ASSERT_TRUE(placed.has_value()) << placed.error().reason;
    ASSERT_EQ(placed->assignments.size(), 1U);
    EXPECT_EQ(placed->assignments[0].mig_start, start);
  }
  ASSERT_TRUE(pool.allocate(request.task, {NodeId{0}, 0b01, 4}).has_value());
  // A replica of a spread service goes to the node without one, though node a packs better.
  const std::vector<NodeId> on_a = {NodeId{0}};
  const auto replica = place_replica(pool, request.task, on_a, {});
  ASSERT_TRUE(replica.has_value());
  EXPECT_EQ(replica->node, NodeId{1});
  EXPECT_EQ(place_replica(pool, request.task, {}, {})->node, NodeId{0});
  const GangRequest gang{.task_count = 2, .task = mig_task(P::k1g10gb), .topology = {}};
  EXPECT_FALSE(place_gang(pool, gang).has_value());
}

// The property: a pool of A100 nodes takes a seeded random stream of MIG requests, with
// departures, each stream played once by packing and once by first fit; after every event each
// GPU's layout is valid and the pool's figures agree (check_invariants), and packing places at
// least as many compute slices as first fit before its first refusal, and more over all streams.
struct StreamResult {
  int before_first_refusal = 0;
  int in_all = 0;
};

StreamResult play(const std::vector<std::pair<P, int>>& stream, bool pack) {
  Pool pool = single_leaf_pool({a100_node("a", 4, 0b1111), a100_node("b", 4, 0b1111)});
  std::multimap<int, std::pair<TaskShape, Assignment>> leaving;
  StreamResult result;
  bool refused = false;
  for (int step = 0; step < static_cast<int>(stream.size()); ++step) {
    for (auto due = leaving.begin(); due != leaving.end() && due->first <= step;) {
      EXPECT_TRUE(pool.release(due->second.first, due->second.second).has_value());
      due = leaving.erase(due);
    }
    const TaskShape task = mig_task(stream[step].first, 0);
    const auto where = pack ? pack_mig_task(pool, task) : first_fit_mig_task(pool, task);
    EXPECT_EQ(where.has_value(), first_fit_mig_task(pool, task).has_value());
    if (!where) {
      refused = true;
      continue;
    }
    EXPECT_TRUE(pool.allocate(task, *where).has_value());
    const auto ok = pool.check_invariants();
    EXPECT_TRUE(ok.has_value()) << ok.error().message();
    const int slices = mig_profile_spec(*task.mig).compute_slices;
    result.in_all += slices;
    if (!refused) result.before_first_refusal += slices;
    if (stream[step].second > 0)
      leaving.emplace(step + stream[step].second, std::pair{task, *where});
  }
  return result;
}

TEST(MigPoolProperty, RandomStreamsKeepEveryLayoutValidAndPackAtLeastAsMuchAsFirstFit) {
  long long packed_in_all = 0;
  long long first_fit_in_all = 0;
  int packed_more_before_refusal = 0;
  int packed_fewer_before_refusal = 0;
  for (std::uint64_t seed = 1; seed <= 80; ++seed) {
    Rng rng(seed);
    const bool departures = seed % 2 == 0;
    std::vector<std::pair<P, int>> stream;
    for (int i = 0; i < 120; ++i) {
      const P profile = mig_profiles()[rng.below(kMigProfileCount)].profile;
      stream.emplace_back(profile, departures ? 1 + static_cast<int>(rng.below(40)) : 0);
    }
    const StreamResult packed = play(stream, true);
    const StreamResult first = play(stream, false);
    if (!departures) {
      EXPECT_GE(packed.before_first_refusal, first.before_first_refusal) << "seed " << seed;
    }
    packed_more_before_refusal += packed.before_first_refusal > first.before_first_refusal;
    packed_fewer_before_refusal += packed.before_first_refusal < first.before_first_refusal;
    if (departures) {
      packed_in_all += packed.in_all;
      first_fit_in_all += first.in_all;
    }
  }
  EXPECT_GT(packed_more_before_refusal, packed_fewer_before_refusal);
  EXPECT_GT(packed_in_all, first_fit_in_all);
  std::cout << "[ figures  ] before the first refusal, packing placed more slices on "
            << packed_more_before_refusal << " of 80 streams, fewer on "
            << packed_fewer_before_refusal << "; with departures, " << packed_in_all
            << " slices placed against first fit's " << first_fit_in_all << "\n";
}

}  // namespace
}  // namespace tidepool
