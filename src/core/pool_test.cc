#include "core/pool.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA100;
using test_support::kT4;
using test_support::single_leaf_pool;
using test_support::t4_and_a100_catalog;

NodeSpec node_spec(std::string name, int gpus, GpuModelId model = kT4, MilliCpu cpu = 32000,
                   MemoryMib memory = 65536) {
  NodeSpec spec;
  spec.name = std::move(name);
  spec.model = model;
  spec.gpu_count = gpus;
  spec.milli_cpu = cpu;
  spec.memory_mib = memory;
  return spec;
}

Result<Pool> try_pool(std::vector<NodeSpec> nodes) {
  return Pool::create(t4_and_a100_catalog(), Topology::single_leaf(), std::move(nodes));
}

TaskShape pool_task(int gpus, MilliGpu milli, MilliCpu cpu = 1000, MemoryMib memory = 1024,
                    ModelSet models = ModelSet::any()) {
  auto task = make_task_shape(gpus, milli, cpu, memory, models);
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return task.value();
}

// Everything observable about a pool's mutable state, to check that a refused operation changed
// nothing.
struct Snapshot {
  std::vector<MilliCpu> free_cpu;
  std::vector<MemoryMib> free_memory;
  std::vector<std::array<MilliGpu, kMaxGpusPerNode>> free_milli;
  std::vector<int> whole_free_gpus;
  std::vector<MilliGpu> max_free_milli;
  std::vector<std::int32_t> total_free_milli;
  std::vector<std::array<std::uint16_t, kTaskClassCount>> tasks_by_class;
  std::vector<std::uint32_t> versions;
  std::int64_t allocated_milli_gpu = 0;
  MilliCpu allocated_milli_cpu = 0;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

Snapshot snapshot(const Pool& pool) {
  Snapshot s;
  for (int i = 0; i < pool.node_count(); ++i) {
    const NodeId id{static_cast<std::uint32_t>(i)};
    const NodeState& st = pool.state(id);
    s.free_cpu.push_back(st.free_cpu);
    s.free_memory.push_back(st.free_memory);
    s.free_milli.push_back(st.free_milli);
    s.whole_free_gpus.push_back(st.whole_free_gpus);
    s.max_free_milli.push_back(st.max_free_milli);
    s.total_free_milli.push_back(st.total_free_milli);
    s.tasks_by_class.push_back(st.tasks_by_class);
    s.versions.push_back(pool.version(id));
  }
  s.allocated_milli_gpu = pool.allocated_milli_gpu();
  s.allocated_milli_cpu = pool.allocated_milli_cpu();
  return s;
}

// --- create ---------------------------------------------------------------------------------

TEST(PoolCreateTest, BuildsAnEmptyPool) {
  Pool pool = single_leaf_pool({node_spec("a", 8, kT4, 64000, 262144),
                                node_spec("b", 4, kA100, 32000), node_spec("cpu", 0, kT4, 96000)});
  EXPECT_EQ(pool.node_count(), 3);
  EXPECT_EQ(pool.total_gpus(), 12);
  EXPECT_EQ(pool.capacity_milli_gpu(), 12000);
  EXPECT_EQ(pool.capacity_milli_cpu(), 192000);
  EXPECT_EQ(pool.allocated_milli_gpu(), 0);
  EXPECT_EQ(pool.allocated_milli_cpu(), 0);
  EXPECT_EQ(pool.models().size(), 2);
  EXPECT_EQ(pool.topology().leaves.size(), 1U);

  const NodeState& a = pool.state(NodeId{0});
  EXPECT_EQ(a.free_cpu, 64000);
  EXPECT_EQ(a.free_memory, 262144);
  EXPECT_EQ(a.whole_free_gpus, 8);
  EXPECT_EQ(a.max_free_milli, 1000);
  EXPECT_EQ(a.total_free_milli, 8000);
  EXPECT_EQ(a.free_milli[7], 1000);
  EXPECT_EQ(a.free_milli[8], 0);  // slots past gpu_count stay 0
  EXPECT_EQ(a.running_tasks(), 0);

  const NodeState& cpu = pool.state(NodeId{2});
  EXPECT_EQ(cpu.whole_free_gpus, 0);
  EXPECT_EQ(cpu.total_free_milli, 0);

  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(pool.version(NodeId{i}), 0U);
    EXPECT_EQ(pool.tie_rank(NodeId{i}), i);
  }
  EXPECT_EQ(pool.spec(NodeId{1}).name, "b");
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolCreateTest, AcceptsAnEmptyNodeList) {
  auto pool = try_pool({});
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(pool->node_count(), 0);
  EXPECT_EQ(pool->total_gpus(), 0);
}

