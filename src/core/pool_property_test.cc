// Property tests of the pool and the placement policies over random pools and random sequences of
// operations, each drawn from a seeded tidepool::Rng (so a failure names a reproducible seed).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/policies/placement_policy.h"
#include "core/policies/policy_factories.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using test_support::chance;
using test_support::draw;

constexpr int kPoolSeeds = 200;
constexpr int kPoolSteps = 300;
constexpr int kPolicySeeds = 100;
constexpr int kPolicySteps = 200;

// Models of the random pools; tasks may also ask for model 3, which no node has.
constexpr int kPoolModels = 3;

Pool random_pool(Rng& rng) {
  GpuModelCatalog catalog;
  for (const char* name : {"T4", "A100", "V100"}) EXPECT_TRUE(catalog.intern(name).has_value());
  std::vector<NodeSpec> nodes(static_cast<std::size_t>(draw(rng, 2, 20)));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeSpec& spec = nodes[i];
    spec.name = "node-" + std::to_string(i);
    spec.model = GpuModelId{static_cast<std::uint32_t>(rng.below(kPoolModels))};
    spec.gpu_count = draw(rng, 0, 8);
    spec.milli_cpu = draw(rng, 0, 64) * 1000 + (chance(rng, 20) ? draw(rng, 1, 999) : 0);
    spec.memory_mib = draw(rng, 0, 256) * 1024;
    const int domains = draw(rng, 1, 2);
    for (int g = 0; g < spec.gpu_count; ++g) {
      spec.nvlink_domain[g] = static_cast<std::uint8_t>(g * domains / spec.gpu_count);
    }
  }
  auto pool = Pool::create(std::move(catalog), Topology::single_leaf(), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

ModelSet random_models(Rng& rng) {
  const int kind = draw(rng, 0, 9);
  if (kind < 5) return ModelSet::any();
  ModelSet set;
  set.add(GpuModelId{static_cast<std::uint32_t>(rng.below(kPoolModels + 1))});
  if (kind >= 8) set.add(GpuModelId{static_cast<std::uint32_t>(rng.below(kPoolModels + 1))});
  return set;
}

TaskShape random_task(Rng& rng) {
  const int kind = draw(rng, 0, 9);
  int gpus = 0;
  int milli = 0;
  if (kind >= 2 && kind < 6) {
    gpus = 1;
    milli = chance(rng, 50) ? draw(rng, 1, 19) * 50 : draw(rng, 1, 999);
  } else if (kind >= 6) {
    gpus = chance(rng, 70) ? draw(rng, 1, 2) : draw(rng, 1, 8);
    milli = kMilliPerGpu;
  }
  auto task = make_task_shape(gpus, milli, draw(rng, 0, 16) * 1000, draw(rng, 0, 32) * 1024,
                              random_models(rng));
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return task.value();
}

// A random GPU set of exactly `count` GPUs among the node's, preferring those with `share` free
// when `prefer_free`; a random mask if the node has too few GPUs.
GpuSet random_gpus(Rng& rng, const NodeSpec& spec, const NodeState& state, int count,
                   MilliGpu share, bool prefer_free) {
  std::vector<int> candidates;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (!prefer_free || state.free_milli[g] >= share) candidates.push_back(g);
  }
  if (static_cast<int>(candidates.size()) < count) {
    candidates.clear();
    for (int g = 0; g < spec.gpu_count; ++g) candidates.push_back(g);
  }
  if (static_cast<int>(candidates.size()) < count) {
    return static_cast<GpuSet>(rng.below(GpuSet{1} << kMaxGpusPerNode));
  }
  rng.shuffle(std::span<int>(candidates));
  GpuSet gpus = 0;
  for (int k = 0; k < count; ++k) gpus |= GpuSet{1} << candidates[k];
  return gpus;
}

// Mostly plausible assignments, with some of every kind of mistake: unknown node, GPU sets of the
// wrong size, GPUs past the node's count, GPUs without the share.
Assignment random_assignment(Rng& rng, const Pool& pool, const TaskShape& task) {
  const auto nodes = static_cast<std::uint32_t>(pool.node_count());
  if (chance(rng, 3)) return {NodeId{nodes + static_cast<std::uint32_t>(rng.below(3))}, 0};
  const NodeId node{static_cast<std::uint32_t>(rng.below(nodes))};
  const NodeSpec& spec = pool.spec(node);
  const int kind = draw(rng, 0, 9);
  GpuSet gpus = 0;
  if (kind < 7) {
    gpus = random_gpus(rng, spec, pool.state(node), task.gpu_count, task.milli_per_gpu,
                       /*prefer_free=*/kind < 5);
  } else if (kind < 9) {
    gpus = static_cast<GpuSet>(rng.below(GpuSet{1} << spec.gpu_count));
  } else {
    gpus = static_cast<GpuSet>(rng.below(GpuSet{1} << kMaxGpusPerNode));
  }
  return {node, gpus};
}

