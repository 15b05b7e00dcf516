#include "core/gang_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kH100;

GpuModelCatalog three_model_catalog() {
  GpuModelCatalog models;
  (void)models.intern("H100");
  (void)models.intern("A100");
  (void)models.intern("T4");  // no node has it
  return models;
}

// 2 spines x 2 leaves each.
Topology two_by_two() {
  Topology topology;
  topology.spines = {{"spine-0"}, {"spine-1"}};
  topology.leaves = {{"leaf-0", SpineId{0}},
                     {"leaf-1", SpineId{0}},
                     {"leaf-2", SpineId{1}},
                     {"leaf-3", SpineId{1}}};
  return topology;
}

NodeSpec leaf_node(std::string name, LeafId leaf, GpuModelId model, int gpus, int domains,
                   MilliCpu cpu = 64000, MemoryMib memory = 524288) {
  NodeSpec spec;
  spec.name = std::move(name);
  spec.model = model;
  spec.gpu_count = gpus;
  spec.milli_cpu = cpu;
  spec.memory_mib = memory;
  spec.leaf = leaf;
  for (int g = 0; g < gpus; ++g)
    spec.nvlink_domain[g] = static_cast<std::uint8_t>(g / (gpus / domains));
  return spec;
}

// 2 spines x 2 leaves x 4 nodes x 8 GPUs in 2 NVLink domains of 4; node n is in leaf n / 4.
// `leaf_models` gives each leaf's GPU model.
Pool four_leaf_pool(std::array<GpuModelId, 4> leaf_models = {kH100, kH100, kH100, kH100}) {
  std::vector<NodeSpec> nodes;
  for (std::uint32_t l = 0; l < 4; ++l) {
    for (int i = 0; i < 4; ++i) {
      nodes.push_back(leaf_node("n" + std::to_string(l) + "-" + std::to_string(i), LeafId{l},
                                leaf_models[l], 8, 2));
    }
  }
  auto pool = Pool::create(three_model_catalog(), two_by_two(), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

TaskShape whole(int gpus, MilliCpu cpu = 1000, MemoryMib memory = 1024,
                ModelSet models = ModelSet::any()) {
  auto task = make_task_shape(gpus, gpus > 0 ? kMilliPerGpu : 0, cpu, memory, models);
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return task.value();
}

GangRequest gang_request(int tasks, int gpus, TopologyLevel level = TopologyLevel::kSpine,
                         TopologyStrength strength = TopologyStrength::kPreferred,
                         ModelSet models = ModelSet::any()) {
  return GangRequest{tasks, whole(gpus, 1000, 1024, models), {level, strength}};
}

// Takes GPUs `gpus` of `node` with a task of no CPU.
void take_gpus(Pool& pool, std::uint32_t node, GpuSet gpus) {
  auto ok = pool.allocate(whole(gpu_set_size(gpus), 0, 0), Assignment{NodeId{node}, gpus});
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

void allocate_all(Pool& pool, const GangRequest& request, const GangPlacement& placement) {
  ASSERT_EQ(placement.assignments.size(), static_cast<std::size_t>(request.task_count));
  for (const Assignment& a : placement.assignments) {
    auto ok = pool.allocate(request.task, a);
    ASSERT_TRUE(ok.has_value()) << ok.error().message();
  }
  ASSERT_TRUE(pool.check_invariants().has_value());
}

std::set<std::uint32_t> nodes_of(const GangPlacement& placement) {
  std::set<std::uint32_t> nodes;
  for (const Assignment& a : placement.assignments) nodes.insert(a.node.value);
  return nodes;
}

TEST(GangPlacementTest, SixteenGpuGangLandsInOneLeafOnTwoNodes) {
  Pool pool = four_leaf_pool();
  const GangRequest request = gang_request(2, 8);
  auto placed = place_gang(pool, request);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  // An 8-GPU task cannot fit one domain of 4: both tasks are split.
  EXPECT_EQ(
      placed->span,
      (GangSpan{.nvlink_domains = 4, .nodes = 2, .leaves = 1, .spines = 1, .split_tasks = 2}));
  EXPECT_EQ(nodes_of(*placed), (std::set<std::uint32_t>{0, 1}));
  allocate_all(pool, request, *placed);
}

TEST(GangPlacementTest, PrefersTheLeafWhoseFreeGpusFitBest) {
  Pool pool = four_leaf_pool();
  take_gpus(pool, 0, 0xFF);
  take_gpus(pool, 1, 0xFF);  // leaf 0: 16 free GPUs, the others 32
  const GangRequest request = gang_request(2, 8);
  auto placed = place_gang(pool, request);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(nodes_of(*placed), (std::set<std::uint32_t>{2, 3}));
  allocate_all(pool, request, *placed);
}

TEST(GangPlacementTest, KeepsAGangOnOneNodeWithOneDomainPerTask) {
  Pool pool = four_leaf_pool();
  take_gpus(pool, 0, 0x01);  // node 0 has 7 free; the gang of 8 GPUs goes to node 1
  const GangRequest request = gang_request(2, 4);
  auto placed = place_gang(pool, request);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  ASSERT_EQ(placed->assignments.size(), 2U);
  EXPECT_EQ(placed->assignments[0], (Assignment{NodeId{1}, 0x0F}));
  EXPECT_EQ(placed->assignments[1], (Assignment{NodeId{1}, 0xF0}));
  EXPECT_EQ(placed->span, (GangSpan{.nvlink_domains = 2, .nodes = 1, .leaves = 1, .spines = 1}));
}

TEST(GangPlacementTest, SmallTasksShareTheTightestDomain) {
  Pool pool = four_leaf_pool();
  take_gpus(pool, 0, 0x03);  // domain 0 of node 0 has 2 free: a 2-GPU task fills it
  const GangRequest request = gang_request(1, 2);
  auto placed = place_gang(pool, request);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(placed->assignments[0], (Assignment{NodeId{0}, 0x0C}));
}

TEST(GangPlacementTest, NvlinkRequiredTaskLandsInOneDomain) {
  Pool pool = four_leaf_pool();
  for (std::uint32_t n = 0; n < 16; ++n) {
    take_gpus(pool, n, n == 3 ? 0x07 : 0x11);  // 3 + 3 free, node 3: 1 + 4 free
  }
  for (TopologyStrength strength : {TopologyStrength::kRequired, TopologyStrength::kPreferred}) {
    const GangRequest request = gang_request(1, 4, TopologyLevel::kNvlink, strength);
    auto placed = place_gang(pool, request);
    ASSERT_TRUE(placed.has_value()) << placed.error().reason;
    EXPECT_EQ(placed->assignments[0], (Assignment{NodeId{3}, 0xF0}));
    EXPECT_EQ(placed->span.split_tasks, 0);
    EXPECT_EQ(placed->span.nvlink_domains, 1);
  }
}

TEST(GangPlacementTest, NvlinkRequiredFailsWithTheLargestFreeDomain) {
  Pool pool = four_leaf_pool();
  for (std::uint32_t n = 0; n < 16; ++n) take_gpus(pool, n, 0x33);  // 2 + 2 free everywhere
  auto required =
      place_gang(pool, gang_request(1, 4, TopologyLevel::kNvlink, TopologyStrength::kRequired));
  ASSERT_FALSE(required.has_value());
  EXPECT_EQ(required.error().reason,
            "needs 4 GPUs in one NVLink domain; largest free domain has 2");

  const GangRequest preferred =
      gang_request(1, 4, TopologyLevel::kNvlink, TopologyStrength::kPreferred);
  auto placed = place_gang(pool, preferred);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(placed->assignments[0], (Assignment{NodeId{0}, 0xCC}));
  EXPECT_EQ(placed->span.split_tasks, 1);
  allocate_all(pool, preferred, *placed);
}

TEST(GangPlacementTest, NvlinkRequiredTaskLargerThanAnyDomainFails) {
  Pool pool = four_leaf_pool();
  auto result =
      place_gang(pool, gang_request(1, 8, TopologyLevel::kNvlink, TopologyStrength::kRequired));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(
      result.error().reason,
      "needs 8 GPUs in one NVLink domain; the largest NVLink domain of an accepted node has 4");
}

// Every leaf: three nodes with one free domain (4 GPUs), one node full: 12 free GPUs per leaf.
Pool fragmented_pool() {
  Pool pool = four_leaf_pool();
  for (std::uint32_t n = 0; n < 16; ++n) take_gpus(pool, n, n % 4 == 3 ? 0xFF : 0x0F);
  return pool;
}

TEST(GangPlacementTest, RequiredLeafFailsWithNumbersWhenFragmented) {
  Pool pool = fragmented_pool();
  auto result = place_gang(pool, gang_request(4, 4, TopologyLevel::kLeaf,
                                              TopologyStrength::kRequired, ModelSet::only(kH100)));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().reason,
            "no leaf switch with 16 free H100 GPUs for 4 tasks x 4 GPUs; best has 12 (room for 3 "
            "tasks)");
}

TEST(GangPlacementTest, PreferredLeafFallsBackToSpanningLeaves) {
  for (TopologyLevel level : {TopologyLevel::kLeaf, TopologyLevel::kSpine}) {
    Pool pool = fragmented_pool();
    const TopologyStrength strength =
        level == TopologyLevel::kLeaf ? TopologyStrength::kPreferred : TopologyStrength::kRequired;
    const GangRequest request = gang_request(4, 4, level, strength);
    auto placed = place_gang(pool, request);
    ASSERT_TRUE(placed.has_value()) << placed.error().reason;
    EXPECT_EQ(placed->span, (GangSpan{.nvlink_domains = 4, .nodes = 4, .leaves = 2, .spines = 1}));
    allocate_all(pool, request, *placed);
  }
}

TEST(GangPlacementTest, RequiredNodeFailsWithNumbers) {
  Pool pool = four_leaf_pool();
  for (std::uint32_t n = 0; n < 16; ++n) take_gpus(pool, n, n == 5 ? 0x07 : 0x0F);
  auto result =
      place_gang(pool, gang_request(2, 4, TopologyLevel::kNode, TopologyStrength::kRequired));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().reason,
            "no node with 8 free GPUs for 2 tasks x 4 GPUs; best has 5 (room for 1 task)");
}

TEST(GangPlacementTest, PoolTooSmallSaysHowMuchIsFree) {
  Pool pool = four_leaf_pool();
  for (std::uint32_t n = 0; n < 16; ++n) take_gpus(pool, n, n == 9 ? 0x00 : 0xFF);
  auto result = place_gang(pool, gang_request(2, 8));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().reason,
            "not enough free GPUs for 2 tasks x 8 GPUs: the pool has 8 (room for 1 task)");
}

