#include "core/policies/score_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/policies/fragmentation_delta.h"
#include "core/policies/policy_factories.h"
#include "core/rng.h"
#include "core/test_pool.h"
#include "core/test_random.h"

namespace tidepool {
namespace {

using test_support::draw;

TaskShape shape(int gpus, MilliGpu milli, MilliCpu cpu, ModelSet models = ModelSet::any(),
                MemoryMib memory = 1024) {
  auto task = make_task_shape(gpus, milli, cpu, memory, models);
  EXPECT_TRUE(task.has_value()) << task.error().message();
  return *task;
}

// A random pool: 20-120 nodes of 2, 4 or 8 GPUs (T4 or A100), 16-96 cores, 16-128 GiB of memory
// (so that memory, which FGD's and Tidepool's scores do not read, decides where some tasks fit).
Pool random_pool(Rng& rng) {
  std::vector<NodeSpec> nodes;
  const int count = draw(rng, 20, 120);
  for (int i = 0; i < count; ++i) {
    NodeSpec node;
    node.name = "n" + std::to_string(i);
    node.model = rng.below(2) == 0 ? test_support::kT4 : test_support::kA100;
    node.gpu_count = std::array{2, 4, 8}[rng.below(3)];
    node.milli_cpu = 1000 * draw(rng, 16, 96);
    node.memory_mib = 1024 * draw(rng, 16, 128);
    nodes.push_back(node);
  }
  return test_support::single_leaf_pool(std::move(nodes));
}

// The workload's shapes: CPU-only, fractions, one GPU, several GPUs, some tied to a model, with
// 1-48 GiB of memory; some differ from another only in memory (the index shares one order
// between those).
std::vector<TaskShape> random_shapes(Rng& rng) {
  std::vector<TaskShape> shapes;
  ModelSet a100_only = ModelSet::none();
  a100_only.add(test_support::kA100);
  const auto memory = [&] { return 1024 * draw(rng, 1, 48); };
  shapes.push_back(shape(0, 0, 4000, ModelSet::any(), memory()));
  for (int i = 0; i < 6; ++i) {
    const int kind = static_cast<int>(rng.below(4));
    const MilliCpu cpu = 1000 * draw(rng, 1, 24);
    if (kind == 0)
      shapes.push_back(shape(1, 100 * draw(rng, 1, 9), cpu, ModelSet::any(), memory()));
    if (kind == 1) shapes.push_back(shape(1, 1000, cpu, ModelSet::any(), memory()));
    if (kind == 2) {
      shapes.push_back(
          shape(std::array{2, 4, 8}[rng.below(3)], 1000, cpu, ModelSet::any(), memory()));
    }
    if (kind == 3) shapes.push_back(shape(1, 1000, cpu, a100_only, memory()));
    if (rng.below(2) == 0) {
      TaskShape other = shapes.back();
      other.memory_mib = memory();
      shapes.push_back(other);
    }
  }
  return shapes;
}

// The property: on random pools and random sequences of placements (by the policy itself),
// releases, cordons and a new tie order, a policy that looks its nodes up in the index chooses
// exactly what the same policy scanning every node chooses (the same node and GPUs, or neither),
// at every step, for FGD and Tidepool; and a copy of the pool (which the index does not follow)
// is answered as the scan answers it.
TEST(ScoreIndexProperty, TheIndexChoosesWhatTheScanChooses) {
  int decisions = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    Pool pool = random_pool(rng);
    const std::vector<TaskShape> shapes = random_shapes(rng);
    std::vector<TaskShape> sample;
    for (int i = 0; i < 100; ++i) sample.push_back(shapes[rng.below(shapes.size())]);
    const WorkloadProfile profile = WorkloadProfile::from_tasks(sample, 100);
    for (const bool tidepool : {false, true}) {
      const auto make = [&](ScoreLookup lookup) {
        return tidepool ? make_tidepool_policy(profile, lookup) : make_fgd_policy(profile, lookup);
      };
      const std::unique_ptr<PlacementPolicy> indexed = make(ScoreLookup::kIndex);
      const std::unique_ptr<PlacementPolicy> scanning = make(ScoreLookup::kScan);
      Pool here = pool;
      std::vector<std::pair<TaskShape, Assignment>> running;
      Rng steps(seed * 31 + (tidepool ? 1 : 0));
      for (int step = 0; step < 300; ++step) {
        const std::uint64_t what = steps.below(20);
        if (what < 5 && !running.empty()) {
          const std::size_t k = steps.below(running.size());
          ASSERT_TRUE(here.release(running[k].first, running[k].second).has_value());
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
          continue;
        }
        if (what == 5) {
          const NodeId node{static_cast<std::uint32_t>(steps.below(here.node_count()))};
          ASSERT_TRUE(here.set_schedulable(node, !here.schedulable(node)).has_value());
          continue;
        }
        if (what == 6 && step % 50 == 6) {
          std::vector<NodeId> order;
          for (int n = 0; n < here.node_count(); ++n)
            order.push_back(NodeId{static_cast<std::uint32_t>(n)});
          for (std::size_t i = order.size(); i > 1; --i)
            std::swap(order[i - 1], order[steps.below(i)]);
          ASSERT_TRUE(here.set_tie_order(order).has_value());
          continue;
        }
        const TaskShape& task = shapes[steps.below(shapes.size())];
        Rng unused(1);
        const PlacementResult a = indexed->place(here, task, unused);
        const PlacementResult b = scanning->place(here, task, unused);
        ++decisions;
        ASSERT_EQ(a.has_value(), b.has_value()) << "seed " << seed << " step " << step;
        if (!a) continue;
        ASSERT_EQ(*a, *b) << "seed " << seed << " step " << step
                          << (tidepool ? " tidepool" : " fgd");
        if (what == 7) {
          // A copy that changes apart: the index does not follow it, and answers as the scan.
          Pool copy = here;
          ASSERT_TRUE(copy.allocate(task, *a).has_value());
          const PlacementResult c = indexed->place(copy, task, unused);
          const PlacementResult d = scanning->place(copy, task, unused);
          ASSERT_EQ(c.has_value(), d.has_value());
          if (c) {
            EXPECT_EQ(*c, *d);
          }
        }
        ASSERT_TRUE(here.allocate(task, *a).has_value());
        running.emplace_back(task, *a);
      }
    }
  }
  EXPECT_GT(decisions, 10'000);
}

TEST(ScoreIndexTest, FollowsOnePoolAtATimeAndAnswersNotIndexedForOthers) {
  Pool pool = test_support::single_leaf_pool({NodeSpec{.name = "a",
                                                       .model = test_support::kT4,
                                                       .gpu_count = 2,
                                                       .milli_cpu = 8000,
                                                       .memory_mib = 1024,
                                                       .leaf = LeafId{0}}});
  NodeScoreIndex index;
  const TaskShape task = shape(1, 1000, 0);
  const auto evaluate = [](NodeId) { return ScoredChoice{7, 0b1}; };
  const auto first = index.best(pool, task, evaluate);
  EXPECT_TRUE(first.indexed);
  ASSERT_TRUE(first.best.has_value());
  EXPECT_EQ(first.best->first, NodeId{0});
  const Pool copy = pool;
  EXPECT_FALSE(index.best(copy, task, evaluate).indexed);
  // The followed pool gone, the next one asked about is followed.
  {
    Pool moved = std::move(pool);
    EXPECT_TRUE(index.best(moved, task, evaluate).indexed);  // a move keeps the identity
  }
  EXPECT_TRUE(index.best(copy, task, evaluate).indexed);
  // Past max_shapes shapes, a new shape is not indexed.
  EXPECT_EQ(NodeScoreIndex::max_shapes(1), 256U);
  EXPECT_EQ(NodeScoreIndex::max_shapes(10'000), 256U);
  EXPECT_EQ(NodeScoreIndex::max_shapes(100'000), 41U);
  EXPECT_EQ(NodeScoreIndex::max_shapes(1'000'000), 4U);
  for (int cpu = 1; cpu <= static_cast<int>(NodeScoreIndex::max_shapes(1)); ++cpu) {
    (void)index.best(copy, shape(1, 1000, cpu), evaluate);
  }
  EXPECT_FALSE(index.best(copy, shape(1, 1000, 5000), evaluate).indexed);
  EXPECT_TRUE(index.best(copy, task, evaluate).indexed);
}

// fragmentation_growth against its definition (the fragmentation after minus before), on random
// nodes, GPU choices and profiles of up to 14 distinct per-GPU shares (more than it keeps counted).
TEST(FragmentationGrowthTest, IsTheFragmentationAfterMinusBefore) {
  Rng rng(5);
  ModelSet a100_only = ModelSet::none();
  a100_only.add(test_support::kA100);
  for (int round = 0; round < 300; ++round) {
    std::vector<TaskShape> sample;
    const int shares = draw(rng, 1, 14);
    for (int i = 0; i < 200; ++i) {
      const int kind = static_cast<int>(rng.below(4));
      const MilliCpu cpu = 1000 * draw(rng, 0, 16);
      if (kind == 0) sample.push_back(shape(0, 0, cpu));
      if (kind == 1) sample.push_back(shape(1, 1000 - 50 * draw(rng, 1, shares), cpu));
      if (kind == 2) sample.push_back(shape(draw(rng, 1, 4), 1000, cpu));
      if (kind == 3) sample.push_back(shape(1, 1000 - 50 * draw(rng, 0, shares), cpu, a100_only));
    }
    const WorkloadProfile profile = WorkloadProfile::from_tasks(sample, 100);
    NodeSpec spec{.name = "n",
                  .model = rng.below(2) == 0 ? test_support::kT4 : test_support::kA100,
                  .gpu_count = draw(rng, 1, 8),
                  .milli_cpu = 32000,
                  .memory_mib = 1 << 20,
                  .leaf = LeafId{0}};
    NodeState state = empty_state(spec);
    state.free_cpu = 1000 * draw(rng, 0, 32);
    for (int g = 0; g < spec.gpu_count; ++g) {
      state.free_milli[g] = rng.below(3) == 0 ? 1000 : 50 * draw(rng, 0, 20);
    }
    refresh_summary(state, spec.gpu_count);
    for (const TaskShape& task :
         {shape(0, 0, 2000), shape(1, 1000 - 50 * draw(rng, 1, shares), 3000), shape(1, 1000, 1000),
          shape(2, 1000, 4000)}) {
      if (!fits(spec, state, task)) continue;
      std::vector<MilliGpu> visited;
      for_each_gpu_choice(spec, state, task, [&](GpuSet gpus) {
        NodeState after = state;
        subtract_task(after, task, gpus);
        EXPECT_EQ(fragmentation_growth(spec, state, task, gpus, profile),
                  scaled_node_fragmentation(spec, after, profile) -
                      scaled_node_fragmentation(spec, state, profile))
            << "round " << round;
        if (task.is_fractional()) {
          // One GPU per distinct free share.
          const MilliGpu free = state.free_milli[std::countr_zero(gpus)];
          EXPECT_EQ(std::count(visited.begin(), visited.end(), free), 0);
          visited.push_back(free);
        }
      });
      if (task.is_fractional()) {
        std::set<MilliGpu> distinct;
        for (int g = 0; g < spec.gpu_count; ++g) {
          if (state.free_milli[g] >= task.milli_per_gpu) distinct.insert(state.free_milli[g]);
        }
        EXPECT_EQ(visited.size(), distinct.size());
      }
    }
  }
}

// The order's bit sets against std::set: random inserts and erases over sizes with one to three
// summary levels, and next() from every kind of place.
TEST(RankSetTest, AgreesWithAnOrderedSet) {
  Rng rng(3);
  for (const std::uint32_t size : {1U, 63U, 64U, 65U, 4095U, 4097U, 300'000U}) {
    RankSet ranks(size);
    std::set<std::uint32_t> model;
    for (int step = 0; step < 4000; ++step) {
      const auto rank = static_cast<std::uint32_t>(rng.below(size));
      if (rng.below(3) == 0 && !model.empty()) {
        const auto it = model.lower_bound(rank);
        const std::uint32_t gone = it == model.end() ? *model.begin() : *it;
        ranks.erase(gone);
        model.erase(gone);
      } else {
        ranks.insert(rank);
        model.insert(rank);
      }
      const auto from = static_cast<std::uint32_t>(rng.below(size + 2));
      const auto it = model.lower_bound(from);
      ASSERT_EQ(ranks.next(from), it == model.end() ? RankSet::kNone : *it)
          << "size " << size << " step " << step;
      ASSERT_EQ(ranks.next(0), model.empty() ? RankSet::kNone : *model.begin());
    }
  }
}

// Scores of many values: an empty bucket takes a new score, and a shape whose nodes need more than
// kMaxScores scores at once is answered "not indexed" (the caller scans), not wrongly.
TEST(ScoreIndexTest, ScoresBeyondTheBucketsAreNotIndexed) {
  std::vector<NodeSpec> specs;
  for (int i = 0; i < 300; ++i) {
    specs.push_back(NodeSpec{.name = "n" + std::to_string(i),
                             .model = test_support::kT4,
                             .gpu_count = 2,
                             .milli_cpu = 64000,
                             .memory_mib = 1 << 20,
                             .leaf = LeafId{0}});
  }
  Pool pool = test_support::single_leaf_pool(std::move(specs));
  NodeScoreIndex index;
  const TaskShape task = shape(1, 1000, 1000);
  std::int64_t round = 0;
  // Each round gives the nodes 100 scores of its own, the highest to nodes 99, 199 and 299.
  const auto evaluate = [&](NodeId n) {
    return ScoredChoice{round * 1000 + static_cast<std::int64_t>(n.value % 100), 0b1};
  };
  const auto touch_all = [&] {
    for (std::uint32_t n = 0; n < 300; ++n) {
      ASSERT_TRUE(pool.set_schedulable(NodeId{n}, false).has_value());
      ASSERT_TRUE(pool.set_schedulable(NodeId{n}, true).has_value());
    }
  };
  auto answer = index.best(pool, task, evaluate);
  ASSERT_TRUE(answer.indexed);
  ASSERT_TRUE(answer.best.has_value());
  EXPECT_EQ(answer.best->first, NodeId{99});
  EXPECT_EQ(answer.best->second.score, 99);
  // Rescored with 100 new values twice: 300 values in all, the buckets emptied take the last.
  for (round = 1; round <= 2; ++round) {
    touch_all();
    answer = index.best(pool, task, evaluate);
    ASSERT_TRUE(answer.indexed);
    ASSERT_TRUE(answer.best.has_value());
    EXPECT_EQ(answer.best->first, NodeId{99});
    EXPECT_EQ(answer.best->second.score, round * 1000 + 99);
  }
  // 300 values at once: more than kMaxScores.
  const auto many = [](NodeId n) { return ScoredChoice{static_cast<std::int64_t>(n.value), 0b1}; };
  touch_all();
  EXPECT_FALSE(index.best(pool, task, many).indexed);
  EXPECT_FALSE(index.best(pool, task, evaluate).indexed);
  // Another shape is still indexed.
  answer = index.best(pool, shape(1, 500, 1000), evaluate);
  EXPECT_TRUE(answer.indexed);
}

}  // namespace
}  // namespace tidepool