TEST(PoolCreateTest, RejectsDuplicateNames) {
  auto pool = try_pool({node_spec("a", 1), node_spec("b", 1), node_spec("a", 2)});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().field, "node 2 ('a')");
  EXPECT_NE(pool.error().reason.find("twice"), std::string::npos) << pool.error().reason;
}

TEST(PoolCreateTest, RejectsAnEmptyName) {
  auto pool = try_pool({node_spec("", 1)});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().field, "node 0 ('')");
}

TEST(PoolCreateTest, RejectsGpuCountsOutOfRange) {
  auto negative = try_pool({node_spec("a", -1)});
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.error().reason.find("-1"), std::string::npos);

  auto too_many = try_pool({node_spec("a", 4), node_spec("b", kMaxGpusPerNode + 1)});
  ASSERT_FALSE(too_many.has_value());
  EXPECT_EQ(too_many.error().field, "node 1 ('b')");
  EXPECT_NE(too_many.error().reason.find("17"), std::string::npos);

  EXPECT_TRUE(try_pool({node_spec("a", kMaxGpusPerNode)}).has_value());
}

TEST(PoolCreateTest, RejectsAModelOutsideTheCatalogOnlyForGpuNodes) {
  EXPECT_FALSE(try_pool({node_spec("a", 2, GpuModelId{2})}).has_value());
  // A node without GPUs has no model to check.
  EXPECT_TRUE(try_pool({node_spec("a", 0, GpuModelId{9})}).has_value());
}

TEST(PoolCreateTest, RejectsNegativeCpuOrMemory) {
  EXPECT_FALSE(try_pool({node_spec("a", 1, kT4, -1, 100)}).has_value());
  EXPECT_FALSE(try_pool({node_spec("a", 1, kT4, 100, -1)}).has_value());
}

TEST(PoolCreateTest, RejectsAnUnknownLeaf) {
  NodeSpec spec = node_spec("a", 2);
  spec.leaf = LeafId{1};  // the single-leaf topology has leaf 0 only
  auto pool = try_pool({spec});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().field, "node 0 ('a')");
  EXPECT_NE(pool.error().reason.find("leaf"), std::string::npos);
}

TEST(PoolCreateTest, RejectsALeafWithAnUnknownSpine) {
  Topology topology = Topology::single_leaf();
  topology.leaves.push_back({"leaf-1", SpineId{5}});
  auto pool = Pool::create(t4_and_a100_catalog(), topology, {node_spec("a", 1)});
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().field, "leaf 'leaf-1'");
}

TEST(PoolCreateTest, AcceptsDenselyNumberedNvlinkDomains) {
  NodeSpec spec = node_spec("a", 4);
  spec.nvlink_domain = {0, 0, 1, 1};
  EXPECT_TRUE(try_pool({spec}).has_value());
  spec.nvlink_domain = {1, 0, 1, 0};  // order does not matter
  EXPECT_TRUE(try_pool({spec}).has_value());
  // Entries past gpu_count are not read.
  spec.nvlink_domain = {0, 0, 0, 0, 9};
  EXPECT_TRUE(try_pool({spec}).has_value());
}

