#include "core/policies/placement_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/policies/policy_factories.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kT4;
using test_support::single_leaf_pool;

NodeSpec policy_node(std::string name, int gpus, MilliCpu cpu = 64000, GpuModelId model = kT4) {
  return test_support::model_node(std::move(name), gpus, cpu, model);
}

TaskShape policy_task(int gpus, MilliGpu milli, MilliCpu cpu = 0,
                      ModelSet models = ModelSet::any()) {
  auto task = make_task_shape(gpus, milli, cpu, 0, models);
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return task.value();
}

void occupy(Pool& pool, std::uint32_t node, const TaskShape& task, GpuSet gpus) {
  auto ok = pool.allocate(task, {NodeId{node}, gpus});
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

// A profile of one task shape (FGD and Tidepool measure fragmentation against it).
WorkloadProfile one_shape_profile(const TaskShape& task) {
  const TaskShape tasks[] = {task};
  return WorkloadProfile::from_tasks(tasks, 100);
}

std::unique_ptr<PlacementPolicy> make_policy(
    std::string_view name,
    const WorkloadProfile& profile = one_shape_profile(policy_task(1, 1000))) {
  auto policy = make_placement_policy(name, profile);
  EXPECT_TRUE(policy.has_value()) << policy.error().message();
  return std::move(policy).value();
}

// Places `task` with a fresh `policy_name` policy, and checks that the answer does not change when
// the tie order is reversed (a scenario that pins a policy's rule must not rest on ties).
PlacementResult place(std::string_view policy_name, Pool pool, const TaskShape& task,
                      const WorkloadProfile& profile = one_shape_profile(policy_task(1, 1000))) {
  Rng rng(1);
  PlacementResult result = make_policy(policy_name, profile)->place(pool, task, rng);

  std::vector<NodeId> reversed;
  for (int i = pool.node_count() - 1; i >= 0; --i) {
    reversed.push_back(NodeId{static_cast<std::uint32_t>(i)});
  }
  EXPECT_TRUE(pool.set_tie_order(reversed).has_value());
  Rng rng2(1);
  const PlacementResult again = make_policy(policy_name, profile)->place(pool, task, rng2);
  EXPECT_EQ(result.has_value(), again.has_value());
  if (result && again) {
    EXPECT_EQ(*result, *again) << policy_name << ": decided by tie order";
  }
  return result;
}

// --- registry ---------------------------------------------------------------------------------

TEST(PlacementPolicyRegistryTest, ListsSevenPoliciesInLabelOrder) {
  const auto policies = placement_policies();
  ASSERT_EQ(policies.size(), 7U);
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    names.insert(policies[i].name);
    EXPECT_FALSE(policies[i].summary.empty());
    if (i > 0) {
      EXPECT_LT(policies[i - 1].label, policies[i].label);
    }
  }
  EXPECT_EQ(names.size(), 7U);
  EXPECT_EQ(policies.front().name, "random");
  EXPECT_EQ(policies.back().name, "tidepool");
}

TEST(PlacementPolicyRegistryTest, FindsByNameOrLabelIgnoringCase) {
  struct Case {
    std::string_view query;
    std::string_view name;
  };
  const Case cases[] = {
      {"fgd", "fgd"},
      {"FGD", "fgd"},
      {"06-FGD", "fgd"},
      {"06-fgd", "fgd"},
      {"Best-Fit", "best-fit"},
      {"05-bestfit", "best-fit"},
      {"01-Random", "random"},
      {"02-dotprod", "dot-product"},
      {"gpu-PACKING", "gpu-packing"},
      {"03-GpuClustering", "gpu-clustering"},
      {"07-TIDEPOOL", "tidepool"},
  };
  for (const Case& c : cases) {
    auto info = find_placement_policy(c.query);
    ASSERT_TRUE(info.has_value()) << c.query;
    EXPECT_EQ(info->name, c.name) << c.query;
  }
}