TEST(GangPlacementTest, NeverChangesThePool) {
  Pool pool = fragmented_pool();
  const std::int64_t allocated = pool.allocated_milli_gpu();
  std::vector<std::uint32_t> versions;
  for (std::uint32_t n = 0; n < 16; ++n) versions.push_back(pool.version(NodeId{n}));
  EXPECT_FALSE(
      place_gang(pool, gang_request(4, 4, TopologyLevel::kLeaf, TopologyStrength::kRequired)));
  EXPECT_FALSE(place_gang(pool, gang_request(40, 4)));
  EXPECT_TRUE(place_gang(pool, gang_request(4, 4)));
  EXPECT_EQ(pool.allocated_milli_gpu(), allocated);
  for (std::uint32_t n = 0; n < 16; ++n) EXPECT_EQ(pool.version(NodeId{n}), versions[n]);
}

TEST(GangPlacementTest, RespectsModelConstraints) {
  Pool pool = four_leaf_pool({kA100, kA100, kH100, kH100});
  const GangRequest h100 = gang_request(2, 8, TopologyLevel::kSpine, TopologyStrength::kPreferred,
                                        ModelSet::only(kH100));
  auto placed = place_gang(pool, h100);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(nodes_of(*placed), (std::set<std::uint32_t>{8, 9}));
  allocate_all(pool, h100, *placed);

  auto t4 = place_gang(pool, gang_request(1, 1, TopologyLevel::kSpine, TopologyStrength::kPreferred,
                                          ModelSet::only(GpuModelId{2})));
  ASSERT_FALSE(t4.has_value());
  EXPECT_EQ(t4.error().reason, "no node has T4 GPUs");
}

