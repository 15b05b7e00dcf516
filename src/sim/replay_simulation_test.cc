#include "sim/replay_simulation.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"

namespace tidepool {
namespace {

constexpr MilliCpu kNodeCpu = 64000;
constexpr MemoryMib kNodeMemory = 262144;

// A pool of T4 nodes with the given GPU counts (a V100 model is known but on no node).
Pool make_pool(const std::vector<int>& gpu_counts) {
  GpuModelCatalog models;
  const GpuModelId t4 = models.intern("T4").value();
  (void)models.intern("V100").value();
  std::vector<NodeSpec> nodes;
  for (std::size_t i = 0; i < gpu_counts.size(); ++i) {
    NodeSpec node;
    node.name = "node-" + std::to_string(i);
    node.model = t4;
    node.gpu_count = gpu_counts[i];
    node.milli_cpu = kNodeCpu;
    node.memory_mib = kNodeMemory;
    nodes.push_back(node);
  }
  return Pool::create(std::move(models), Topology::single_leaf(), std::move(nodes)).value();
}

// A pod of `gpus` x `milli` GPU that the trace created at `created` and ran from `scheduled`
// to `deleted`.
PodRecord pod(std::string name, int gpus, int milli, std::optional<Seconds> created,
              std::optional<Seconds> deleted, std::optional<Seconds> scheduled,
              MilliCpu cpu = 1000) {
  PodRecord record;
  record.name = std::move(name);
  record.shape = make_task_shape(gpus, gpus == 0 ? 0 : milli, cpu, 1024).value();
  record.creation_time = created;
  record.deletion_time = deleted;
  record.scheduled_time = scheduled;
  return record;
}

struct Replay {
  Replay(std::vector<PodRecord> pods_in, Pool pool_in, std::string policy_in = "best-fit")
      : pods(std::move(pods_in)), pool(std::move(pool_in)), policy(std::move(policy_in)) {}

  std::vector<PodRecord> pods;
  Pool pool;
  std::string policy = "best-fit";
  ReplaySettings settings;