TEST(PlacementPolicyRegistryTest, UnknownNameListsTheKnownOnes) {
  for (std::string_view bad : {"", "fgd2", "06", "best fit"}) {
    auto info = find_placement_policy(bad);
    ASSERT_FALSE(info.has_value()) << bad;
    EXPECT_EQ(info.error().field, "policy");
    EXPECT_NE(info.error().reason.find("'" + std::string(bad) + "'"), std::string::npos);
    EXPECT_NE(info.error().reason.find(
                  "random, dot-product, gpu-clustering, gpu-packing, best-fit, fgd, tidepool"),
              std::string::npos)
        << info.error().reason;
  }
}

TEST(PlacementPolicyRegistryTest, MakesEveryPolicyByNameAndLabel) {
  const WorkloadProfile profile = one_shape_profile(policy_task(1, 1000));
  for (const PolicyInfo& info : placement_policies()) {
    for (std::string_view key : {info.name, info.label}) {
      auto policy = make_placement_policy(key, profile);
      ASSERT_TRUE(policy.has_value()) << key;
      ASSERT_NE(*policy, nullptr);
      EXPECT_EQ((*policy)->name(), info.name) << key;
    }
  }
  auto unknown = make_placement_policy("first-fit", profile);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "policy");
}

// --- rules shared by every policy ------------------------------------------------------------

class EveryPolicyTest : public ::testing::TestWithParam<std::string_view> {};

TEST_P(EveryPolicyTest, UnplaceableWithAReasonWhenNothingFits) {
  Pool pool = single_leaf_pool({policy_node("a", 2, 4000), policy_node("b", 1, 64000, kA100)});
  occupy(pool, 0, policy_task(1, 1000), 0b01);
  const TaskShape tasks[] = {
      policy_task(2, 1000),                             // a has one GPU left, b has one
      policy_task(1, 1000, 8000, ModelSet::only(kT4)),  // a lacks CPU, b has another model
      policy_task(0, 0, 100000),                        // no node has 100 cores
      policy_task(3, 1000),                             // no node has 3 GPUs
  };
  for (const TaskShape& task : tasks) {
    Rng rng(3);
    const PlacementResult result = make_policy(GetParam())->place(pool, task, rng);
    ASSERT_FALSE(result.has_value()) << describe(task, pool.models());
    EXPECT_EQ(result.error().reason, explain_unplaceable(pool, task));
  }
}

TEST_P(EveryPolicyTest, PlacesOnTheOnlyFeasibleNodeWithValidGpus) {
  // Only c fits a 2-GPU T4 task with 8 cores: a lacks CPU, b has A100s, d has one GPU free.
  Pool pool = single_leaf_pool({policy_node("a", 4, 4000), policy_node("b", 4, 64000, kA100),
                                policy_node("c", 4), policy_node("d", 2)});
  occupy(pool, 2, policy_task(1, 600), 0b0100);
  occupy(pool, 3, policy_task(1, 1000), 0b01);
  const TaskShape task = policy_task(2, 1000, 8000, ModelSet::only(kT4));
  Rng rng(5);
  const PlacementResult result = make_policy(GetParam())->place(pool, task, rng);
  ASSERT_TRUE(result.has_value()) << result.error().reason;
  EXPECT_EQ(result->node, NodeId{2});
  // Whole GPUs: two wholly free ones of c (GPU 2 is shared).
  EXPECT_EQ(gpu_set_size(result->gpus), 2);
  EXPECT_FALSE(gpu_set_contains(result->gpus, 2));
  EXPECT_TRUE(pool.allocate(task, *result).has_value());
}

TEST_P(EveryPolicyTest, CpuOnlyTaskGetsNoGpu) {
  Pool pool = single_leaf_pool({policy_node("a", 2), policy_node("b", 0)});
  Rng rng(7);
  const PlacementResult result = make_policy(GetParam())->place(pool, policy_task(0, 0, 2000), rng);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->gpus, 0U);
}