TEST(PoolCreateTest, RejectsGappedNvlinkDomains) {
  NodeSpec gap = node_spec("a", 4);
  gap.nvlink_domain = {0, 0, 2, 2};
  auto pool = try_pool({gap});
  ASSERT_FALSE(pool.has_value());
  EXPECT_NE(pool.error().reason.find("NVLink"), std::string::npos);

  NodeSpec no_zero = node_spec("a", 2);
  no_zero.nvlink_domain = {1, 1};
  EXPECT_FALSE(try_pool({no_zero}).has_value());
}

TEST(PoolCreateTest, RejectsNvlinkDomainsBeyondTheGpuCount) {
  // With at most 16 GPUs, a domain number of 16 or more always leaves a gap.
  for (std::uint8_t domain : {std::uint8_t{1}, std::uint8_t{16}, std::uint8_t{30}}) {
    NodeSpec spec = node_spec("a", 2);
    spec.nvlink_domain = {0, domain};
    EXPECT_EQ(try_pool({spec}).has_value(), domain == 1) << int{domain};
  }
}

TEST(PoolCreateTest, RejectsNvlinkDomainsOf31AndMore) {
  for (std::uint8_t domain : {std::uint8_t{31}, std::uint8_t{32}, std::uint8_t{255}}) {
    NodeSpec spec = node_spec("a", 2);
    spec.nvlink_domain = {0, domain};
    EXPECT_FALSE(try_pool({spec}).has_value()) << int{domain};
  }
}

// --- allocate / release -----------------------------------------------------------------------

TEST(PoolAllocateTest, WholeGpusTakeCpuMemoryAndGpus) {
  Pool pool = single_leaf_pool({node_spec("a", 4, kT4, 32000, 65536), node_spec("b", 4)});
  const TaskShape task = pool_task(2, 1000, 8000, 16384);
  ASSERT_TRUE(pool.allocate(task, {NodeId{0}, 0b0101}).has_value());

  const NodeState& s = pool.state(NodeId{0});
  EXPECT_EQ(s.free_cpu, 24000);
  EXPECT_EQ(s.free_memory, 49152);
  EXPECT_EQ(s.free_milli[0], 0);
  EXPECT_EQ(s.free_milli[1], 1000);
  EXPECT_EQ(s.free_milli[2], 0);
  EXPECT_EQ(s.free_milli[3], 1000);
  EXPECT_EQ(s.whole_free_gpus, 2);
  EXPECT_EQ(s.total_free_milli, 2000);
  EXPECT_EQ(s.tasks_by_class[task_class(task)], 1);
  EXPECT_EQ(s.running_tasks(), 1);
  EXPECT_EQ(pool.allocated_milli_gpu(), 2000);
  EXPECT_EQ(pool.allocated_milli_cpu(), 8000);
  EXPECT_EQ(pool.version(NodeId{0}), 1U);
  EXPECT_EQ(pool.version(NodeId{1}), 0U);
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolAllocateTest, FractionsShareAGpu) {
  Pool pool = single_leaf_pool({node_spec("a", 2)});
  const TaskShape small = pool_task(1, 300);
  const TaskShape big = pool_task(1, 700);
  ASSERT_TRUE(pool.allocate(small, {NodeId{0}, 0b10}).has_value());
  ASSERT_TRUE(pool.allocate(big, {NodeId{0}, 0b10}).has_value());
  const NodeState& s = pool.state(NodeId{0});
  EXPECT_EQ(s.free_milli[0], 1000);
  EXPECT_EQ(s.free_milli[1], 0);
  EXPECT_EQ(s.whole_free_gpus, 1);
  EXPECT_EQ(s.max_free_milli, 1000);
  EXPECT_EQ(s.tasks_by_class[kFractionalClass], 2);
  EXPECT_EQ(pool.allocated_milli_gpu(), 1000);

  // The GPU is now full: one more milli-GPU does not fit on it.
  auto refused = pool.allocate(pool_task(1, 1), {NodeId{0}, 0b10});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "gpus");
}

