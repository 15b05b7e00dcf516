#include "core/fragmentation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kT4;

TaskShape profile_task(int gpus, MilliGpu milli, MilliCpu cpu, MemoryMib memory = 0,
                       ModelSet models = ModelSet::any()) {
  auto task = make_task_shape(gpus, milli, cpu, memory, models);
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return task.value();
}

// `count` copies of `task` appended to `tasks`.
void add(std::vector<TaskShape>& tasks, const TaskShape& task, int count) {
  tasks.insert(tasks.end(), count, task);
}

// A profile holding exactly these shapes with these counts (coverage 100%).
WorkloadProfile profile_of(const std::vector<std::pair<TaskShape, int>>& shapes) {
  std::vector<TaskShape> tasks;
  for (const auto& [task, count] : shapes) add(tasks, task, count);
  return WorkloadProfile::from_tasks(tasks, 100);
}

NodeSpec node(int gpus, GpuModelId model = kT4) {
  NodeSpec spec;
  spec.name = "n";
  spec.model = model;
  spec.gpu_count = gpus;
  spec.milli_cpu = 32000;
  spec.memory_mib = 65536;
  return spec;
}

std::int64_t fragmentation(const NodeSpec& spec, MilliCpu free_cpu,
                           std::vector<MilliGpu> free_milli, const WorkloadProfile& profile) {
  return scaled_node_fragmentation(spec, free_cpu, free_milli, profile);
}

// --- WorkloadProfile ----------------------------------------------------------------------------

class WorkloadProfileTest : public ::testing::Test {
 protected:
  // 10 tasks: 5 x a, 3 x b, then c and d once each. c and d tie on count; d asks for more CPU, so
  // it is the larger shape and comes first.
  const TaskShape a = profile_task(1, 500, 2000);
  const TaskShape b = profile_task(2, 1000, 8000);
  const TaskShape c = profile_task(0, 0, 1000);
  const TaskShape d = profile_task(1, 1000, 4000);

  std::vector<TaskShape> tasks() const {
    std::vector<TaskShape> all;
    add(all, a, 5);
    add(all, b, 3);
    add(all, c, 1);
    add(all, d, 1);
    return all;
  }

  static std::vector<TaskShape> shapes_of(const WorkloadProfile& profile) {
    std::vector<TaskShape> out;
    for (const TypicalTask& t : profile.tasks()) out.push_back(t.shape);
    return out;
  }
};

TEST_F(WorkloadProfileTest, MostFrequentFirstUntilTheCoverageIsReached) {
  const auto all = tasks();
  // 50%: a alone covers 5 of 10.
  EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(all, 50)), (std::vector<TaskShape>{a}));
  // 80%: a + b cover 8 of 10.
  EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(all, 80)), (std::vector<TaskShape>{a, b}));
  // 81%..90%: one more shape is needed; d wins the tie with c.
  EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(all, 81)), (std::vector<TaskShape>{a, b, d}));
  EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(all, 90)), (std::vector<TaskShape>{a, b, d}));
  // 95% (the default) needs all four.
  EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(all)), (std::vector<TaskShape>{a, b, d, c}));
}

TEST_F(WorkloadProfileTest, CountsAndTotals) {
  const WorkloadProfile profile = WorkloadProfile::from_tasks(tasks(), 95);
  ASSERT_EQ(profile.tasks().size(), 4U);
  EXPECT_EQ(profile.tasks()[0].count, 5);
  EXPECT_EQ(profile.tasks()[1].count, 3);
  EXPECT_EQ(profile.tasks()[2].count, 1);
  EXPECT_EQ(profile.tasks()[3].count, 1);
  EXPECT_EQ(profile.total_count(), 10);
  EXPECT_EQ(profile.cpu_only_count(), 1);

  const WorkloadProfile partial = WorkloadProfile::from_tasks(tasks(), 80);
  EXPECT_EQ(partial.total_count(), 8);
  EXPECT_EQ(partial.cpu_only_count(), 0);
}

TEST_F(WorkloadProfileTest, DoesNotDependOnInputOrder) {
  const WorkloadProfile reference = WorkloadProfile::from_tasks(tasks(), 90);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<TaskShape> shuffled = tasks();
    Rng rng(seed);
    rng.shuffle(std::span<TaskShape>(shuffled));
    EXPECT_EQ(shapes_of(WorkloadProfile::from_tasks(shuffled, 90)), shapes_of(reference))
        << "seed " << seed;
  }
}