TEST_P(EveryPolicyTest, AnswersForThePoolItIsGivenAfterCopiesDiverge) {
  // The scheduler tries placements on copies of its pool (without some running jobs): two copies
  // that changed as often, node by node, are still different pools to one policy.
  const Pool base = single_leaf_pool({policy_node("a", 2)});
  Pool first = base;
  Pool second = base;
  occupy(first, 0, policy_task(1, 1000), 0b01);   // first: GPU 1 free
  occupy(second, 0, policy_task(1, 1000), 0b10);  // second: GPU 0 free
  ASSERT_EQ(first.version(NodeId{0}), second.version(NodeId{0}));
  const std::unique_ptr<PlacementPolicy> policy = make_policy(GetParam());
  const TaskShape task = policy_task(1, 1000);
  for (Pool* pool : {&first, &second, &first}) {
    Rng rng(11);
    const PlacementResult result = policy->place(*pool, task, rng);
    ASSERT_TRUE(result.has_value()) << result.error().reason;
    EXPECT_TRUE(Pool(*pool).allocate(task, *result).has_value())
        << GetParam() << " placed on GPUs " << result->gpus << " that are not free";
  }
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, EveryPolicyTest,
                         ::testing::Values("random", "dot-product", "gpu-clustering", "gpu-packing",
                                           "best-fit", "fgd", "tidepool"),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class DeterministicPolicyTest : public ::testing::TestWithParam<std::string_view> {};

TEST_P(DeterministicPolicyTest, TiesGoToTheLowestTieRank) {
  // Three identical empty nodes: every score ties.
  Pool pool = single_leaf_pool({policy_node("a", 4), policy_node("b", 4), policy_node("c", 4)});
  for (const TaskShape& task :
       {policy_task(1, 1000, 1000), policy_task(1, 500), policy_task(0, 0, 1000)}) {
    Rng rng(9);
    auto first = make_policy(GetParam())->place(pool, task, rng);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->node, NodeId{0});
  }

  const NodeId order[] = {NodeId{2}, NodeId{0}, NodeId{1}};
  ASSERT_TRUE(pool.set_tie_order(order).has_value());
  for (const TaskShape& task :
       {policy_task(1, 1000, 1000), policy_task(1, 500), policy_task(0, 0, 1000)}) {
    Rng rng(9);
    auto placed = make_policy(GetParam())->place(pool, task, rng);
    ASSERT_TRUE(placed.has_value());
    EXPECT_EQ(placed->node, NodeId{2});
  }
}