TEST(PoolAllocateTest, CpuOnlyTaskIgnoresTheModelAndTakesNoGpu) {
  Pool pool = single_leaf_pool({node_spec("a", 2, kA100)});
  const TaskShape task = pool_task(0, 0, 4000, 100, ModelSet::only(kT4));
  ASSERT_TRUE(pool.allocate(task, {NodeId{0}, 0}).has_value());
  EXPECT_EQ(pool.state(NodeId{0}).free_cpu, 28000);
  EXPECT_EQ(pool.state(NodeId{0}).total_free_milli, 2000);
  EXPECT_EQ(pool.state(NodeId{0}).tasks_by_class[kCpuOnlyClass], 1);
  EXPECT_EQ(pool.allocated_milli_gpu(), 0);
  EXPECT_EQ(pool.allocated_milli_cpu(), 4000);
}

TEST(PoolAllocateTest, CanFillANodeExactly) {
  Pool pool = single_leaf_pool({node_spec("a", 2, kT4, 2000, 2048)});
  ASSERT_TRUE(pool.allocate(pool_task(2, 1000, 2000, 2048), {NodeId{0}, 0b11}).has_value());
  const NodeState& s = pool.state(NodeId{0});
  EXPECT_EQ(s.free_cpu, 0);
  EXPECT_EQ(s.free_memory, 0);
  EXPECT_EQ(s.total_free_milli, 0);
  EXPECT_EQ(s.max_free_milli, 0);
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolAllocateTest, ReleaseRestoresTheEmptyNode) {
  Pool pool = single_leaf_pool({node_spec("a", 4), node_spec("b", 2)});
  const Snapshot empty = snapshot(pool);
  const TaskShape whole = pool_task(3, 1000, 6000, 4096);
  const TaskShape fraction = pool_task(1, 400, 500, 10);
  ASSERT_TRUE(pool.allocate(whole, {NodeId{0}, 0b1110}).has_value());
  ASSERT_TRUE(pool.allocate(fraction, {NodeId{0}, 0b0001}).has_value());
  ASSERT_TRUE(pool.release(whole, {NodeId{0}, 0b1110}).has_value());
  ASSERT_TRUE(pool.release(fraction, {NodeId{0}, 0b0001}).has_value());

  Snapshot after = snapshot(pool);
  EXPECT_EQ(after.versions[0], 4U);  // one bump per change
  EXPECT_EQ(after.versions[1], 0U);
  after.versions = empty.versions;
  EXPECT_EQ(after, empty);
  EXPECT_TRUE(pool.check_invariants().has_value());
}

struct RefusedAllocation {
  const char* what;
  TaskShape task;
  Assignment where;
  const char* field;
};