// What Pool::allocate must answer, from its documented contract alone.
bool allocation_allowed(const Pool& pool, const TaskShape& task, const Assignment& where) {
  if (where.node.value >= static_cast<std::uint32_t>(pool.node_count())) return false;
  const NodeSpec& spec = pool.spec(where.node);
  const NodeState& state = pool.state(where.node);
  if (gpu_set_size(where.gpus) != task.gpu_count) return false;
  if ((std::uint64_t{where.gpus} >> spec.gpu_count) != 0) return false;
  if (task.needs_gpu() && !task.models.accepts(spec.model)) return false;
  if (state.free_cpu < task.milli_cpu || state.free_memory < task.memory_mib) return false;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (gpu_set_contains(where.gpus, g) && state.free_milli[g] < task.milli_per_gpu) return false;
  }
  return true;
}

struct Placed {
  TaskShape task;
  Assignment where;
};

bool same_node_state(const NodeState& a, const NodeState& b) {
  return a.free_cpu == b.free_cpu && a.free_memory == b.free_memory &&
         a.free_milli == b.free_milli && a.whole_free_gpus == b.whole_free_gpus &&
         a.max_free_milli == b.max_free_milli && a.total_free_milli == b.total_free_milli &&
         a.tasks_by_class == b.tasks_by_class;
}

// Whether the two pools hold the same state; with `versions`, the same node versions too.
bool same_pool_state(const Pool& a, const Pool& b, bool versions) {
  if (a.node_count() != b.node_count()) return false;
  if (a.allocated_milli_gpu() != b.allocated_milli_gpu()) return false;
  if (a.allocated_milli_cpu() != b.allocated_milli_cpu()) return false;
  for (int i = 0; i < a.node_count(); ++i) {
    const NodeId id{static_cast<std::uint32_t>(i)};
    if (!same_node_state(a.state(id), b.state(id))) return false;
    if (versions && a.version(id) != b.version(id)) return false;
  }
  return true;
}

// Checks the pool against the list of tasks it holds: every node's free CPU, memory and per-GPU
// share equal its capacity less what the tasks on it hold, and the pool totals agree.
void expect_pool_matches(const Pool& pool, const std::vector<Placed>& live) {
  ASSERT_TRUE(pool.check_invariants().has_value()) << pool.check_invariants().error().message();
  std::vector<NodeState> expected;
  for (const NodeSpec& spec : pool.specs()) expected.push_back(empty_state(spec));
  std::int64_t allocated_gpu = 0;
  MilliCpu allocated_cpu = 0;
  for (const Placed& p : live) {
    NodeState& s = expected[p.where.node.value];
    s.free_cpu -= p.task.milli_cpu;
    s.free_memory -= p.task.memory_mib;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if (gpu_set_contains(p.where.gpus, g)) s.free_milli[g] -= p.task.milli_per_gpu;
    }
    ++s.tasks_by_class[task_class(p.task)];
    allocated_gpu += p.task.total_milli_gpu();
    allocated_cpu += p.task.milli_cpu;
  }
  for (int i = 0; i < pool.node_count(); ++i) {
    const NodeId id{static_cast<std::uint32_t>(i)};
    const NodeState& actual = pool.state(id);
    refresh_summary(expected[i], pool.spec(id).gpu_count);
    ASSERT_GE(actual.free_cpu, 0);
    ASSERT_GE(actual.free_memory, 0);
    for (MilliGpu free : actual.free_milli) ASSERT_GE(free, 0);
    ASSERT_TRUE(same_node_state(actual, expected[i])) << "node " << i;
  }
  ASSERT_EQ(pool.allocated_milli_gpu(), allocated_gpu);
  ASSERT_EQ(pool.allocated_milli_cpu(), allocated_cpu);
  ASSERT_LE(pool.allocated_milli_gpu(), pool.capacity_milli_gpu());
  ASSERT_LE(pool.allocated_milli_cpu(), pool.capacity_milli_cpu());
}

// How often each outcome occurred over all seeds, to check that the random sequences exercise
// every path.
struct Tally {
  int allocated = 0;
  int refused = 0;
  int released = 0;
  int bogus_refused = 0;
  int bogus_accepted = 0;
};

