#include "core/policies/pool_demand.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kT4;
using test_support::single_leaf_pool;

using test_support::model_node;

TaskShape task(int gpus, MilliGpu milli, MilliCpu cpu, ModelSet models = ModelSet::any()) {
  auto shape = make_task_shape(gpus, milli, cpu, 0, models);
  EXPECT_TRUE(shape.has_value()) << shape.error().message();
  return shape.value();
}

WorkloadProfile profile_of(const std::vector<TaskShape>& tasks) {
  return WorkloadProfile::from_tasks(tasks, 100);
}

// 6 T4 GPUs and 2 A100 GPUs. A fourth of the tasks (by GPU) accept only A100: they expect a fourth
// of the pool's 8 GPUs, 2, all of the A100s' capacity. The others accept any model: no pressure.
TEST(PoolDemandTest, DemandTiedToAModelPressesOnItsCapacity) {
  const Pool pool =
      single_leaf_pool({model_node("t4", 6, 48000, kT4), model_node("a100", 2, 16000, kA100)});
  std::vector<TaskShape> tasks(3, task(1, 1000, 4000));
  tasks.push_back(task(1, 1000, 4000, ModelSet::only(kA100)));
  const PoolDemand demand = PoolDemand::of(profile_of(tasks), pool);
  EXPECT_DOUBLE_EQ(demand.pressure(kA100).value_or(-1), 1.0);
  EXPECT_DOUBLE_EQ(demand.pressure(kT4).value_or(-1), 0.0);
  // Any task: its least pressed model is T4; on A100 it displaces all it takes.
  EXPECT_DOUBLE_EQ(demand.displacement(task(1, 1000, 0), kA100), 1.0);
  EXPECT_DOUBLE_EQ(demand.displacement(task(1, 1000, 0), kT4), 0.0);
  // A task tied to A100 displaces nothing there: it has no other choice.
  EXPECT_DOUBLE_EQ(demand.displacement(task(1, 1000, 0, ModelSet::only(kA100)), kA100), 0.0);
}

// Tied demand spreads over the models it accepts in proportion to their capacity, and a pressure
// is at most 1.
TEST(PoolDemandTest, TiedDemandSpreadsOverItsModelsByCapacityAndPressureIsAtMostOne) {
  const Pool pool =
      single_leaf_pool({model_node("t4", 6, 48000, kT4), model_node("a100", 2, 16000, kA100)});
  ModelSet both = ModelSet::none();
  both.add(kT4);
  both.add(kA100);
  // Tied to both models, which are all the pool has: presses on none.
  const PoolDemand everywhere = PoolDemand::of(profile_of({task(1, 1000, 0, both)}), pool);
  EXPECT_DOUBLE_EQ(everywhere.pressure(kT4).value_or(-1), 0.0);
  EXPECT_DOUBLE_EQ(everywhere.pressure(kA100).value_or(-1), 0.0);
  // All demand tied to A100: 8 GPUs' worth on 2, capped.
  const PoolDemand over =
      PoolDemand::of(profile_of({task(1, 1000, 0, ModelSet::only(kA100))}), pool);
  EXPECT_DOUBLE_EQ(over.pressure(kA100).value_or(-1), 1.0);
  // A model the pool lacks has none.
  const Pool t4_only = single_leaf_pool({model_node("t4", 8, 64000, kT4)});
  const PoolDemand lacking =
      PoolDemand::of(profile_of({task(1, 1000, 0, ModelSet::only(kT4))}), t4_only);
  EXPECT_FALSE(lacking.pressure(kA100).has_value());
  EXPECT_DOUBLE_EQ(lacking.pressure(kT4).value_or(-1), 0.0);
}

// CPU supply: the pool's CPU over what its GPUs ask at the workload's CPU per GPU (tasks without
// a GPU do not count).
TEST(PoolDemandTest, CpuSupplyComparesThePoolsCpuWithWhatItsGpusAsk) {
  const Pool pool = single_leaf_pool({model_node("t4", 8, 64000, kT4)});     // 8 cores per GPU
  const std::vector<TaskShape> half{task(1, 500, 8000), task(0, 0, 32000)};  // 16 per GPU
  EXPECT_DOUBLE_EQ(PoolDemand::of(profile_of(half), pool).cpu_supply(), 0.5);
  const std::vector<TaskShape> double_{task(2, 1000, 8000)};  // 4 per GPU
  EXPECT_DOUBLE_EQ(PoolDemand::of(profile_of(double_), pool).cpu_supply(), 2.0);
}

}  // namespace
}  // namespace tidepool