TEST(PoolAllocateTest, RefusesAndChangesNothing) {
  // Node a: 4 T4, 8 cores, 8 GiB, with GPU 0 shared by a 600m task. Node b: 2 A100.
  Pool pool = single_leaf_pool({node_spec("a", 4, kT4, 8000, 8192), node_spec("b", 2, kA100)});
  ASSERT_TRUE(pool.allocate(pool_task(1, 600, 1000, 1024), {NodeId{0}, 0b0001}).has_value());
  const Snapshot before = snapshot(pool);

  const RefusedAllocation cases[] = {
      {"cpu lacking", pool_task(1, 1000, 7001, 0), {NodeId{0}, 0b0010}, "cpu"},
      {"memory lacking", pool_task(1, 1000, 0, 7169), {NodeId{0}, 0b0010}, "memory"},
      {"share lacking", pool_task(1, 401, 0, 0), {NodeId{0}, 0b0001}, "gpus"},
      {"whole GPU on a shared GPU", pool_task(2, 1000, 0, 0), {NodeId{0}, 0b0011}, "gpus"},
      {"wrong model",
       pool_task(1, 1000, 0, 0, ModelSet::only(kA100)),
       {NodeId{0}, 0b0010},
       "gpu model"},
      {"too few GPUs given", pool_task(2, 1000, 0, 0), {NodeId{0}, 0b0010}, "gpus"},
      {"too many GPUs given", pool_task(1, 1000, 0, 0), {NodeId{0}, 0b0110}, "gpus"},
      {"GPUs for a CPU-only task", pool_task(0, 0, 100, 0), {NodeId{0}, 0b0010}, "gpus"},
      {"GPU index out of range", pool_task(1, 1000, 0, 0), {NodeId{0}, 0b10000}, "gpus"},
      {"GPU index out of range on b", pool_task(1, 500, 0, 0), {NodeId{1}, 0b100}, "gpus"},
      {"unknown node", pool_task(1, 1000, 0, 0), {NodeId{2}, 0b0001}, "node"},
  };
  for (const RefusedAllocation& c : cases) {
    auto result = pool.allocate(c.task, c.where);
    ASSERT_FALSE(result.has_value()) << c.what;
    EXPECT_EQ(result.error().field, c.field) << c.what << ": " << result.error().message();
    EXPECT_FALSE(result.error().reason.empty()) << c.what;
    EXPECT_TRUE(snapshot(pool) == before) << c.what;
  }
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolAllocateTest, RefusalsNameTheShortfall) {
  Pool pool = single_leaf_pool({node_spec("a", 1, kT4, 8000, 8192)});
  auto cpu = pool.allocate(pool_task(0, 0, 9000, 0), {NodeId{0}, 0});
  ASSERT_FALSE(cpu.has_value());
  EXPECT_NE(cpu.error().reason.find("8000m"), std::string::npos) << cpu.error().reason;
  EXPECT_NE(cpu.error().reason.find("9000m"), std::string::npos) << cpu.error().reason;
  auto model = pool.allocate(pool_task(1, 1000, 0, 0, ModelSet::only(kA100)), {NodeId{0}, 1});
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.error().reason.find("T4"), std::string::npos) << model.error().reason;
}

TEST(PoolAllocateTest, RefusesGpusBeyondTheNodeOnAFullSizeNode) {
  // A node with kMaxGpusPerNode GPUs: bits 16..31 of the GpuSet name no GPU and must be refused
  // like any other index out of range.
  Pool pool = single_leaf_pool({node_spec("a", kMaxGpusPerNode)});
  const Snapshot before = snapshot(pool);
  auto result = pool.allocate(pool_task(1, 1000, 0, 0), {NodeId{0}, GpuSet{1} << 20});
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().field, "gpus");
  EXPECT_TRUE(snapshot(pool) == before);
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolAllocateTest, AcceptsTheHighestGpuOfAFullSizeNode) {
  Pool pool = single_leaf_pool({node_spec("a", kMaxGpusPerNode)});
  ASSERT_TRUE(
      pool.allocate(pool_task(1, 1000, 0, 0), {NodeId{0}, GpuSet{1} << (kMaxGpusPerNode - 1)}));
  EXPECT_EQ(pool.state(NodeId{0}).free_milli[kMaxGpusPerNode - 1], 0);
  EXPECT_TRUE(pool.check_invariants().has_value());
}

TEST(PoolReleaseTest, RefusesATaskThatIsNotThere) {
  Pool pool = single_leaf_pool({node_spec("a", 4), node_spec("b", 2)});
  const TaskShape two = pool_task(2, 1000, 2000, 2048);
  ASSERT_TRUE(pool.allocate(two, {NodeId{0}, 0b0011}).has_value());
  const TaskShape fraction = pool_task(1, 500, 100, 0);
  ASSERT_TRUE(pool.allocate(fraction, {NodeId{0}, 0b0100}).has_value());
  const Snapshot before = snapshot(pool);

  struct Case {
    const char* what;
    TaskShape task;
    Assignment where;
  };
  const Case cases[] = {
      {"empty node", pool_task(1, 1000, 0, 0), {NodeId{1}, 0b01}},
      {"free GPUs", two, {NodeId{0}, 0b1000 | 0b0010}},
      {"right GPUs, class not running", pool_task(1, 1000, 0, 0), {NodeId{0}, 0b0001}},
      {"more CPU than allocated", pool_task(2, 1000, 40000, 0), {NodeId{0}, 0b0011}},
      {"more memory than allocated", pool_task(2, 1000, 0, 70000), {NodeId{0}, 0b0011}},
      {"more share than held", pool_task(1, 600, 0, 0), {NodeId{0}, 0b0100}},
      {"fraction on a free GPU", fraction, {NodeId{0}, 0b1000}},
  };
  for (const Case& c : cases) {
    auto result = pool.release(c.task, c.where);
    ASSERT_FALSE(result.has_value()) << c.what;
    EXPECT_EQ(result.error().field, "release") << c.what << ": " << result.error().message();
    EXPECT_TRUE(snapshot(pool) == before) << c.what;
  }
  EXPECT_TRUE(pool.check_invariants().has_value());

  // The real tasks still release.
  EXPECT_TRUE(pool.release(two, {NodeId{0}, 0b0011}).has_value());
  EXPECT_TRUE(pool.release(fraction, {NodeId{0}, 0b0100}).has_value());
  EXPECT_EQ(pool.allocated_milli_gpu(), 0);
}