// Releases something that may not be there: a random task at a random place, or a task that is
// there at a wrong place. Either refused with nothing changed, or, when the pool cannot tell it
// from a task it holds (it keeps no task list: two 300m tasks look like one 600m task), accepted
// and exactly undone by allocating it back.
void attempt_bogus_release(Rng& rng, Pool& pool, const std::vector<Placed>& live, Tally& tally) {
  TaskShape task = random_task(rng);
  Assignment where = random_assignment(rng, pool, task);
  if (!live.empty() && chance(rng, 50)) {
    const Placed& p = live[rng.below(live.size())];
    task = p.task;
    where = chance(rng, 50)
                ? Assignment{NodeId{static_cast<std::uint32_t>(rng.below(pool.node_count()))},
                             p.where.gpus}
                : random_assignment(rng, pool, task);
  }
  const bool class_absent = where.node.value < static_cast<std::uint32_t>(pool.node_count()) &&
                            pool.state(where.node).tasks_by_class[task_class(task)] == 0;
  const Pool before = pool;
  auto released = pool.release(task, where);
  if (!released) {
    ASSERT_TRUE(same_pool_state(pool, before, /*versions=*/true)) << released.error().message();
    ++tally.bogus_refused;
    return;
  }
  ASSERT_FALSE(class_absent) << "released a task of a class not running on the node";
  ASSERT_TRUE(pool.check_invariants().has_value());
  auto undone = pool.allocate(task, where);
  ASSERT_TRUE(undone.has_value()) << undone.error().message();
  ASSERT_TRUE(same_pool_state(pool, before, /*versions=*/false));
  ++tally.bogus_accepted;
}

void run_pool_sequence(std::uint64_t seed, Tally& tally) {
  Rng rng(seed);
  Pool pool = random_pool(rng);
  const Pool empty = pool;
  std::vector<Placed> live;
  for (int step = 0; step < kPoolSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const int op = draw(rng, 0, 99);
    if (op < 50) {
      const TaskShape task = random_task(rng);
      const Assignment where = random_assignment(rng, pool, task);
      const bool allowed = allocation_allowed(pool, task, where);
      const Pool before = pool;
      auto result = pool.allocate(task, where);
      ASSERT_EQ(result.has_value(), allowed)
          << describe(task, pool.models()) << " on node " << where.node.value << " gpus "
          << where.gpus << (result ? "" : ": " + result.error().message());
      if (result) {
        live.push_back({task, where});
        ++tally.allocated;
        ASSERT_EQ(pool.version(where.node), before.version(where.node) + 1);
      } else {
        ASSERT_FALSE(result.error().reason.empty());
        ++tally.refused;
        ASSERT_TRUE(same_pool_state(pool, before, /*versions=*/true));
      }
    } else if (op < 75) {
      if (live.empty()) continue;
      const std::size_t k = rng.below(live.size());
      auto result = pool.release(live[k].task, live[k].where);
      ASSERT_TRUE(result.has_value()) << result.error().message();
      live[k] = live.back();
      live.pop_back();
      ++tally.released;
    } else {
      ASSERT_NO_FATAL_FAILURE(attempt_bogus_release(rng, pool, live, tally));
    }
    ASSERT_NO_FATAL_FAILURE(expect_pool_matches(pool, live));
  }
  // Releasing everything, in random order, gives the empty pool back.
  rng.shuffle(std::span<Placed>(live));
  for (const Placed& p : live) ASSERT_TRUE(pool.release(p.task, p.where).has_value());
  ASSERT_TRUE(same_pool_state(pool, empty, /*versions=*/false));
  ASSERT_EQ(pool.allocated_milli_gpu(), 0);
}

TEST(PoolPropertyTest, RandomOperationsKeepThePoolConsistent) {
  Tally tally;
  for (std::uint64_t seed = 0; seed < kPoolSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_NO_FATAL_FAILURE(run_pool_sequence(seed, tally));
  }
  // Each path is taken thousands of times (about 10000 allocations, 19000 refusals, 10000
  // releases, 14000 refused and 550 accepted bogus releases with these seeds).
  EXPECT_GT(tally.allocated, 5000);
  EXPECT_GT(tally.refused, 5000);
  EXPECT_GT(tally.released, 5000);
  EXPECT_GT(tally.bogus_refused, 5000);
  EXPECT_GT(tally.bogus_accepted, 100);
}

