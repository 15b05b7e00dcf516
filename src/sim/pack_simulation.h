// The packing experiment of the FGD paper ("Beware of Fragmentation", Weng et al., ATC'23): tasks
// arrive one at a time and never leave; each is placed by the policy or, fitting nowhere, counted
// as failed and dropped. Allocation and fragmentation are sampled after every arrival.
//
// The arrival sequence, as in the authors' simulator: the task list (ordered by name) is
// shuffled with the seed; then, if its GPU demand is below `tune` x the pool's GPU capacity,
// tasks drawn from the list with replacement are appended until the next draw would pass that
// target; if above, tasks drawn at random are removed until it is met. Equally good nodes are
// then ranked by a random permutation drawn for the run (Pool::set_tie_order).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/fragmentation.h"
#include "core/policies/placement_policy.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/task.h"

namespace tidepool {

struct PackSettings {
  double tune = 1.3;  // arrived GPU demand at the end, as a multiple of GPU capacity
  std::uint64_t seed = 42;
};

// One sample of a run, taken before the first arrival and after each arrival.
struct PackSample {
  std::int64_t arrived_milli_gpu = 0;    // GPU demand of the tasks arrived so far
  std::int64_t allocated_milli_gpu = 0;  // GPU share held by placed tasks
  double fragmented_milli_gpu = 0;       // FGD fragmentation of the pool
};

struct PackRun {
  std::vector<PackSample> samples;
  std::int64_t total_gpus = 0;
  int arrived_tasks = 0;
  int failed_tasks = 0;
};

// Indexes into `tasks` in arrival order (see the file comment).
std::vector<std::uint32_t> pack_arrival_order(std::span<const TaskShape> tasks,
                                              std::int64_t capacity_milli_gpu,
                                              const PackSettings& settings, Rng& rng);

// Runs the experiment on a copy of `pool` (which should be empty). `tasks` must be ordered by
// name; `profile` is the fragmentation measure's task distribution (FGD: of `tasks` itself).
PackRun run_pack(Pool pool, std::span<const TaskShape> tasks, const WorkloadProfile& profile,
                 PlacementPolicy& policy, const PackSettings& settings);

// A metric at each whole percent (0..130) of arrived GPU demand, as the FGD analysis scripts
// compute it: the mean over samples whose arrived share rounds to k% (or, if none, to k-1..k+1%),
// rounded to 2 decimals; absent where no sample is near.
using PercentCurve = std::array<std::optional<double>, 131>;

PercentCurve allocation_curve(const PackRun& run);     // % of GPU capacity allocated
PercentCurve fragmentation_curve(const PackRun& run);  // % of GPU capacity fragmented

}  // namespace tidepool