TEST(PoolReleaseTest, ValidatesTheAssignmentLikeAllocate) {
  Pool pool = single_leaf_pool({node_spec("a", 2, kT4)});
  const TaskShape task = pool_task(1, 1000, 0, 0);
  ASSERT_TRUE(pool.allocate(task, {NodeId{0}, 0b01}).has_value());
  const Snapshot before = snapshot(pool);

  auto unknown = pool.release(task, {NodeId{7}, 0b01});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "node");
  auto size = pool.release(task, {NodeId{0}, 0b11});
  ASSERT_FALSE(size.has_value());
  EXPECT_EQ(size.error().field, "gpus");
  auto model = pool.release(pool_task(1, 1000, 0, 0, ModelSet::only(kA100)), {NodeId{0}, 0b01});
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.error().field, "gpu model");
  EXPECT_TRUE(snapshot(pool) == before);
}

TEST(PoolReleaseTest, ReleasingTwiceFails) {
  Pool pool = single_leaf_pool({node_spec("a", 1)});
  const TaskShape task = pool_task(1, 1000);
  ASSERT_TRUE(pool.allocate(task, {NodeId{0}, 1}).has_value());
  ASSERT_TRUE(pool.release(task, {NodeId{0}, 1}).has_value());
  const Snapshot before = snapshot(pool);
  EXPECT_FALSE(pool.release(task, {NodeId{0}, 1}).has_value());
  EXPECT_TRUE(snapshot(pool) == before);
}

TEST(PoolVersionTest, BumpsOnEveryChangeOfTheNodeOnly) {
  Pool pool = single_leaf_pool({node_spec("a", 2), node_spec("b", 2)});
  const TaskShape task = pool_task(1, 500);
  ASSERT_TRUE(pool.allocate(task, {NodeId{1}, 0b01}).has_value());
  ASSERT_TRUE(pool.allocate(task, {NodeId{1}, 0b01}).has_value());
  EXPECT_EQ(pool.version(NodeId{1}), 2U);
  // GPU 0 is full now: the refused allocation does not bump.
  ASSERT_FALSE(pool.allocate(task, {NodeId{1}, 0b01}).has_value());
  EXPECT_EQ(pool.version(NodeId{1}), 2U);
  ASSERT_TRUE(pool.release(task, {NodeId{1}, 0b01}).has_value());
  EXPECT_EQ(pool.version(NodeId{1}), 3U);
  // Neither does a refused release.
  ASSERT_FALSE(pool.release(task, {NodeId{1}, 0b10}).has_value());
  EXPECT_EQ(pool.version(NodeId{1}), 3U);
  EXPECT_EQ(pool.version(NodeId{0}), 0U);
}

// --- tie order ---------------------------------------------------------------------------------

TEST(PoolTieOrderTest, SetsRanksFromTheOrder) {
  Pool pool = single_leaf_pool({node_spec("a", 1), node_spec("b", 1), node_spec("c", 1)});
  const NodeId order[] = {NodeId{2}, NodeId{0}, NodeId{1}};
  ASSERT_TRUE(pool.set_tie_order(order).has_value());
  EXPECT_EQ(pool.tie_rank(NodeId{2}), 0U);
  EXPECT_EQ(pool.tie_rank(NodeId{0}), 1U);
  EXPECT_EQ(pool.tie_rank(NodeId{1}), 2U);
}

