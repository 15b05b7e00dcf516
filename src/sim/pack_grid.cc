#include "sim/pack_grid.h"

#include <atomic>
#include <mutex>
#include <thread>

namespace tidepool {

std::vector<PackGridResult> run_pack_grid(const Pool& pool, std::span<const PackWorkload> workloads,
                                          std::span<const PolicyInfo> policies,
                                          std::span<const std::uint64_t> seeds, double tune,
                                          int threads, const PackProgress& progress) {
  const std::size_t runs = workloads.size() * policies.size() * seeds.size();
  std::vector<PackGridResult> results(runs);
  std::atomic<std::size_t> next{0};
  std::mutex report;
  int done = 0;

  auto worker = [&] {
    for (std::size_t i = next++; i < runs; i = next++) {
      const std::size_t seed_index = i % seeds.size();
      const std::size_t policy_index = (i / seeds.size()) % policies.size();
      const PackWorkload& workload = workloads[i / (seeds.size() * policies.size())];
      const PolicyInfo& info = policies[policy_index];
      // Known names only reach here, so construction cannot fail.
      auto policy = make_placement_policy(info.name, workload.profile).value();
      const PackSettings settings{tune, seeds[seed_index]};
      const PackRun run = run_pack(pool, workload.tasks, workload.profile, *policy, settings);
      PackGridResult& result = results[i];
      result.workload = workload.name;
      result.policy_label = std::string(info.label);
      result.tune = tune;
      result.seed = settings.seed;
      result.total_gpus = run.total_gpus;
      result.arrived_tasks = run.arrived_tasks;
      result.failed_tasks = run.failed_tasks;
      result.allocation = allocation_curve(run);
      result.fragmentation = fragmentation_curve(run);
      if (progress) {
        std::lock_guard lock(report);
        progress(++done, static_cast<int>(runs), result);
      }
    }
  };
  const int workers = std::max(1, std::min<int>(threads, static_cast<int>(runs)));
  std::vector<std::jthread> pool_threads;
  for (int t = 1; t < workers; ++t) pool_threads.emplace_back(worker);
  worker();
  return results;
}

}  // namespace tidepool