TEST_P(DeterministicPolicyTest, IgnoresTheRandomGenerator) {
  Pool pool = single_leaf_pool({policy_node("a", 4), policy_node("b", 8), policy_node("c", 2)});
  occupy(pool, 1, policy_task(1, 300), 0b1);
  occupy(pool, 2, policy_task(1, 1000), 0b1);
  const TaskShape task = policy_task(1, 400, 2000);
  Rng first_rng(1);
  const auto first = make_policy(GetParam())->place(pool, task, first_rng);
  ASSERT_TRUE(first.has_value());
  for (std::uint64_t seed = 2; seed < 20; ++seed) {
    Rng rng(seed);
    const auto again = make_policy(GetParam())->place(pool, task, rng);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, *first) << "seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllButRandom, DeterministicPolicyTest,
                         ::testing::Values("dot-product", "gpu-clustering", "gpu-packing",
                                           "best-fit", "fgd", "tidepool"),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// --- each baseline's rule -----------------------------------------------------------------------

TEST(RandomPolicyTest, ReturnsFeasibleNodesAndReachesEach) {
  // Feasible for a 1 x 500m T4 task with 4 cores: b and d only.
  Pool pool = single_leaf_pool({policy_node("a", 4, 2000), policy_node("b", 2),
                                policy_node("c", 4, 64000, kA100), policy_node("d", 3),
                                policy_node("e", 0)});
  occupy(pool, 1, policy_task(1, 800), 0b01);   // b: GPU 0 has 200m free, GPU 1 is whole
  occupy(pool, 3, policy_task(1, 600), 0b001);  // d: GPU 0 has 400m free
  occupy(pool, 3, policy_task(1, 1000), 0b010);
  const TaskShape task = policy_task(1, 500, 4000, ModelSet::only(kT4));
  std::set<std::uint32_t> nodes;
  std::set<std::pair<std::uint32_t, GpuSet>> choices;
  auto policy = make_policy("random");
  Rng rng(12345);
  for (int i = 0; i < 200; ++i) {
    const PlacementResult result = policy->place(pool, task, rng);
    ASSERT_TRUE(result.has_value());
    Pool copy = pool;
    ASSERT_TRUE(copy.allocate(task, *result).has_value());
    nodes.insert(result->node.value);
    choices.insert({result->node.value, result->gpus});
  }
  EXPECT_EQ(nodes, (std::set<std::uint32_t>{1, 3}));
  // The only GPUs with 500m free: b's GPU 1, d's GPU 2.
  EXPECT_EQ(choices, (std::set<std::pair<std::uint32_t, GpuSet>>{{1, 0b10}, {3, 0b100}}));
}

TEST(RandomPolicyTest, DrawsFractionGpusAtRandomAndWholeGpusLowestFirst) {
  Pool pool = single_leaf_pool({policy_node("a", 4)});
  occupy(pool, 0, policy_task(1, 1000), 0b0010);
  auto policy = make_policy("random");
  Rng rng(77);
  std::set<GpuSet> fraction_gpus;
  for (int i = 0; i < 100; ++i) {
    auto result = policy->place(pool, policy_task(1, 100), rng);
    ASSERT_TRUE(result.has_value());
    fraction_gpus.insert(result->gpus);
    auto whole = policy->place(pool, policy_task(2, 1000), rng);
    ASSERT_TRUE(whole.has_value());
    EXPECT_EQ(whole->gpus, 0b0101U);
  }
  EXPECT_EQ(fraction_gpus, (std::set<GpuSet>{0b0001, 0b0100, 0b1000}));
}

TEST(RandomPolicyTest, SameSeedSameChoices) {
  Pool pool = single_leaf_pool(
      {policy_node("a", 4), policy_node("b", 4), policy_node("c", 4), policy_node("d", 4)});
  auto draw = [&](std::uint64_t seed) {
    auto policy = make_policy("random");
    Rng rng(seed);
    std::vector<Assignment> out;
    for (int i = 0; i < 50; ++i) out.push_back(*policy->place(pool, policy_task(1, 250), rng));
    return out;
  };
  EXPECT_EQ(draw(8), draw(8));
  EXPECT_NE(draw(8), draw(9));
}

TEST(BestFitPolicyTest, PicksTheNodeWithLeastLeft) {
  // b has 4 of 8 GPUs and 8 cores taken, a is empty:
  //   a: left = 0.5 * 63/128 + 0.5 * 7/8 = 0.684 -> score 31
  //   b: left = 0.5 * 55/128 + 0.5 * 3/8 = 0.402 -> score 59
  Pool pool = single_leaf_pool({policy_node("a", 8), policy_node("b", 8)});
  occupy(pool, 1, policy_task(4, 1000, 8000), 0b1111);
  const auto result = place("best-fit", pool, policy_task(1, 1000, 1000));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
  EXPECT_EQ(result->gpus, 0b10000U);  // the lowest wholly free GPU
}

TEST(BestFitPolicyTest, CountsCpuAsMuchAsGpu) {
  // a: 16 cores, 8 GPUs, empty:        left = 0.5 * 16/128 + 0.5 * 7/8 = 0.5    -> 50
  // b: 128 cores, 8 GPUs, 2 GPUs used: left = 0.5 * 128/128 + 0.5 * 5/8 = 0.8125 -> 18
  // Best fit takes a although b has less GPU free (dot-product decides the other way, below).
  Pool pool = single_leaf_pool({policy_node("b", 8, 128000), policy_node("a", 8, 16000)});
  occupy(pool, 0, policy_task(2, 1000), 0b11);
  const auto result = place("best-fit", pool, policy_task(1, 1000));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
}

TEST(BestFitPolicyTest, PutsAFractionOnTheTightestGpu) {
  Pool pool = single_leaf_pool({policy_node("a", 4)});
  occupy(pool, 0, policy_task(1, 400), 0b0001);  // GPU 0: 600m free
  occupy(pool, 0, policy_task(1, 700), 0b0100);  // GPU 2: 300m free
  occupy(pool, 0, policy_task(1, 900), 0b1000);  // GPU 3: 100m free
  const auto result = place("best-fit", pool, policy_task(1, 250));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->gpus, 0b0100U);
}

