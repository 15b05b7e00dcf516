// Runs the packing experiment over a grid of workloads x policies x seeds on all cores, in the
// layout of the FGD authors' published results.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/fragmentation.h"
#include "core/policies/placement_policy.h"
#include "core/pool.h"
#include "sim/pack_simulation.h"

namespace tidepool {

// One task list: its name (the file name without ".csv"), its tasks ordered by name, and the
// fragmentation profile measured on it.
struct PackWorkload {
  std::string name;
  std::vector<TaskShape> tasks;
  WorkloadProfile profile;
};

struct PackGridResult {
  std::string workload;
  std::string policy_label;  // "06-FGD"
  double tune = 0;
  std::uint64_t seed = 0;
  std::int64_t total_gpus = 0;
  int arrived_tasks = 0;
  int failed_tasks = 0;
  PercentCurve allocation;
  PercentCurve fragmentation;
};

// Called after each finished run with (runs done, runs in all, the finished run). Calls are
// serialised.
using PackProgress = std::function<void(int, int, const PackGridResult&)>;

// Every (workload, policy, seed) run, ordered by workload, then policy, then seed, whatever the
// order they finish in. `threads` workers (at least 1) share the runs.
std::vector<PackGridResult> run_pack_grid(const Pool& pool, std::span<const PackWorkload> workloads,
                                          std::span<const PolicyInfo> policies,
                                          std::span<const std::uint64_t> seeds, double tune,
                                          int threads, const PackProgress& progress);

}  // namespace tidepool