  Result<ReplayRun> run() const {
    std::vector<TaskShape> shapes;
    for (const PodRecord& p : pods) shapes.push_back(p.shape);
    const WorkloadProfile profile = WorkloadProfile::from_tasks(shapes);
    auto made = make_placement_policy(policy, profile);
    EXPECT_TRUE(made.has_value());
    return run_replay(pool, pods, **made, profile, settings);
  }
};

TEST(ReplaySimulation, PodWaitsUntilAnotherLeavesAndStartsAtThatTime) {
  Replay replay{{pod("a", 1, 1000, 0, 100, 0), pod("b", 1, 1000, 10, 50, 10)}, make_pool({1})};
  replay.settings.sample_interval = 50;
  const ReplayRun run = replay.run().value();

  EXPECT_EQ(run.pods[0].start, 0);
  EXPECT_EQ(run.pods[1].outcome, PodOutcome::kStarted);
  EXPECT_EQ(run.pods[1].start, 100);
  EXPECT_EQ(run.pods[1].delay(), 90);
  EXPECT_EQ(run.started, 2);
  EXPECT_EQ(run.waiting_at_end, 0);
  ASSERT_EQ(run.samples.size(), 3U);  // 0, 50, 100
  EXPECT_EQ(run.samples[1].time, 50);
  EXPECT_EQ(run.samples[1].queued, 1);
  EXPECT_EQ(run.samples[1].running, 1);
  EXPECT_EQ(run.samples[2].time, 100);
  EXPECT_EQ(run.samples[2].queued, 0);
  EXPECT_EQ(run.samples[2].running, 1);
}

TEST(ReplaySimulation, ReleasesComeBeforeArrivalsAtTheSameTime) {
  Replay replay{{pod("a", 1, 1000, 0, 100, 0), pod("b", 1, 1000, 100, 200, 100)}, make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.pods[1].start, 100);
  EXPECT_EQ(run.pods[1].delay(), 0);
}

TEST(ReplaySimulation, SimultaneousArrivalsGoByPodIndex) {
  Replay replay{{pod("x", 1, 1000, 0, 100, 0), pod("y", 1, 1000, 0, 100, 0)}, make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.pods[0].outcome, PodOutcome::kStarted);
  EXPECT_EQ(run.pods[1].outcome, PodOutcome::kStarted);
  EXPECT_EQ(run.pods[0].start, 0);
  EXPECT_EQ(run.pods[1].start, 100);
}

TEST(ReplaySimulation, NoHeadOfLineBlocking) {
  // b (2 GPUs) waits for a; c (1 GPU) arrives behind b and starts at once on the free GPU.
  Replay replay{{pod("a", 1, 1000, 0, 100, 0), pod("b", 2, 1000, 10, 300, 250),
                 pod("c", 1, 1000, 20, 60, 20)},
                make_pool({2})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.pods[2].start, 20);
  EXPECT_EQ(run.pods[1].start, 100);
  EXPECT_EQ(run.pods[1].delay(), 90);
  EXPECT_EQ(run.delay.max, 90);
}

TEST(ReplaySimulation, ZeroRunTimeReleasesAtOnceAndTheQueueMovesOn) {
  Replay replay{{pod("a", 1, 1000, 0, 100, 0), pod("b", 1, 1000, 10, 50, 50),
                 pod("c", 1, 1000, 20, 130, 100)},
                make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.pods[1].start, 100);
  EXPECT_EQ(run.pods[2].start, 100);
  EXPECT_EQ(run.samples.back().running, 0);  // c left at 130, the end
  EXPECT_EQ(run.pool_at_end->allocated_milli_gpu(), 0);
}

TEST(ReplaySimulation, PodsThatFitNoEmptyNodeAreRejectedNotQueued) {
  PodRecord other_model = pod("v100", 1, 1000, 5, 50, 5);
  GpuModelCatalog models;
  (void)models.intern("T4");
  ModelSet v100;
  v100.add(models.intern("V100").value());
  other_model.shape.models = v100;
  Replay replay{{pod("ok", 1, 1000, 0, 50, 0), pod("too-big", 4, 1000, 1, 50, 1),
                 pod("too-much-cpu", 0, 0, 2, 50, 2, kNodeCpu + 1), other_model},
                make_pool({2, 2})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.arrived, 4);
  EXPECT_EQ(run.started, 1);
  EXPECT_EQ(run.rejected, 3);
  EXPECT_EQ(run.waiting_at_end, 0);
  EXPECT_EQ(run.pods[1].outcome, PodOutcome::kRejected);
  EXPECT_EQ(run.pods[2].outcome, PodOutcome::kRejected);
  EXPECT_EQ(run.pods[3].outcome, PodOutcome::kRejected);
  for (const ReplaySample& s : run.samples) EXPECT_EQ(s.queued, 0);
}

TEST(ReplaySimulation, PodWithoutDeletionTimeHoldsItsGpuToTheEnd) {
  Replay replay{{pod("forever", 1, 1000, 0, std::nullopt, 0), pod("late", 1, 1000, 10, 500, 10)},
                make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.end_time, 500);
  EXPECT_EQ(run.pods[1].outcome, PodOutcome::kWaiting);
  EXPECT_FALSE(run.pods[1].start);
  EXPECT_EQ(run.waiting_at_end, 1);
  EXPECT_EQ(run.samples.back().queued, 1);
  EXPECT_EQ(run.samples.back().running, 1);
}

TEST(ReplaySimulation, RunTimeFallsBackToCreationWithoutScheduledTime) {
  // a was pending in the trace (no scheduled time): it runs deletion - creation = 100 s.
  Replay replay{{pod("a", 1, 1000, 0, 100, std::nullopt), pod("b", 1, 1000, 1, 300, 200)},
                make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.pods[1].start, 100);
}

TEST(ReplaySimulation, AllocationIntegralAndSampleTimes) {
  // One of two GPUs busy for the first hour of two: 1 GPU-hour, 25% on average.
  Replay replay{{pod("a", 1, 1000, 0, 3600, 0), pod("b", 0, 0, 7200, 7200, 7200)}, make_pool({2})};
  replay.settings.sample_interval = 5000;
  const ReplayRun run = replay.run().value();
  EXPECT_DOUBLE_EQ(run.gpu_hours_allocated, 1.0);
  EXPECT_DOUBLE_EQ(run.mean_gpu_percent, 25.0);
  ASSERT_EQ(run.samples.size(), 3U);
  EXPECT_EQ(run.samples[0].time, 0);
  EXPECT_DOUBLE_EQ(run.samples[0].allocated_gpu_percent, 50.0);
  EXPECT_EQ(run.samples[1].time, 5000);
  EXPECT_EQ(run.samples[1].allocated_milli_gpu, 0);
  EXPECT_EQ(run.samples[2].time, 7200);
}

// A few hundred pods of mixed shapes on a small pool, far more than it holds at once.
std::vector<PodRecord> busy_trace(std::uint64_t seed) {
  Rng rng(seed);
  std::vector<PodRecord> pods;
  const int shapes[][2] = {{1, 200},  {1, 500}, {1, 1000}, {2, 1000},
                           {4, 1000}, {0, 0},   {8, 1000}, {16, 1000}};
  for (int i = 0; i < 400; ++i) {
    const auto& shape = shapes[rng.below(8)];
    const auto created = static_cast<Seconds>(rng.below(20000));
    const auto waited = static_cast<Seconds>(rng.below(3) == 0 ? rng.below(500) : 0);
    const auto ran = static_cast<Seconds>(rng.below(4000));
    const bool never_deleted = rng.below(40) == 0;
    pods.push_back(pod("pod-" + std::to_string(i), shape[0], shape[1], created,
                       never_deleted ? std::nullopt : std::optional(created + waited + ran),
                       created + waited, 1000 * static_cast<MilliCpu>(1 + rng.below(16))));
  }
  return pods;
}

TEST(ReplaySimulation, InvariantsHoldForEveryPolicy) {
  for (const PolicyInfo& info : placement_policies()) {
    SCOPED_TRACE(info.name);
    Replay replay{busy_trace(7), make_pool({8, 4, 4, 2, 2, 1}), std::string(info.name)};
    replay.settings.sample_interval = 500;
    const ReplayRun run = replay.run().value();
    ASSERT_TRUE(run.pool_at_end);
    EXPECT_TRUE(run.pool_at_end->check_invariants().has_value());
    EXPECT_EQ(run.arrived, 400);
    EXPECT_EQ(run.started + run.waiting_at_end + run.rejected, run.arrived);
    EXPECT_GT(run.rejected, 0);  // the 16-GPU pods: the largest node has 8
    EXPECT_GT(run.delay.max, 0);
    for (const ReplaySample& s : run.samples) {
      EXPECT_LE(s.allocated_milli_gpu, run.pool_at_end->capacity_milli_gpu());
      EXPECT_LE(s.allocated_gpu_percent, 100.0);
      EXPECT_LE(s.allocated_cpu_percent, 100.0);
      EXPECT_GE(s.fragmented_gpu_percent, 0.0);
    }
    // What the pool holds at the end is exactly the pods still running then.
    std::int64_t held = 0;
    int running = 0;
    for (std::size_t i = 0; i < replay.pods.size(); ++i) {
      const PodRecord& p = replay.pods[i];
      const ReplayPodResult& r = run.pods[i];
      if (r.outcome != PodOutcome::kStarted) continue;
      EXPECT_GE(*r.start, r.arrival);
      if (!p.deletion_time || *r.start + (*p.deletion_time - *p.scheduled_time) > run.end_time) {
        held += p.shape.total_milli_gpu();
        ++running;
      }
    }
    EXPECT_EQ(run.pool_at_end->allocated_milli_gpu(), held);
    EXPECT_EQ(run.samples.back().running, running);
    EXPECT_EQ(run.samples.back().time, run.end_time);
  }
}

// The rules of replay_simulation.h, written plainly: every queued pod is offered to the policy
// at every event time. The driver skips offers that cannot succeed; it must start the same pods
// at the same times on the same nodes.
std::vector<std::optional<std::pair<Seconds, NodeId>>> reference_starts(
    Pool pool, const std::vector<PodRecord>& pods, PlacementPolicy& policy, std::uint64_t seed,
    Seconds end) {
  Rng rng(seed);
  const Pool empty = pool;
  std::set<std::tuple<Seconds, int, std::uint32_t>> events;  // time, 0 release / 1 arrival, pod
  for (std::uint32_t i = 0; i < pods.size(); ++i) events.insert({*pods[i].creation_time, 1, i});
  std::vector<std::optional<std::pair<Seconds, NodeId>>> starts(pods.size());
  std::vector<Assignment> where(pods.size());
  std::vector<std::uint32_t> queue;
  while (!events.empty() && std::get<0>(*events.begin()) <= end) {
    const Seconds now = std::get<0>(*events.begin());
    while (!events.empty() && std::get<0>(*events.begin()) == now) {
      const auto [time, kind, i] = *events.begin();
      events.erase(events.begin());
      if (kind == 0) {
        EXPECT_TRUE(pool.release(pods[i].shape, where[i]).has_value());
        continue;
      }
      bool fits_empty = false;
      for (int n = 0; n < empty.node_count(); ++n) {
        const NodeId node{static_cast<std::uint32_t>(n)};
        fits_empty = fits_empty || fits(empty.spec(node), empty.state(node), pods[i].shape);
      }
      if (fits_empty) queue.push_back(i);
    }
    std::vector<std::uint32_t> waiting;
    for (std::uint32_t i : queue) {
      auto placed = policy.place(pool, pods[i].shape, rng);
      if (!placed) {
        waiting.push_back(i);
        continue;
      }
      EXPECT_TRUE(pool.allocate(pods[i].shape, *placed).has_value());
      where[i] = *placed;
      starts[i] = {now, placed->node};
      if (pods[i].deletion_time) {
        const Seconds finish = now + *pods[i].deletion_time - *pods[i].scheduled_time;
        if (finish <= end) events.insert({finish, 0, i});
      }
    }
    queue = std::move(waiting);
  }
  return starts;
}

TEST(ReplaySimulation, MatchesThePlainReadingOfTheRules) {
  for (const PolicyInfo& info : placement_policies()) {
    for (std::uint64_t trace_seed : {3, 4}) {
      SCOPED_TRACE(std::string(info.name) + " trace " + std::to_string(trace_seed));
      Replay replay(busy_trace(trace_seed), make_pool({8, 4, 4, 2, 2, 1}), std::string(info.name));
      const ReplayRun run = replay.run().value();
      std::vector<TaskShape> shapes;
      for (const PodRecord& p : replay.pods) shapes.push_back(p.shape);
      const WorkloadProfile profile = WorkloadProfile::from_tasks(shapes);
      auto policy = make_placement_policy(info.name, profile).value();
      const auto expected =
          reference_starts(replay.pool, replay.pods, *policy, replay.settings.seed, run.end_time);
      int started = 0;
      for (std::size_t i = 0; i < replay.pods.size(); ++i) {
        ASSERT_EQ(run.pods[i].start.has_value(), expected[i].has_value()) << "pod " << i;
        if (!expected[i]) continue;
        ++started;
        EXPECT_EQ(*run.pods[i].start, expected[i]->first) << "pod " << i;
        EXPECT_EQ(*run.pods[i].node, expected[i]->second) << "pod " << i;
      }
      EXPECT_EQ(run.started, started);
    }
  }
}

TEST(ReplaySimulation, SameSeedSameResults) {
  for (const char* policy : {"random", "fgd"}) {
    SCOPED_TRACE(policy);
    Replay replay{busy_trace(11), make_pool({8, 4, 4, 2, 2, 1}), policy};
    replay.settings.seed = 5;
    replay.settings.sample_interval = 700;
    const ReplayRun first = replay.run().value();
    const ReplayRun second = replay.run().value();
    ASSERT_EQ(first.pods.size(), second.pods.size());
    for (std::size_t i = 0; i < first.pods.size(); ++i) {
      EXPECT_EQ(first.pods[i].start, second.pods[i].start);
      EXPECT_EQ(first.pods[i].node, second.pods[i].node);
      EXPECT_EQ(first.pods[i].outcome, second.pods[i].outcome);
    }
    ASSERT_EQ(first.samples.size(), second.samples.size());
    for (std::size_t i = 0; i < first.samples.size(); ++i) {
      EXPECT_EQ(first.samples[i].allocated_milli_gpu, second.samples[i].allocated_milli_gpu);
      EXPECT_EQ(first.samples[i].allocated_milli_cpu, second.samples[i].allocated_milli_cpu);
      EXPECT_EQ(first.samples[i].queued, second.samples[i].queued);
    }
    EXPECT_EQ(first.delay.p99, second.delay.p99);
  }
}

TEST(ReplaySimulation, NearestRankPercentiles) {
  const std::vector<Seconds> sorted{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(nearest_rank_percentile(sorted, 1), 1);
  EXPECT_EQ(nearest_rank_percentile(sorted, 50), 5);
  EXPECT_EQ(nearest_rank_percentile(sorted, 51), 6);
  EXPECT_EQ(nearest_rank_percentile(sorted, 90), 9);
  EXPECT_EQ(nearest_rank_percentile(sorted, 95), 10);
  EXPECT_EQ(nearest_rank_percentile(sorted, 100), 10);
  const std::vector<Seconds> one{42};
  EXPECT_EQ(nearest_rank_percentile(one, 50), 42);

  const DelayStats stats = delay_stats({40, 10, 30, 20});
  EXPECT_EQ(stats.count, 4);
  EXPECT_EQ(stats.p50, 20);
  EXPECT_EQ(stats.p90, 40);
  EXPECT_EQ(stats.max, 40);
  EXPECT_DOUBLE_EQ(stats.mean, 25.0);
  EXPECT_EQ(delay_stats({}).count, 0);
  EXPECT_EQ(delay_stats({}).max, 0);
}

TEST(ReplaySimulation, InputErrors) {
  {
    Replay replay{{pod("a", 1, 1000, 0, 10, 0), pod("no-arrival", 1, 1000, std::nullopt, 10, 0)},
                  make_pool({1})};
    auto run = replay.run();
    ASSERT_FALSE(run);
    EXPECT_NE(run.error().field.find("no-arrival"), std::string::npos);
    EXPECT_NE(run.error().reason.find("creation_time"), std::string::npos);
  }
  {
    Replay replay{{pod("backwards", 1, 1000, 0, 10, 20)}, make_pool({1})};
    auto run = replay.run();
    ASSERT_FALSE(run);
    EXPECT_NE(run.error().field.find("backwards"), std::string::npos);
  }
  {
    Replay replay{{pod("a", 1, 1000, 0, 10, 0)}, make_pool({1})};
    replay.settings.sample_interval = 0;
    auto run = replay.run();
    ASSERT_FALSE(run);
    EXPECT_EQ(run.error().field, "sample interval");
  }
}

TEST(ReplaySimulation, EmptyPodList) {
  Replay replay{{}, make_pool({1})};
  const ReplayRun run = replay.run().value();
  EXPECT_EQ(run.arrived, 0);
  EXPECT_EQ(run.samples.size(), 1U);
  EXPECT_EQ(run.delay.count, 0);
}

}  // namespace
}  // namespace tidepool