TEST(PoolTieOrderTest, RejectsBadOrdersAndKeepsTheOldOne) {
  Pool pool = single_leaf_pool({node_spec("a", 1), node_spec("b", 1), node_spec("c", 1)});
  const NodeId reversed[] = {NodeId{2}, NodeId{1}, NodeId{0}};
  ASSERT_TRUE(pool.set_tie_order(reversed).has_value());

  const NodeId too_short[] = {NodeId{0}, NodeId{1}};
  const NodeId too_long[] = {NodeId{0}, NodeId{1}, NodeId{2}, NodeId{0}};
  const NodeId twice[] = {NodeId{0}, NodeId{1}, NodeId{0}};
  const NodeId unknown[] = {NodeId{0}, NodeId{1}, NodeId{3}};
  for (std::span<const NodeId> bad :
       {std::span<const NodeId>(too_short), std::span<const NodeId>(too_long),
        std::span<const NodeId>(twice), std::span<const NodeId>(unknown)}) {
    auto result = pool.set_tie_order(bad);
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().field, "tie order");
    EXPECT_EQ(pool.tie_rank(NodeId{2}), 0U);
    EXPECT_EQ(pool.tie_rank(NodeId{1}), 1U);
    EXPECT_EQ(pool.tie_rank(NodeId{0}), 2U);
  }
}

// --- explanations ----------------------------------------------------------------------------

TEST(DescribeTaskTest, GpuAndCpuOnlyTasks) {
  GpuModelCatalog catalog = t4_and_a100_catalog();
  EXPECT_EQ(describe(pool_task(2, 1000, 8000, 16384, ModelSet::only(kT4)), catalog),
            "2 GPU x 1000m (T4), 8000m CPU, 16384 MiB");
  EXPECT_EQ(describe(pool_task(1, 250, 500, 0), catalog), "1 GPU x 250m (any), 500m CPU, 0 MiB");
  EXPECT_EQ(describe(pool_task(0, 0, 4000, 512), catalog), "no GPU, 4000m CPU, 512 MiB");
}

TEST(ExplainUnplaceableTest, CountsEachReason) {
  // Five nodes: one of another model, one short of CPU, one short of memory, two short of GPUs
  // (one with 1 whole GPU free, one with 2).
  Pool pool = single_leaf_pool({
      node_spec("other", 8, kA100),
      node_spec("cpu", 8, kT4, 1000, 65536),
      node_spec("mem", 8, kT4, 32000, 100),
      node_spec("gpu1", 1, kT4),
      node_spec("gpu2", 4, kT4),
  });
  ASSERT_TRUE(pool.allocate(pool_task(2, 1000, 0, 0), {NodeId{4}, 0b0011}).has_value());
  const TaskShape task = pool_task(4, 1000, 2000, 1024, ModelSet::only(kT4));
  const std::string text = explain_unplaceable(pool, task);
  EXPECT_EQ(text,
            "no node fits 4 GPU x 1000m (T4), 2000m CPU, 1024 MiB: of 5 nodes, 1 have other GPU "
            "models, 1 lack CPU, 1 lack memory, 2 lack free GPUs (most whole GPUs free on one "
            "node: 2)");
}

