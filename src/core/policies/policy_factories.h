// Constructors of the individual placement policies; most callers use make_placement_policy().
#pragma once

#include <memory>

#include "core/fragmentation.h"
#include "core/policies/placement_policy.h"
#include "core/policies/score_index.h"

namespace tidepool {

std::unique_ptr<PlacementPolicy> make_random_policy();
std::unique_ptr<PlacementPolicy> make_dot_product_policy();
std::unique_ptr<PlacementPolicy> make_gpu_clustering_policy();
std::unique_ptr<PlacementPolicy> make_gpu_packing_policy();
std::unique_ptr<PlacementPolicy> make_best_fit_policy();
// FGD and Tidepool look their nodes up in an index by default (core/policies/score_index.h); the
// scan makes the same choices.
std::unique_ptr<PlacementPolicy> make_fgd_policy(const WorkloadProfile& profile,
                                                 ScoreLookup lookup = ScoreLookup::kIndex);
std::unique_ptr<PlacementPolicy> make_tidepool_policy(const WorkloadProfile& profile,
                                                      ScoreLookup lookup = ScoreLookup::kIndex);

// The normalisation constants of the FGD paper's baselines: the largest node it considers has
// 128 cores and 8 GPUs.
inline constexpr double kMaxSpecMilliCpu = 128000.0;
inline constexpr double kMaxSpecMilliGpu = 8000.0;

}  // namespace tidepool