TEST(DotProductPolicyTest, PicksTheLowestDotProduct) {
  // Task: 1 GPU, no CPU; demand = (0, 1/8).
  //   b (128 cores, 6 of 8 GPUs free): free . demand = 6/8 * 1/8 = 0.094 -> score 95
  //   a (16 cores, 8 of 8 GPUs free):  free . demand = 1 * 1/8   = 0.125 -> score 93
  Pool pool = single_leaf_pool({policy_node("b", 8, 128000), policy_node("a", 8, 16000)});
  occupy(pool, 0, policy_task(2, 1000), 0b11);
  const auto result = place("dot-product", pool, policy_task(1, 1000));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{0});
  EXPECT_EQ(result->gpus, 0b100U);
}

TEST(DotProductPolicyTest, CpuHeavyTaskGoesWhereCpuIsScarce) {
  // Task: 32 cores, 1 GPU; demand = (1/4, 1/8).
  //   a (128 cores, 8 GPUs): 1 * 1/4 + 1 * 1/8       = 0.375  -> score 81
  //   b (40 cores, 8 GPUs):  40/128 * 1/4 + 1 * 1/8 = 0.203 -> score 89
  Pool pool = single_leaf_pool({policy_node("a", 8, 128000), policy_node("b", 8, 40000)});
  const auto result = place("dot-product", pool, policy_task(1, 1000, 32000));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
}

TEST(GpuPackingPolicyTest, PrefersAPartlyUsedGpu) {
  // a idle (33 - 4 = 29); b has a whole GPU used (a free GPU of a used node: 49); c has GPU 2
  // half used (fits on a partly used GPU: 100 - 50 / 10 = 95).
  Pool pool = single_leaf_pool({policy_node("a", 4), policy_node("b", 4), policy_node("c", 4)});
  occupy(pool, 1, policy_task(1, 1000), 0b0001);
  occupy(pool, 2, policy_task(1, 500), 0b0100);
  const auto result = place("gpu-packing", pool, policy_task(1, 300));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{2});
  EXPECT_EQ(result->gpus, 0b0100U);
}

TEST(GpuPackingPolicyTest, PrefersTheFullerPartlyUsedGpu) {
  // a: GPU 1 has 800m free (100 - 80 / 10 = 92); b: GPU 3 has 400m free (100 - 40 / 10 = 96).
  Pool pool = single_leaf_pool({policy_node("a", 4), policy_node("b", 4)});
  occupy(pool, 0, policy_task(1, 200), 0b0010);
  occupy(pool, 1, policy_task(1, 600), 0b1000);
  const auto result = place("gpu-packing", pool, policy_task(1, 300));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
  EXPECT_EQ(result->gpus, 0b1000U);
}

TEST(GpuPackingPolicyTest, OpensAnIdleNodeLast) {
  // Whole GPU: b has one GPU used (49), a and c are idle (33 - 8 = 25, 33 - 2 = 31).
  Pool pool = single_leaf_pool({policy_node("a", 8), policy_node("c", 2), policy_node("b", 4)});
  occupy(pool, 2, policy_task(1, 1000), 0b0001);
  const auto used = place("gpu-packing", pool, policy_task(1, 1000));
  ASSERT_TRUE(used.has_value());
  EXPECT_EQ(used->node, NodeId{2});
  EXPECT_EQ(used->gpus, 0b0010U);

  // Among idle nodes the one with fewer GPUs scores higher: c (31) before a (25).
  Pool idle = single_leaf_pool({policy_node("a", 8), policy_node("c", 2)});
  const auto fresh = place("gpu-packing", idle, policy_task(1, 1000));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->node, NodeId{1});
}