TEST(GangPlacementTest, TieOrderDecidesBetweenEqualPlacements) {
  Pool pool = four_leaf_pool();
  std::vector<NodeId> reversed;
  for (std::uint32_t n = 16; n-- > 0;) reversed.push_back(NodeId{n});
  ASSERT_TRUE(pool.set_tie_order(reversed).has_value());
  auto placed = place_gang(pool, gang_request(2, 8));
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(nodes_of(*placed), (std::set<std::uint32_t>{14, 15}));
}

TEST(GangPlacementTest, CpuOnlyGangIsPlacedByCpu) {
  Pool pool = four_leaf_pool();
  const GangRequest request{3, whole(0, 40000, 1024), {}};
  auto placed = place_gang(pool, request);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(placed->span, (GangSpan{.nvlink_domains = 0, .nodes = 3, .leaves = 1, .spines = 1}));
  allocate_all(pool, request, *placed);
}

TEST(GangPlacementTest, FractionalTaskGoesToThePolicy) {
  Pool pool = four_leaf_pool();
  take_gpus(pool, 0, 0xFF);
  auto task = make_task_shape(1, 500, 1000, 1024);
  ASSERT_TRUE(task.has_value());
  const GangRequest request{1, *task, {TopologyLevel::kNvlink, TopologyStrength::kRequired}};
  EXPECT_FALSE(place_gang(pool, request).has_value());

  auto policy = make_placement_policy("best-fit", WorkloadProfile::from_tasks({}));
  ASSERT_TRUE(policy.has_value());
  Rng rng(7);
  auto placed = place_gang(pool, request, **policy, rng);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  ASSERT_EQ(placed->assignments.size(), 1U);
  EXPECT_EQ(gpu_set_size(placed->assignments[0].gpus), 1);
  allocate_all(pool, request, *placed);

  auto invalid = place_gang(pool, GangRequest{2, *task, {}}, **policy, rng);
  ASSERT_FALSE(invalid.has_value());
  EXPECT_NE(invalid.error().reason.find("invalid gang"), std::string::npos);
  EXPECT_FALSE(validate_gang_request(GangRequest{0, whole(1), {}}).has_value());
}