// The whole-free counts a pool keeps per model (whole_free_gpus, nodes_with_whole_free) equal the
// per-node figures after random allocations, releases, cordons and uncordons, and in copies.
TEST(PoolPropertyTest, WholeFreeCountsPerModelFollowEveryChange) {
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    Pool pool = random_pool(rng);
    std::vector<Placed> live;
    for (int step = 0; step < 200; ++step) {
      const int op = draw(rng, 0, 99);
      const NodeId node{static_cast<std::uint32_t>(rng.below(pool.node_count()))};
      if (op < 50) {
        const TaskShape task = random_task(rng);
        const Assignment where = random_assignment(rng, pool, task);
        if (pool.allocate(task, where)) live.push_back({task, where});
      } else if (op < 80) {
        if (live.empty()) continue;
        const std::size_t k = rng.below(live.size());
        ASSERT_TRUE(pool.release(live[k].task, live[k].where).has_value());
        live[k] = live.back();
        live.pop_back();
      } else {
        ASSERT_TRUE(pool.set_schedulable(node, !pool.schedulable(node)).has_value());
      }
      const Pool copy = pool;
      for (int m = 0; m < kPoolModels; ++m) {
        const GpuModelId model{static_cast<std::uint32_t>(m)};
        std::int64_t free = 0;
        std::array<std::int64_t, kMaxGpusPerNode + 1> nodes{};
        for (int n = 0; n < pool.node_count(); ++n) {
          const NodeId id{static_cast<std::uint32_t>(n)};
          if (pool.spec(id).model != model) continue;
          const int whole = pool.schedulable(id) ? pool.state(id).whole_free_gpus : 0;
          free += whole;
          ++nodes[static_cast<std::size_t>(whole)];
        }
        ASSERT_EQ(pool.whole_free_gpus(model), free) << "step " << step << " model " << m;
        ASSERT_EQ(copy.whole_free_gpus(model), free);
        for (int k = 0; k <= kMaxGpusPerNode; ++k) {
          ASSERT_EQ(pool.nodes_with_whole_free(model, k), nodes[static_cast<std::size_t>(k)])
              << "step " << step << " model " << m << " count " << k;
        }
      }
    }
  }
}

// --- placement policies --------------------------------------------------------------------------

struct PolicyDecision {
  bool placed = false;
  Assignment where;

  friend bool operator==(const PolicyDecision&, const PolicyDecision&) = default;
};

// Runs `policy_name` over a random pool and task sequence; returns what it decided at each step.
// Checks along the way that every assignment is accepted by Pool::allocate, that "unplaceable"
// is said only when no node fits, and that the long-lived policy (with its memo of node scores)
// decides as a fresh one would.
std::vector<PolicyDecision> run_policy_sequence(std::string_view policy_name, std::uint64_t seed) {
  Rng rng(seed);
  Pool pool = random_pool(rng);
  if (chance(rng, 50)) {
    std::vector<NodeId> order;
    for (int i = 0; i < pool.node_count(); ++i)
      order.push_back(NodeId{static_cast<std::uint32_t>(i)});
    rng.shuffle(std::span<NodeId>(order));
    EXPECT_TRUE(pool.set_tie_order(order).has_value());
  }
  std::vector<TaskShape> workload;
  for (int i = 0; i < 40; ++i) workload.push_back(random_task(rng));
  const WorkloadProfile profile = WorkloadProfile::from_tasks(workload, 95);
  auto policy = make_placement_policy(policy_name, profile);
  EXPECT_TRUE(policy.has_value());
  if (!policy) return {};

  std::vector<PolicyDecision> outcomes;
  std::vector<Placed> live;
  for (int step = 0; step < kPolicySteps; ++step) {
    if (!live.empty() && chance(rng, 30)) {
      const std::size_t k = rng.below(live.size());
      EXPECT_TRUE(pool.release(live[k].task, live[k].where).has_value());
      live[k] = live.back();
      live.pop_back();
      continue;
    }
    // Mostly tasks of the workload, sometimes others.
    const TaskShape task =
        chance(rng, 80) ? workload[rng.below(workload.size())] : random_task(rng);
    Rng fresh_rng = rng;
    const PlacementResult result = (*policy)->place(pool, task, rng);
    auto fresh = make_placement_policy(policy_name, profile);
    const PlacementResult fresh_result = (*fresh)->place(pool, task, fresh_rng);
    EXPECT_EQ(result.has_value(), fresh_result.has_value()) << "step " << step;
    if (result && fresh_result) {
      EXPECT_EQ(*result, *fresh_result) << "step " << step << ": the memo changed the decision";
    }
    if (result) {
      auto allocated = pool.allocate(task, *result);
      EXPECT_TRUE(allocated.has_value()) << policy_name << " seed " << seed << " step " << step
                                         << ": " << allocated.error().message();
      if (!allocated) return outcomes;
      live.push_back({task, *result});
      outcomes.push_back({true, *result});
    } else {
      EXPECT_FALSE(result.error().reason.empty());
      for (int i = 0; i < pool.node_count(); ++i) {
        const NodeId id{static_cast<std::uint32_t>(i)};
        EXPECT_FALSE(fits(pool.spec(id), pool.state(id), task))
            << policy_name << " seed " << seed << " step " << step << ": node " << i
            << " fits but the policy said " << result.error().reason;
      }
      outcomes.push_back({false, {}});
    }
    const auto invariants = pool.check_invariants();
    EXPECT_TRUE(invariants.has_value()) << invariants.error().message();
    if (!invariants) return outcomes;
  }
  return outcomes;
}