TEST(GpuClusteringPolicyTest, PrefersANodeRunningTheSameClass) {
  // Task: 1 whole GPU (class 2). Bands by the classes running:
  //   a idle: 25 + 0 = 25;    b only 2-GPU tasks: 0 + 25 * 2000 / 8000 = 6;
  //   c mixed (1 and 2 GPUs): 50 + 25 * 3000 / 8000 = 59;
  //   d only 1-GPU tasks:     75 + 25 * 1000 / 8000 = 78.
  Pool pool = single_leaf_pool(
      {policy_node("a", 8), policy_node("b", 8), policy_node("c", 8), policy_node("d", 8)});
  occupy(pool, 1, policy_task(2, 1000), 0b11);
  occupy(pool, 2, policy_task(2, 1000), 0b11);
  occupy(pool, 2, policy_task(1, 1000), 0b100);
  occupy(pool, 3, policy_task(1, 1000), 0b1);
  const auto result = place("gpu-clustering", pool, policy_task(1, 1000));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{3});
  EXPECT_EQ(result->gpus, 0b10U);
}

TEST(GpuClusteringPolicyTest, MixedNodeBeatsIdleNodeBeatsForeignNode) {
  Pool pool = single_leaf_pool({policy_node("b", 8), policy_node("a", 8), policy_node("c", 8)});
  occupy(pool, 0, policy_task(2, 1000), 0b11);  // b: only 2-GPU tasks (6)
  occupy(pool, 2, policy_task(2, 1000), 0b11);  // c: 2-GPU task and a fraction (50 + 7 = 57)
  occupy(pool, 2, policy_task(1, 500), 0b100);
  const auto mixed = place("gpu-clustering", pool, policy_task(1, 200));
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->node, NodeId{2});

  // Without c, the idle node a (25) wins over b, where only other classes run.
  Pool two = single_leaf_pool({policy_node("b", 8), policy_node("a", 8)});
  occupy(two, 0, policy_task(2, 1000), 0b11);
  const auto idle = place("gpu-clustering", two, policy_task(1, 200));
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->node, NodeId{1});
}

