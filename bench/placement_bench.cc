// Placement decisions per second of every policy on a synthetic pool of 10,000 nodes / 80,000
// GPUs, held at 50% and 90% GPU allocation, and the cost of the FGD fragmentation measure alone;
// FGD and Tidepool, by their index and by the scan, also at 1,000 and 100,000 nodes, with the
// memory their lookup takes per node.
//
// The task mix is shaped like the openb trace (Alibaba GPU cluster trace v2023): 13% CPU-only,
// 38% a GPU fraction (810/470/320/650/230 milli-GPU), 48% one GPU, 1% 2/4/8 GPUs. A fixture is
// filled to its target allocation by the policy under test itself (the scans: by the same policy
// looking its nodes up in its index, which places exactly as the scan). A benchmark takes a copy
// of it with a policy of its own, warmed by one decision for every shape of the mix (not timed).
// One benchmark iteration is the steady state of a live scheduler: one decision, its commit, and
// the release of random earlier allocations while the pool is above the target. items_per_second
// is decisions/s.
//
// Read the figures as ratios between policies of the same run (see bench/README.md).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/fragmentation.h"
#include "core/policies/placement_policy.h"
#include "core/policies/policy_factories.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/task.h"
#include "core/topology.h"
#include "synthetic_pool.h"

namespace tidepool {
namespace {

constexpr int kDefaultNodes = 10'000;
constexpr std::array<int, 3> kNodeCounts = {1'000, 10'000, 100'000};
constexpr std::uint64_t kProfileSeed = 11;
constexpr std::uint64_t kFillSeed = 42;
constexpr int kProfileSample = 200'000;
constexpr std::array<int, 2> kOccupancies = {50, 90};

using bench_support::die;
using bench_support::kGpusPerNode;
using bench_support::take;

Pool make_synthetic_pool(int node_count) {
  return bench_support::make_synthetic_pool(node_count, /*t4_domains=*/true);
}

template <std::size_t N, class T>
T pick(Rng& rng, const std::array<T, N>& values) {
  return values[rng.below(N)];
}

// One task of the openb-shaped mix.
TaskShape draw_task(Rng& rng) {
  constexpr MemoryMib kGib = 1024;
  const std::uint64_t r = rng.below(1000);
  std::int64_t gpus = 0, milli = 0, cpu = 0, memory = 0;
  if (r < 130) {  // CPU-only
    cpu = pick(rng, std::array<std::int64_t, 4>{1000, 2000, 4000, 8000});
    memory = pick(rng, std::array<std::int64_t, 4>{2, 4, 8, 16}) * kGib;
  } else if (r < 510) {  // a GPU fraction
    gpus = 1;
    milli = pick(rng, std::array<std::int64_t, 5>{810, 470, 320, 650, 230});
    cpu = pick(rng, std::array<std::int64_t, 3>{2000, 4000, 8000});
    memory = pick(rng, std::array<std::int64_t, 3>{8, 16, 32}) * kGib;
  } else if (r < 990) {  // one GPU
    gpus = 1;
    milli = kMilliPerGpu;
    cpu = pick(rng, std::array<std::int64_t, 3>{4000, 8000, 12000});
    memory = pick(rng, std::array<std::int64_t, 3>{16, 32, 64}) * kGib;
  } else {  // 2, 4 or 8 GPUs
    gpus = pick(rng, std::array<std::int64_t, 3>{2, 4, 8});
    milli = kMilliPerGpu;
    cpu = gpus * pick(rng, std::array<std::int64_t, 2>{4000, 8000});
    memory = gpus * 32 * kGib;
  }
  return take(make_task_shape(gpus, milli, cpu, memory), "task");
}

const WorkloadProfile& workload_profile() {
  static const WorkloadProfile profile = [] {
    Rng rng(kProfileSeed);
    std::vector<TaskShape> sample;
    sample.reserve(kProfileSample);
    for (int i = 0; i < kProfileSample; ++i) sample.push_back(draw_task(rng));
    return WorkloadProfile::from_tasks(sample);
  }();
  return profile;
}

struct Running {
  TaskShape task;
  Assignment where;
};

// A policy by name; "fgd-scan" and "tidepool-scan" are FGD and Tidepool scanning every node
// instead of looking them up in their index (core/policies/score_index.h): the same choices.
std::unique_ptr<PlacementPolicy> make_policy(const std::string& name) {
  if (name == "fgd-scan") return make_fgd_policy(workload_profile(), ScoreLookup::kScan);
  if (name == "tidepool-scan") return make_tidepool_policy(workload_profile(), ScoreLookup::kScan);
  return take(make_placement_policy(name, workload_profile()), "policy");
}

// The policy that fills the fixtures of `name`: the policy itself, but for a scan its indexed
// twin (the same placements, a hundred times sooner at 100,000 nodes).
std::string filler_of(const std::string& name) {
  if (name == "fgd-scan") return "fgd";
  if (name == "tidepool-scan") return "tidepool";
  return name;
}

// A pool held at a target allocation, with the policy that places on it.
struct Fixture {
  Fixture(Pool start, std::vector<Running> tasks, Rng random,
          std::unique_ptr<PlacementPolicy> placer, int target_percent)
      : pool(std::move(start)),
        policy(std::move(placer)),
        running(std::move(tasks)),
        rng(random),
        target_milli_gpu(pool.capacity_milli_gpu() * target_percent / 100) {}

  // One decision and its commit; false if the task fits nowhere.
  bool place_one() {
    const TaskShape task = draw_task(rng);
    auto where = policy->place(pool, task, rng);
    if (!where) return false;
    if (auto ok = pool.allocate(task, *where); !ok) die("allocate: " + ok.error().message());
    running.push_back({task, *where});
    return true;
  }

  // Releases random running tasks while the pool is above its target.
  void release_to_target() {
    while (pool.allocated_milli_gpu() > target_milli_gpu && !running.empty()) {
      const std::size_t i = rng.below(running.size());
      if (auto ok = pool.release(running[i].task, running[i].where); !ok) {
        die("release: " + ok.error().message());
      }
      running[i] = running.back();
      running.pop_back();
    }
  }

  // Places tasks until the target is reached (or 20,000 decisions in a row fail).
  void fill() {
    int failures_in_a_row = 0;
    while (pool.allocated_milli_gpu() < target_milli_gpu && failures_in_a_row < 20'000) {
      failures_in_a_row = place_one() ? 0 : failures_in_a_row + 1;
    }
  }

  [[nodiscard]] double occupancy_percent() const {
    return 100.0 * static_cast<double>(pool.allocated_milli_gpu()) /
           static_cast<double>(pool.capacity_milli_gpu());
  }

  Pool pool;
  std::unique_ptr<PlacementPolicy> policy;
  std::vector<Running> running;
  Rng rng;
  std::int64_t target_milli_gpu;
};

// The filled fixtures of one filler and pool size, all built on first use of any: the empty pool
// filled to the first occupancy, a copy of that filled on to the next, and so on (each pool with a
// policy object of its own, as a policy serves one pool). Built before any is measured, so they do
// not depend on which benchmarks run.
const Fixture& filled(const std::string& filler, int nodes, int occupancy) {
  static std::map<std::tuple<std::string, int, int>, std::unique_ptr<Fixture>> cache;
  if (!cache.contains({filler, nodes, kOccupancies.front()})) {
    const Pool empty = make_synthetic_pool(nodes);
    const Fixture* previous = nullptr;
    for (int target : kOccupancies) {
      auto fx = previous != nullptr
                    ? std::make_unique<Fixture>(previous->pool, previous->running, previous->rng,
                                                make_policy(filler), target)
                    : std::make_unique<Fixture>(empty, std::vector<Running>{}, Rng(kFillSeed),
                                                make_policy(filler), target);
      fx->fill();
      previous = fx.get();
      cache[{filler, nodes, target}] = std::move(fx);
    }
  }
  return *cache.at({filler, nodes, occupancy});
}

// The distinct task shapes of the mix, in a fixed order.
const std::vector<TaskShape>& mix_shapes() {
  static const std::vector<TaskShape> shapes = [] {
    Rng rng(kProfileSeed);
    std::map<TaskShape, int> seen;
    for (int i = 0; i < kProfileSample; ++i) seen.emplace(draw_task(rng), 0);
    std::vector<TaskShape> all;
    for (const auto& [shape, unused] : seen) all.push_back(shape);
    return all;
  }();
  return shapes;
}

// Heap bytes in use (malloc'd and mmap'd).
std::size_t heap_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// What one benchmark measures on: a copy of the filled fixture with a policy of its own, warmed by
// one decision for every shape of the mix (that builds an index, or fills the scan's memo), and
// the heap that took. Kept while Google Benchmark calls the same benchmark again (it does so with
// growing iteration counts), dropped for the next.
struct Measured {
  std::unique_ptr<Fixture> fixture;
  std::size_t lookup_bytes = 0;
};

Measured& measured(const std::string& policy, int nodes, int occupancy) {
  static std::tuple<std::string, int, int> current;
  static Measured m;
  if (m.fixture == nullptr || current != std::tuple{policy, nodes, occupancy}) {
    m.fixture.reset();
    const Fixture& source = filled(filler_of(policy), nodes, occupancy);
    auto fx =
        std::make_unique<Fixture>(source.pool, source.running, source.rng, nullptr, occupancy);
    const std::size_t before = heap_bytes();
    fx->policy = make_policy(policy);
    Rng unused(1);
    for (const TaskShape& shape : mix_shapes()) (void)fx->policy->place(fx->pool, shape, unused);
    m.lookup_bytes = heap_bytes() - std::min(heap_bytes(), before);
    m.fixture = std::move(fx);
    current = {policy, nodes, occupancy};
  }
  return m;
}

void BM_place(benchmark::State& state, const std::string& policy, int nodes, int occupancy) {
  Measured& m = measured(policy, nodes, occupancy);
  Fixture& fx = *m.fixture;
  std::int64_t unplaceable = 0;
  for (auto _ : state) {
    if (!fx.place_one()) ++unplaceable;
    fx.release_to_target();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(policy + " @ " + std::to_string(nodes) + " nodes, " + std::to_string(occupancy) +
                 "% GPU");
  state.counters["occupancy_%"] = fx.occupancy_percent();
  state.counters["unplaceable_%"] =
      100.0 * static_cast<double>(unplaceable) / static_cast<double>(state.iterations());
  state.counters["lookup_B/node"] =
      static_cast<double>(m.lookup_bytes) / static_cast<double>(nodes);
}

// The FGD fragmentation of one node (against the workload profile), over the nodes of a pool
// filled by best-fit.
void BM_node_fragmentation(benchmark::State& state, int occupancy) {
  const Fixture& fx = filled("best-fit", kDefaultNodes, occupancy);
  const WorkloadProfile& profile = workload_profile();
  const auto specs = fx.pool.specs();
  const auto states = fx.pool.states();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(scaled_node_fragmentation(specs[i], states[i], profile));
    if (++i == specs.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(profile.tasks().size()) + " typical tasks @ " +
                 std::to_string(occupancy) + "% GPU");
  state.counters["occupancy_%"] = fx.occupancy_percent();
}

}  // namespace
}  // namespace tidepool

int main(int argc, char** argv) {
  using tidepool::kOccupancies;
  std::vector<std::string> policies;
  for (const tidepool::PolicyInfo& info : tidepool::placement_policies()) {
    policies.emplace_back(info.name);
  }
  policies.insert(policies.end(), {"fgd-scan", "tidepool-scan"});
  // Every policy at 10,000 nodes; FGD and Tidepool, indexed and scanning, at every size.
  const std::vector<std::string> scaled = {"fgd", "fgd-scan", "tidepool", "tidepool-scan"};
  for (int nodes : tidepool::kNodeCounts) {
    for (const std::string& policy : nodes == tidepool::kDefaultNodes ? policies : scaled) {
      for (int occupancy : kOccupancies) {
        const std::string name = "place/" + policy + "/nodes:" + std::to_string(nodes) +
                                 "/occupancy:" + std::to_string(occupancy);
        benchmark::RegisterBenchmark(name.c_str(), tidepool::BM_place, policy, nodes, occupancy);
      }
    }
  }
  for (int occupancy : kOccupancies) {
    const std::string name = "scaled_node_fragmentation/occupancy:" + std::to_string(occupancy);
    benchmark::RegisterBenchmark(name.c_str(), tidepool::BM_node_fragmentation, occupancy);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