TEST(GangSpanTest, CountsDomainsNodesLeavesSpinesAndSplitTasks) {
  Pool pool = four_leaf_pool();
  const std::vector<Assignment> assignments = {
      {NodeId{0}, 0x03},  // domain 0
      {NodeId{0}, 0x18},  // GPUs 3 and 4: domains 0 and 1, split
      {NodeId{4}, 0x01},  // leaf 1
      {NodeId{8}, 0xF0},  // leaf 2, spine 1
  };
  EXPECT_EQ(
      gang_span(pool, assignments),
      (GangSpan{.nvlink_domains = 4, .nodes = 3, .leaves = 3, .spines = 2, .split_tasks = 1}));
  EXPECT_EQ(gang_span(pool, {}), GangSpan{});
  EXPECT_EQ(topology_level_name(TopologyLevel::kLeaf), "leaf");
}

// --- property: random pools and gangs -------------------------------------------------------

// Tasks a node can host, computed independently of the planner.
std::int64_t room(const Pool& pool, NodeId node, const GangRequest& request) {
  const NodeSpec& spec = pool.spec(node);
  const NodeState& state = pool.state(node);
  const TaskShape& task = request.task;
  std::int64_t room = 1'000'000;
  if (task.needs_gpu()) {
    if (spec.gpu_count == 0 || !task.models.accepts(spec.model)) return 0;
    std::array<int, kMaxGpusPerNode> per_domain{};
    int free = 0;
    for (int g = 0; g < spec.gpu_count; ++g) {
      if (state.free_milli[g] == kMilliPerGpu) {
        ++per_domain[spec.nvlink_domain[g]];
        ++free;
      }
    }
    if (request.topology.requires_level(TopologyLevel::kNvlink)) {
      std::int64_t by_domain = 0;
      for (int d : per_domain) by_domain += d / task.gpu_count;
      room = by_domain;
    } else {
      room = free / task.gpu_count;
    }
  }
  if (task.milli_cpu > 0) room = std::min(room, state.free_cpu / task.milli_cpu);
  if (task.memory_mib > 0) room = std::min(room, state.free_memory / task.memory_mib);
  return room;
}