TEST(FgdPolicyTest, AvoidsGrowingFragmentation) {
  // Typical task: 1 x 500m. a's GPU has 700m free, b's is whole.
  //   on a: 700m -> 200m, which the typical task cannot use: growth +200 -> score 45;
  //   on b: 1000m -> 500m, still usable: growth 0 -> score 50.
  // FGD opens b, where best fit would take a.
  const WorkloadProfile profile = one_shape_profile(policy_task(1, 500));
  Pool pool = single_leaf_pool({policy_node("a", 1), policy_node("b", 1)});
  occupy(pool, 0, policy_task(1, 300), 0b1);
  const auto result = place("fgd", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
  const auto best_fit = place("best-fit", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(best_fit.has_value());
  EXPECT_EQ(best_fit->node, NodeId{0});
}

TEST(FgdPolicyTest, ChoosesTheGpuThatReducesFragmentation) {
  // Typical task: 1 whole GPU. Node b: GPU 0 has 500m free (a fragment), GPU 1 is whole.
  //   a (2 whole GPUs): growth +500 -> score 37;
  //   b, GPU 0: the fragment is used up, growth -500 -> score 62;
  //   b, GPU 1: no whole GPU left, all 1000m idle is fragment, growth +500.
  const WorkloadProfile profile = one_shape_profile(policy_task(1, 1000));
  Pool pool = single_leaf_pool({policy_node("a", 2), policy_node("b", 2)});
  occupy(pool, 1, policy_task(1, 500), 0b01);
  const auto result = place("fgd", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
  EXPECT_EQ(result->gpus, 0b01U);
}

TEST(FgdPolicyTest, KeepsGpusForTasksOfTheirModel) {
  // Typical task: 1 x 500m on A100 only. A CPU-only task fits on both nodes; on the A100 node it
  // would take the CPU the typical task needs, making all its GPU a fragment.
  const WorkloadProfile profile =
      one_shape_profile(policy_task(1, 500, 8000, ModelSet::only(kA100)));
  Pool pool =
      single_leaf_pool({policy_node("a100", 2, 16000, kA100), policy_node("t4", 2, 16000, kT4)});
  const auto result = place("fgd", pool, policy_task(0, 0, 10000), profile);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
}

TEST(TidepoolPolicyTest, AvoidsGrowingFragmentation) {
  // The same scenario as FgdPolicyTest.AvoidsGrowingFragmentation.
  const WorkloadProfile profile = one_shape_profile(policy_task(1, 500));
  Pool pool = single_leaf_pool({policy_node("a", 1), policy_node("b", 1)});
  occupy(pool, 0, policy_task(1, 300), 0b1);
  const auto result = place("tidepool", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->node, NodeId{1});
}

// Demand tied to A100 (a third of the GPU demand) expects all of the A100 node's capacity. A
// half-GPU task that accepts any model: FGD fills the A100 node's half-used GPU, whose 500m are a
// fragment for whole-GPU tasks; Tidepool leaves the A100 to the demand tied to it (its pressure
// outweighs the fragment) as long as the pool can feed its GPUs.
Pool pressed_a100_pool(MilliCpu cpu_per_node) {
  Pool pool = single_leaf_pool(
      {policy_node("a100", 2, cpu_per_node, kA100), policy_node("t4", 6, 3 * cpu_per_node, kT4)});
  occupy(pool, 0, policy_task(1, 500), 0b01);
  return pool;
}

WorkloadProfile a100_tied_profile(MilliCpu cpu) {
  std::vector<TaskShape> tasks(6, policy_task(1, 500, cpu));
  tasks.push_back(policy_task(1, 1000, cpu));
  tasks.push_back(policy_task(1, 1000, cpu, ModelSet::only(kA100)));
  tasks.push_back(policy_task(1, 1000, cpu, ModelSet::only(kA100)));
  return WorkloadProfile::from_tasks(tasks, 100);
}

TEST(TidepoolPolicyTest, LeavesAPressedModelToTheDemandTiedToIt) {
  const WorkloadProfile profile = a100_tied_profile(0);
  const Pool pool = pressed_a100_pool(16000);
  const auto fgd = place("fgd", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(fgd.has_value());
  EXPECT_EQ(fgd->node, NodeId{0});
  const auto any = place("tidepool", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(any.has_value());
  EXPECT_EQ(any->node, NodeId{1});
  const auto tied = place("tidepool", pool, policy_task(1, 500, 0, ModelSet::only(kA100)), profile);
  ASSERT_TRUE(tied.has_value());
  EXPECT_EQ(tied->node, NodeId{0});
}

// The same where the pool cannot feed its GPUs at the workload's CPU per GPU (it has 0.8 cores
// per GPU, the workload asks 1.5): Tidepool follows FGD alone.
TEST(TidepoolPolicyTest, FollowsFgdWhereThePoolCannotFeedItsGpus) {
  const WorkloadProfile profile = a100_tied_profile(1000);
  const Pool pool = pressed_a100_pool(1600);
  const auto fgd = place("fgd", pool, policy_task(1, 500), profile);
  const auto tidepool = place("tidepool", pool, policy_task(1, 500), profile);
  ASSERT_TRUE(fgd.has_value());
  ASSERT_TRUE(tidepool.has_value());
  EXPECT_EQ(fgd->node, NodeId{0});
  EXPECT_EQ(*tidepool, *fgd);
}

}  // namespace
}  // namespace tidepool