TEST(ExplainUnplaceableTest, FractionsReportTheLargestFreeShare) {
  Pool pool = single_leaf_pool({node_spec("a", 2), node_spec("b", 1)});
  ASSERT_TRUE(pool.allocate(pool_task(1, 700, 0, 0), {NodeId{0}, 0b01}).has_value());
  ASSERT_TRUE(pool.allocate(pool_task(1, 900, 0, 0), {NodeId{0}, 0b10}).has_value());
  ASSERT_TRUE(pool.allocate(pool_task(1, 750, 0, 0), {NodeId{1}, 0b1}).has_value());
  const std::string text = explain_unplaceable(pool, pool_task(1, 500, 0, 0));
  EXPECT_NE(text.find("of 2 nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("2 lack free GPUs (largest free share on one GPU: 300m)"), std::string::npos)
      << text;
}

TEST(ExplainUnplaceableTest, CpuOnlyTasksDoNotCountModels) {
  Pool pool = single_leaf_pool({node_spec("a", 1, kA100, 1000), node_spec("b", 0, kT4, 1000)});
  const std::string text = explain_unplaceable(pool, pool_task(0, 0, 2000, 0, ModelSet::only(kT4)));
  EXPECT_NE(text.find("of 2 nodes, 0 have other GPU models, 2 lack CPU, 0 lack memory, 0 lack "
                      "free GPUs"),
            std::string::npos)
      << text;
}

TEST(CountFreeGpusTest, FreeGpusOnPartlyUsedNodesAreFragmentedAndCordonedNodesHaveNone) {
  Pool pool = single_leaf_pool(
      {node_spec("empty", 4), node_spec("half", 4), node_spec("shared", 2), node_spec("off", 8)});
  ASSERT_TRUE(pool.allocate(pool_task(2, 1000), {NodeId{1}, 0b0011}).has_value());
  // A fraction makes its GPU not free: one of the node's two is left, and fragmented.
  ASSERT_TRUE(pool.allocate(pool_task(1, 250), {NodeId{2}, 0b01}).has_value());
  ASSERT_TRUE(pool.set_schedulable(NodeId{3}, false).has_value());
  const FreeGpuCount count = count_free_gpus(pool);
  EXPECT_EQ(count.free, 4 + 2 + 1);
  EXPECT_EQ(count.fragmented, 2 + 1);
}

TEST(PoolCordon, CordonedNodeShowsNothingFreeRefusesTasksAndStillReleases) {
  Pool pool = single_leaf_pool({node_spec("a", 4), node_spec("b", 4)});
  const NodeId a{0};
  const TaskShape two = pool_task(2, 1000);
  ASSERT_TRUE(pool.allocate(two, {a, 0b0011}).has_value());
  ASSERT_TRUE(pool.set_schedulable(a, false).has_value());
  EXPECT_FALSE(pool.schedulable(a));
  EXPECT_EQ(pool.state(a).whole_free_gpus, 0);
  EXPECT_EQ(pool.state(a).free_cpu, 0);
  EXPECT_EQ(pool.state(a).tasks_by_class[task_class(two)], 1);
  auto refused = pool.allocate(two, {a, 0b1100});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "node");
  ASSERT_TRUE(pool.release(two, {a, 0b0011}).has_value());
  EXPECT_EQ(pool.state(a).whole_free_gpus, 0);
  EXPECT_EQ(pool.state(a).tasks_by_class[task_class(two)], 0);
  EXPECT_EQ(pool.allocated_milli_gpu(), 0);
  EXPECT_TRUE(pool.check_invariants().has_value());
  ASSERT_TRUE(pool.set_schedulable(a, true).has_value());
  EXPECT_EQ(pool.state(a).whole_free_gpus, 4);
  EXPECT_EQ(pool.state(a).free_cpu, 32000);
  EXPECT_TRUE(pool.check_invariants().has_value());
  EXPECT_FALSE(pool.set_schedulable(NodeId{9}, false).has_value());
}

TEST(PoolCordon, ReleasingTwiceOnACordonedNodeIsRefused) {
  Pool pool = single_leaf_pool({node_spec("a", 4)});
  const NodeId a{0};
  const TaskShape one = pool_task(1, 1000);
  ASSERT_TRUE(pool.allocate(one, {a, 0b0001}).has_value());
  ASSERT_TRUE(pool.set_schedulable(a, false).has_value());
  ASSERT_TRUE(pool.release(one, {a, 0b0001}).has_value());
  EXPECT_FALSE(pool.release(one, {a, 0b0001}).has_value());
  EXPECT_TRUE(pool.check_invariants().has_value());
}

}  // namespace
}  // namespace tidepool