TEST(WorkloadProfileTieTest, EqualCountsAreOrderedLargerShapeFirst) {
  // All once: CPU decides first, then the per-GPU share, then the GPU count.
  const TaskShape small_cpu = profile_task(1, 900, 1000);
  const TaskShape big_share = profile_task(1, 700, 2000);
  const TaskShape small_share = profile_task(1, 300, 2000);
  const TaskShape two_gpus = profile_task(2, 1000, 2000);
  const TaskShape one_gpu = profile_task(1, 1000, 2000);
  for (const std::vector<TaskShape>& input :
       {std::vector<TaskShape>{small_cpu, big_share, small_share, two_gpus, one_gpu},
        std::vector<TaskShape>{one_gpu, two_gpus, small_share, big_share, small_cpu}}) {
    const WorkloadProfile profile = WorkloadProfile::from_tasks(input, 100);
    ASSERT_EQ(profile.tasks().size(), 5U);
    EXPECT_EQ(profile.tasks()[0].shape, two_gpus);
    EXPECT_EQ(profile.tasks()[1].shape, one_gpu);
    EXPECT_EQ(profile.tasks()[2].shape, big_share);
    EXPECT_EQ(profile.tasks()[3].shape, small_share);
    EXPECT_EQ(profile.tasks()[4].shape, small_cpu);
  }
}

TEST(WorkloadProfileMemoryTest, ShapesDifferingOnlyInMemoryAreOne) {
  std::vector<TaskShape> tasks;
  add(tasks, profile_task(1, 500, 2000, 1024), 2);
  add(tasks, profile_task(1, 500, 2000, 4096), 2);
  add(tasks, profile_task(1, 1000, 2000, 0), 3);
  const WorkloadProfile profile = WorkloadProfile::from_tasks(tasks, 100);
  ASSERT_EQ(profile.tasks().size(), 2U);
  // Merged, the half-GPU shape (4) outnumbers the whole-GPU shape (3).
  EXPECT_EQ(profile.tasks()[0].shape, profile_task(1, 500, 2000, 0));
  EXPECT_EQ(profile.tasks()[0].count, 4);
  EXPECT_EQ(profile.tasks()[0].shape.memory_mib, 0);
  EXPECT_EQ(profile.tasks()[1].count, 3);
}

TEST(WorkloadProfileMemoryTest, ModelConstraintsKeepShapesApart) {
  std::vector<TaskShape> tasks;
  add(tasks, profile_task(1, 1000, 0, 0, ModelSet::only(kT4)), 2);
  add(tasks, profile_task(1, 1000, 0, 0, ModelSet::only(kA100)), 1);
  add(tasks, profile_task(1, 1000, 0, 0), 1);
  const WorkloadProfile profile = WorkloadProfile::from_tasks(tasks, 100);
  EXPECT_EQ(profile.tasks().size(), 3U);
  EXPECT_EQ(profile.tasks()[0].shape.models, ModelSet::only(kT4));
}

TEST(WorkloadProfileMemoryTest, EmptyWorkloadGivesAnEmptyProfile) {
  const WorkloadProfile profile = WorkloadProfile::from_tasks({}, 95);
  EXPECT_TRUE(profile.tasks().empty());
  EXPECT_EQ(profile.total_count(), 0);
  EXPECT_EQ(profile.cpu_only_count(), 0);
}

// --- scaled_node_fragmentation -------------------------------------------------------------------

TEST(NodeFragmentationTest, FullOrGpuLessNodeHasNone) {
  const WorkloadProfile profile =
      profile_of({{profile_task(1, 500, 1000), 1}, {profile_task(0, 0, 1000), 1}});
  EXPECT_EQ(fragmentation(node(4), 32000, {0, 0, 0, 0}, profile), 0);
  EXPECT_EQ(fragmentation(node(0), 32000, {}, profile), 0);
}

TEST(NodeFragmentationTest, EmptyNodeHasNoneForAGpuTaskThatFits) {
  const WorkloadProfile profile = profile_of({{profile_task(1, 500, 1000), 1}});
  EXPECT_EQ(fragmentation(node(4), 32000, {1000, 1000, 1000, 1000}, profile), 0);
}