// The most tasks one node, one leaf, one spine and the pool can host.
struct Rooms {
  std::int64_t node = 0, leaf = 0, spine = 0, pool = 0;
};

Rooms rooms(const Pool& pool, const GangRequest& request) {
  const Topology& topology = pool.topology();
  std::vector<std::int64_t> leaf(topology.leaves.size()), spine(topology.spines.size());
  std::int64_t total = 0, best_node = 0;
  for (std::uint32_t n = 0; n < static_cast<std::uint32_t>(pool.node_count()); ++n) {
    const std::int64_t r = room(pool, NodeId{n}, request);
    const LeafId l = pool.spec(NodeId{n}).leaf;
    leaf[l.value] += r;
    spine[topology.leaves[l.value].spine.value] += r;
    total += r;
    best_node = std::max(best_node, r);
  }
  return Rooms{best_node, *std::max_element(leaf.begin(), leaf.end()),
               *std::max_element(spine.begin(), spine.end()), total};
}

// Whether the gang fits the unit its requirement names (the pool if none).
bool feasible(const Rooms& r, const GangRequest& request) {
  const TopologyRequirement& t = request.topology;
  const std::int64_t need = request.task_count;
  if (t.requires_level(TopologyLevel::kNode)) return r.node >= need;
  if (t.requires_level(TopologyLevel::kLeaf)) return r.leaf >= need;
  if (t.requires_level(TopologyLevel::kSpine)) return r.spine >= need;
  return r.pool >= need;
}

