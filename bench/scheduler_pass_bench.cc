// One scheduling pass of the core Scheduler (Scheduler::pass, the pass the simulator and the
// server drive) over a large backlog of pending single-GPU jobs, on a synthetic pool of 1,000 or
// 10,000 nodes of 8 GPUs, half full or full when the pass begins. It shows what a pass costs per
// pending job, and that the cost is bounded by the jobs: the time per job should stay about flat
// from 10,000 to 100,000 pending jobs and from 1,000 to 10,000 nodes.
//
// The scheduler runs the "tidepool" policy of `tidepool sim run` (fair share, quotas with
// borrowing and reclaim, segregated borrowed work, EASY backfill, time slicing) with the Tidepool
// placement policy choosing where single GPUs go (SchedulerConfig::gang_policy). Four tenants,
// their guarantees and where their work runs set by the benchmark's Mix. The pool's running jobs
// (one GPU each, 4 or 8 per node) are adopted, not placed, so that the fixture is cheap to build.
// Every pending job asks for one GPU of any model, 4 cores and 16 GiB.
//
// Read the figures as ratios between benchmarks of the same run (see bench/README.md).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/scheduler.h"
#include "core/task.h"
#include "core/tenants.h"
#include "core/topology.h"
#include "synthetic_pool.h"

namespace tidepool {
namespace {

constexpr int kTenants = 4;
constexpr Seconds kNow = 600;

using bench_support::die;
using bench_support::kGpusPerNode;
using bench_support::take;

void check(Result<void> result, const char* what) {
  if (!result) die(std::string(what) + ": " + result.error().message());
}

// placement_bench's pool (bench/synthetic_pool.h), every node one NVLink domain.
Pool make_pool(int node_count) {
  return bench_support::make_synthetic_pool(node_count, /*t4_domains=*/false);
}

// How the work is spread over the tenants and their quotas.
enum Mix : std::int64_t {
  // Tenants t0..t3 each guaranteed a quarter of every model's GPUs; the running jobs of every node
  // spread over all four, all within guarantee; the pending jobs too while their tenant is below
  // its guarantee.
  kGuaranteed = 0,
  // The same without quotas (SchedulerConfig::quotas off): jobs that do not fit wait for capacity,
  // not quota.
  kNoQuotas = 1,
  // t0 has no guarantee (all its work borrows), t1..t3 a third each; each node runs the jobs of one
  // tenant (node n: t(n mod 4)), so that borrowed and guaranteed work keep to nodes of their own
  // and placement is filtered to some of the nodes (segregate_borrowed).
  kSegregated = 2,
};

// Tenants t0..t3 with the guarantees of `mix`, borrowing unlimited.
TenantBook make_book(const Pool& pool, Mix mix) {
  std::vector<std::int64_t> gpus(static_cast<std::size_t>(pool.models().size()), 0);
  for (const NodeSpec& spec : pool.specs()) gpus[spec.model.value] += spec.gpu_count;
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (int t = 0; t < kTenants; ++t) {
    TenantSpec tenant;
    tenant.name = "t" + std::to_string(t);
    const int guaranteed = mix == kSegregated ? kTenants - 1 : kTenants;
    for (std::size_t m = 0; m < gpus.size() && (mix != kSegregated || t > 0); ++m) {
      tenant.quotas.push_back({GpuModelId{static_cast<std::uint32_t>(m)},
                               gpus[m] * kMilliPerGpu / guaranteed, std::nullopt, std::nullopt});
    }
    org.tenants.push_back(std::move(tenant));
  }
  spec.orgs.push_back(std::move(org));
  return take(TenantBook::create(std::move(spec), pool.models()), "tenants");
}

Job one_gpu_job(std::uint32_t id, std::uint32_t tenant, Seconds submit) {
  static const TaskShape task = take(make_task_shape(1, kMilliPerGpu, 4000, 16 * 1024), "task");
  Job job;
  job.id = JobId{id};
  job.tenant = TenantId{tenant};
  job.queue = QueueId{tenant};
  job.submit_time = submit;
  job.runtime_estimate = 3600;
  job.checkpoint_interval = 600;
  job.gang.task_count = 1;
  job.gang.task = task;
  job.gang.topology = {TopologyLevel::kSpine, TopologyStrength::kPreferred};
  return job;
}

// The scheduler before the pass: `busy_per_node` of every node's GPUs run adopted jobs, and
// `pending` jobs wait, none considered yet.
Scheduler make_fixture(int nodes, int busy_per_node, int pending, Mix mix) {
  Pool pool = make_pool(nodes);
  TenantBook book = make_book(pool, mix);
  SchedulerConfig config = take(scheduler_policy("tidepool"), "policy");
  config.gang_policy = "tidepool";
  config.quotas = mix != kNoQuotas;
  Scheduler s = take(Scheduler::create(std::move(pool), std::move(book), config), "scheduler");
  std::uint32_t id = 0;
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < busy_per_node; ++g) {
      const Assignment where{NodeId{static_cast<std::uint32_t>(n)}, GpuSet{1} << g};
      const std::uint32_t tenant = mix == kSegregated ? n % kTenants : id % kTenants;
      check(s.adopt(one_gpu_job(id, tenant, 0), std::span(&where, 1), 0, 0), "adopt");
      ++id;
    }
  }
  for (int j = 0; j < pending; ++j, ++id) {
    check(s.submit(one_gpu_job(id, id % kTenants, 60), 60), "submit");
  }
  return s;
}

// Args: nodes, pending jobs, occupancy % (50: 4 GPUs of each node busy, 100: all 8), Mix.
void BM_SchedulerPass(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  const int occupancy = static_cast<int>(state.range(2));
  const auto mix = static_cast<Mix>(state.range(3));
  std::size_t started = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::optional<Scheduler> s;
    s.emplace(make_fixture(nodes, kGpusPerNode * occupancy / 100, pending, mix));
    state.ResumeTiming();
    PassResult out = s->pass(kNow);
    benchmark::DoNotOptimize(out);
    started = out.started.size();
    state.PauseTiming();
    s.reset();  // not timed: the fixture's teardown
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * pending);
  state.counters["started"] = static_cast<double>(started);
  // Seconds of CPU per pending job (printed as e.g. 1.2u: microseconds).
  state.counters["per_job"] =
      benchmark::Counter(static_cast<double>(pending) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void PassArgs(benchmark::internal::Benchmark* b) {
  for (std::int64_t mix : {kGuaranteed, kNoQuotas, kSegregated}) {
    for (int nodes : {1'000, 10'000}) {
      for (int pending : {10'000, 100'000}) {
        for (int occupancy : {50, 100}) b->Args({nodes, pending, occupancy, mix});
      }
    }
  }
}

BENCHMARK(BM_SchedulerPass)
    ->Name("pass")
    ->ArgNames({"nodes", "pending", "occupancy", "mix"})
    ->Apply(PassArgs)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace tidepool

BENCHMARK_MAIN();