TEST(NodeFragmentationTest, SharesBelowTheDemandAreFragment) {
  // One typical task of 500m: GPUs with 300m and 200m free (and the full one) cannot serve it;
  // the 1000m GPU can.
  const WorkloadProfile profile = profile_of({{profile_task(1, 500, 1000), 1}});
  EXPECT_EQ(fragmentation(node(4), 32000, {300, 1000, 0, 200}, profile), 500);
  // Exactly the demand is not a fragment.
  EXPECT_EQ(fragmentation(node(2), 32000, {500, 499}, profile), 499);
}

TEST(NodeFragmentationTest, TooFewGpusWithTheShareCountsAllIdleGpu) {
  // A 2-GPU task on a node with one whole GPU free: all 1500m idle count.
  const WorkloadProfile profile = profile_of({{profile_task(2, 1000, 1000), 1}});
  EXPECT_EQ(fragmentation(node(4), 32000, {300, 1000, 0, 200}, profile), 1500);
  // With two whole GPUs free only the partial ones count.
  EXPECT_EQ(fragmentation(node(4), 32000, {300, 1000, 1000, 200}, profile), 500);
}

TEST(NodeFragmentationTest, ModelNotAcceptedCountsAllIdleGpu) {
  const WorkloadProfile profile =
      profile_of({{profile_task(1, 500, 1000, 0, ModelSet::only(kA100)), 1}});
  EXPECT_EQ(fragmentation(node(2, kT4), 32000, {1000, 1000}, profile), 2000);
  EXPECT_EQ(fragmentation(node(2, kA100), 32000, {1000, 1000}, profile), 0);
}

TEST(NodeFragmentationTest, CpuOnlyTaskCountsAllIdleGpu) {
  const WorkloadProfile profile = profile_of({{profile_task(0, 0, 1000), 1}});
  EXPECT_EQ(fragmentation(node(2), 32000, {1000, 400}, profile), 1400);
}

TEST(NodeFragmentationTest, LackOfCpuCountsAllIdleGpu) {
  const WorkloadProfile profile = profile_of({{profile_task(1, 500, 4000), 1}});
  EXPECT_EQ(fragmentation(node(2), 3999, {1000, 1000}, profile), 2000);
  EXPECT_EQ(fragmentation(node(2), 4000, {1000, 1000}, profile), 0);
}

TEST(NodeFragmentationTest, WeightedByCountAndScaled) {
  // x: 1 x 500m, 3 times; y: 2 whole GPUs, once. total_count = 4.
  const WorkloadProfile profile =
      profile_of({{profile_task(1, 500, 1000), 3}, {profile_task(2, 1000, 1000), 1}});
  ASSERT_EQ(profile.total_count(), 4);
  // {300, 1000, 0, 200}: x sees 500 below its share, y fits nowhere (one whole GPU): 1500.
  // 3 * 500 + 1 * 1500 = 3000, i.e. 750m.
  EXPECT_EQ(fragmentation(node(4), 32000, {300, 1000, 0, 200}, profile), 3000);
  // {1000, 1000, 400, 0}: x and y both run; 400m is below both shares: 3 * 400 + 400 = 1600.
  EXPECT_EQ(fragmentation(node(4), 32000, {1000, 1000, 400, 0}, profile), 1600);
}

TEST(NodeFragmentationTest, MemoryIsNotPartOfTheMeasure) {
  const WorkloadProfile profile = profile_of({{profile_task(1, 500, 1000, 1 << 20), 1}});
  // The node has 64 GiB; the task asked for 1 TiB, but the measure ignores memory.
  EXPECT_EQ(fragmentation(node(2), 32000, {1000, 1000}, profile), 0);
}

TEST(NodeFragmentationTest, NodeStateOverloadReadsOnlyTheNodesGpus) {
  const WorkloadProfile profile = profile_of({{profile_task(1, 500, 1000), 1}});
  const NodeSpec spec = node(3);
  NodeState state = empty_state(spec);
  state.free_milli[0] = 200;
  state.free_milli[1] = 700;
  state.free_milli[5] = 999;  // past gpu_count: must be ignored
  refresh_summary(state, spec.gpu_count);
  EXPECT_EQ(scaled_node_fragmentation(spec, state, profile), 200);
}

}  // namespace
}  // namespace tidepool