Pool random_topology_pool(Rng& rng) {
  Topology topology;
  const int spines = 1 + static_cast<int>(rng.below(3));
  for (int s = 0; s < spines; ++s) {
    topology.spines.push_back({"s" + std::to_string(s)});
    const int leaves = 1 + static_cast<int>(rng.below(3));
    for (int l = 0; l < leaves; ++l) {
      topology.leaves.push_back(
          {"l" + std::to_string(topology.leaves.size()), SpineId{static_cast<std::uint32_t>(s)}});
    }
  }
  constexpr int kGpuCounts[] = {0, 1, 2, 4, 8, 8, 16};
  std::vector<NodeSpec> nodes;
  for (std::uint32_t l = 0; l < topology.leaves.size(); ++l) {
    const int count = 1 + static_cast<int>(rng.below(4));
    for (int i = 0; i < count; ++i) {
      const int gpus = kGpuCounts[rng.below(std::size(kGpuCounts))];
      int domains = 1 << rng.below(3);
      while (domains > 1 && (gpus == 0 || gpus % domains != 0 || gpus / domains < 1)) domains /= 2;
      nodes.push_back(leaf_node("n" + std::to_string(nodes.size()), LeafId{l},
                                rng.below(2) == 0 ? kH100 : kA100, gpus, domains,
                                8000 + 8000 * static_cast<MilliCpu>(rng.below(8)),
                                16384 * (1 + static_cast<MemoryMib>(rng.below(8)))));
    }
  }
  auto pool = Pool::create(three_model_catalog(), std::move(topology), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  Pool result = std::move(pool).value();
  // Some load: whole-GPU and fractional tasks on random GPUs, where they fit.
  const int load = static_cast<int>(rng.below(40));
  for (int i = 0; i < load; ++i) {
    const NodeId node{static_cast<std::uint32_t>(rng.below(result.node_count()))};
    const NodeSpec& spec = result.spec(node);
    if (spec.gpu_count == 0) continue;
    const int g = static_cast<int>(rng.below(spec.gpu_count));
    const bool fraction = rng.below(3) == 0;
    auto task = make_task_shape(1, fraction ? 100 * (1 + static_cast<int>(rng.below(9))) : 1000,
                                static_cast<std::int64_t>(rng.below(4000)),
                                static_cast<std::int64_t>(rng.below(8192)));
    (void)result.allocate(*task, Assignment{node, GpuSet{1} << g});
  }
  return result;
}

GangRequest random_gang(Rng& rng) {
  constexpr int kGpus[] = {0, 1, 1, 2, 2, 4, 4, 8, 16};
  const int gpus = kGpus[rng.below(std::size(kGpus))];
  ModelSet models;
  if (const auto m = rng.below(3); m > 0) models = ModelSet::only(m == 1 ? kH100 : kA100);
  auto task = make_task_shape(gpus, gpus > 0 ? 1000 : 0, static_cast<std::int64_t>(rng.below(9000)),
                              static_cast<std::int64_t>(rng.below(20000)), models);
  EXPECT_TRUE(task.has_value());
  const auto level = static_cast<TopologyLevel>(rng.below(4));
  const auto strength = static_cast<TopologyStrength>(rng.below(2));
  return GangRequest{1 + static_cast<int>(rng.below(6)), *task, {level, strength}};
}

TEST(GangPropertyTest, ResultsAreAcceptedInSequenceAndMeetTheRequirement) {
  Rng rng(20240611);
  int placed_count = 0;
  for (int round = 0; round < 400; ++round) {
    const Pool pool = random_topology_pool(rng);
    for (int k = 0; k < 5; ++k) {
      const GangRequest request = random_gang(rng);
      SCOPED_TRACE(testing::Message() << "round " << round << " gang " << request.task_count
                                      << " x " << request.task.gpu_count << " level "
                                      << topology_level_name(request.topology.level));
      auto result = place_gang(pool, request);
      const Rooms r = rooms(pool, request);
      ASSERT_EQ(result.has_value(), feasible(r, request))
          << (result ? std::string("placed") : result.error().reason);
      auto again = place_gang(pool, request);  // same pool, same answer
      ASSERT_EQ(again.has_value(), result.has_value());
      if (!result) continue;
      ++placed_count;
      EXPECT_EQ(again->assignments, result->assignments);
      const GangSpan& span = result->span;
      EXPECT_EQ(span, gang_span(pool, result->assignments));
      const TopologyRequirement& t = request.topology;
      if (t.requires_level(TopologyLevel::kNvlink)) {
        EXPECT_EQ(span.split_tasks, 0);
      }
      if (t.requires_level(TopologyLevel::kNode)) {
        EXPECT_EQ(span.nodes, 1);
      }
      if (t.requires_level(TopologyLevel::kLeaf)) {
        EXPECT_EQ(span.leaves, 1);
      }
      if (t.requires_level(TopologyLevel::kSpine)) {
        EXPECT_EQ(span.spines, 1);
      }
      // As compact as the pool allows at every level.
      EXPECT_EQ(span.nodes == 1, r.node >= request.task_count);
      EXPECT_EQ(span.leaves == 1, r.leaf >= request.task_count);
      EXPECT_EQ(span.spines == 1, r.spine >= request.task_count);
      Pool copy = pool;
      allocate_all(copy, request, *result);
    }
  }
  EXPECT_GT(placed_count, 500);
}

TEST(GangPropertyTest, APolicyPlacesGangsNoLessCompactlyThanThePlanner) {
  Rng rng(20261204);
  const TaskShape typical[] = {whole(1), whole(2), whole(4), whole(8)};
  const WorkloadProfile profile = WorkloadProfile::from_tasks(typical);
  for (const PolicyInfo& info : placement_policies()) {
    auto policy = make_placement_policy(info.name, profile);
    ASSERT_TRUE(policy.has_value());
    int decided_by_policy = 0;
    for (int round = 0; round < 120; ++round) {
      const Pool pool = random_topology_pool(rng);
      const GangRequest request = random_gang(rng);
      SCOPED_TRACE(testing::Message() << info.name << " round " << round << " gang "
                                      << request.task_count << " x " << request.task.gpu_count);
      auto planned = place_gang(pool, request);
      Rng draws(static_cast<std::uint64_t>(round));
      auto placed = place_gang_by_policy(pool, request, **policy, draws);
      // Placeable exactly when the planner places it, never less compact, accepted in sequence.
      ASSERT_EQ(placed.has_value(), planned.has_value());
      if (!placed) continue;
      auto levels = [](const GangSpan& x) {
        return std::make_tuple(x.spines, x.leaves, x.nodes, x.split_tasks, x.nvlink_domains);
      };
      EXPECT_LE(levels(placed->span), levels(planned->span));
      EXPECT_EQ(placed->span, gang_span(pool, placed->assignments));
      Pool copy = pool;
      allocate_all(copy, request, *placed);
      decided_by_policy += placed->assignments != planned->assignments ? 1 : 0;
    }
    // Where the planner's objective leaves a choice, the policy makes it (some differ).
    if (info.name != "best-fit") {
      EXPECT_GT(decided_by_policy, 0) << info.name;
    }
  }
}

// A single task of one GPU goes where the policy alone puts it (with the same draws), and fails
// with the planner's reason where no node fits it.
TEST(GangPropertyTest, ASingleOneGpuTaskGoesWhereThePolicyAlonePutsIt) {
  Rng rng(20261206);
  const TaskShape typical[] = {whole(1), whole(2), whole(4), whole(8)};
  const WorkloadProfile profile = WorkloadProfile::from_tasks(typical);
  for (const PolicyInfo& info : placement_policies()) {
    auto by_gang = make_placement_policy(info.name, profile);
    auto alone = make_placement_policy(info.name, profile);
    ASSERT_TRUE(by_gang.has_value() && alone.has_value());
    int placed_count = 0;
    for (int round = 0; round < 120; ++round) {
      const Pool pool = random_topology_pool(rng);
      const GangRequest request{1, whole(1), {}};
      SCOPED_TRACE(testing::Message() << info.name << " round " << round);
      Rng gang_draws(static_cast<std::uint64_t>(round));
      Rng alone_draws(static_cast<std::uint64_t>(round));
      auto placed = place_gang_by_policy(pool, request, **by_gang, gang_draws);
      PlacementResult expected = (*alone)->place(pool, request.task, alone_draws);
      ASSERT_EQ(placed.has_value(), expected.has_value());
      EXPECT_EQ(gang_draws.below(1'000'000), alone_draws.below(1'000'000));
      if (!placed) {
        auto planned = place_gang(pool, request);
        ASSERT_FALSE(planned.has_value());
        EXPECT_EQ(placed.error().reason, planned.error().reason);
        continue;
      }
      ++placed_count;
      ASSERT_EQ(placed->assignments.size(), 1U);
      EXPECT_EQ(placed->assignments.front(), *expected);
      EXPECT_EQ(placed->span, gang_span(pool, placed->assignments));
    }
    EXPECT_GT(placed_count, 60) << info.name;
  }
}

// Tasks that ask for nothing still keep off cordoned (drained or down) nodes, and no node takes
// more than kMaxTasksPerNode of them.
TEST(GangPlacementTest, TasksThatRequestNothingKeepOffCordonedNodesAndUnderTheTaskCap) {
  Pool pool = four_leaf_pool();
  for (int n = 1; n < pool.node_count(); ++n) {
    ASSERT_TRUE(pool.set_schedulable(NodeId{static_cast<std::uint32_t>(n)}, false).has_value());
  }
  const GangRequest nothing{kMaxTasksPerNode, whole(0, 0, 0), {}};
  auto placed = place_gang(pool, nothing);
  ASSERT_TRUE(placed.has_value()) << placed.error().reason;
  EXPECT_EQ(nodes_of(*placed), std::set<std::uint32_t>{0});
  allocate_all(pool, nothing, *placed);
  EXPECT_FALSE(place_gang(pool, GangRequest{1, whole(0, 0, 0), {}}).has_value());
  EXPECT_FALSE(pool.allocate(whole(0, 0, 0), Assignment{NodeId{0}, 0}).has_value());
  ASSERT_TRUE(pool.set_schedulable(NodeId{0}, false).has_value());
  ASSERT_TRUE(pool.set_schedulable(NodeId{1}, true).has_value());
  EXPECT_FALSE(place_gang(pool, GangRequest{kMaxTasksPerNode + 1, whole(0, 0, 0), {}}).has_value());
}

}  // namespace
}  // namespace tidepool