// place_among (FGD and Tidepool, by their index and by the scan) chooses as place() does on a copy
// of the pool with the nodes not allowed cordoned, on random pools, tasks and node sets, the pool
// changing between decisions (so that the index follows it).
TEST(PlaceAmongPropertyTest, IsPlaceOnACopyOfThePoolWithTheOtherNodesCordoned) {
  using Make = std::unique_ptr<PlacementPolicy> (*)(const WorkloadProfile&, ScoreLookup);
  const std::array<std::pair<const char*, Make>, 2> policies = {
      std::pair<const char*, Make>{"fgd", &make_fgd_policy},
      std::pair<const char*, Make>{"tidepool", &make_tidepool_policy}};
  int found = 0;
  int none = 0;
  for (const auto& [name, make] : policies) {
    for (const ScoreLookup lookup : {ScoreLookup::kIndex, ScoreLookup::kScan}) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        SCOPED_TRACE(std::string(name) + " seed " + std::to_string(seed));
        Rng rng(seed);
        Pool pool = random_pool(rng);
        std::vector<TaskShape> workload;
        for (int i = 0; i < 20; ++i) workload.push_back(random_task(rng));
        const WorkloadProfile profile = WorkloadProfile::from_tasks(workload, 95);
        std::unique_ptr<PlacementPolicy> policy = make(profile, lookup);
        ASSERT_TRUE(policy->places_among());
        for (int step = 0; step < 60; ++step) {
          const TaskShape task = workload[rng.below(workload.size())];
          std::vector<std::uint8_t> allowed(static_cast<std::size_t>(pool.node_count()));
          Pool cordoned = pool;
          for (std::size_t n = 0; n < allowed.size(); ++n) {
            allowed[n] = chance(rng, 50) ? 1 : 0;
            if (allowed[n] == 0) {
              ASSERT_TRUE(cordoned.set_schedulable(NodeId{static_cast<std::uint32_t>(n)}, false));
            }
          }
          const std::optional<Assignment> among = policy->place_among(pool, task, allowed);
          std::unique_ptr<PlacementPolicy> fresh = make(profile, lookup);
          Rng unused(0);
          const PlacementResult on_copy = fresh->place(cordoned, task, unused);
          ASSERT_EQ(among.has_value(), on_copy.has_value()) << "step " << step;
          if (among) {
            ASSERT_EQ(*among, *on_copy) << "step " << step;
            ++found;
          } else {
            ++none;
          }
          // The pool changes: the decision of place() itself is taken.
          if (PlacementResult placed = policy->place(pool, task, unused)) {
            ASSERT_TRUE(pool.allocate(task, *placed).has_value());
          }
        }
      }
    }
  }
  EXPECT_GT(found, 1000);
  EXPECT_GT(none, 100);
}

class PolicyPropertyTest : public ::testing::TestWithParam<std::string_view> {};

TEST_P(PolicyPropertyTest, AssignmentsAreValidAndTheSameSeedGivesTheSameSchedule) {
  int placed = 0;
  int unplaceable = 0;
  for (std::uint64_t seed = 0; seed < kPolicySeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<PolicyDecision> first = run_policy_sequence(GetParam(), seed);
    ASSERT_FALSE(HasFailure());
    const std::vector<PolicyDecision> second = run_policy_sequence(GetParam(), seed);
    ASSERT_EQ(first, second);
    for (const PolicyDecision& o : first) ++(o.placed ? placed : unplaceable);
  }
  // The random pools must exercise both answers.
  EXPECT_GT(placed, 4000);
  EXPECT_GT(unplaceable, 1000);
}

std::vector<std::string_view> policy_names() {
  std::vector<std::string_view> names;
  for (const PolicyInfo& info : placement_policies()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyPropertyTest, ::testing::ValuesIn(policy_names()),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace tidepool
