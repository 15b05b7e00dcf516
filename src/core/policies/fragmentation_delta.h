// How a placement changes a node's FGD fragmentation, and the GPU choices worth trying.
#pragma once

#include <cstdint>

#include "core/fragmentation.h"
#include "core/node.h"
#include "core/policies/node_choice.h"
#include "core/policies/score_cache.h"
#include "core/task.h"

namespace tidepool {

// Scaled fragmentation of the node after `task` takes `gpus`, minus before (see
// scaled_node_fragmentation): exactly that difference, computed in one pass over the profile.
// Negative: the placement reduces fragmentation.
std::int64_t fragmentation_growth(const NodeSpec& spec, const NodeState& state,
                                  const TaskShape& task, GpuSet gpus,
                                  const WorkloadProfile& profile);

// FGD's choice on a node that `task` fits: of the GPU choices (for_each_gpu_choice, in its order),
// the one whose growth in GPUs, fragmentation_growth over 1000 x profile.total_count() plus
// `extra_gpus` (a growth the caller adds, the same for every choice), scores highest as
// floor(100 * sigmoid(-growth)); the first among equal scores.
ScoredChoice best_fragmentation_choice(const NodeSpec& spec, const NodeState& state,
                                       const TaskShape& task, const WorkloadProfile& profile,
                                       double extra_gpus = 0.0);

// Calls visit(GpuSet) for each distinct way to give `task` GPUs on this node: for a fraction,
// each GPU with the share free, one per distinct free share (the lowest index among GPUs with the
// same free share: the node's fragmentation does not depend on which of them is taken), in index
// order; the lowest wholly free GPUs for whole GPUs (all wholly free GPUs are alike); the empty
// set for a CPU-only task. The task must fit the node. A score that depends on which GPU is taken
// beyond its free share must not use it.
template <class Visit>
void for_each_gpu_choice(const NodeSpec& spec, const NodeState& state, const TaskShape& task,
                         Visit&& visit) {
  if (!task.needs_gpu()) {
    visit(GpuSet{0});
  } else if (task.is_fractional()) {
    for (int g = 0; g < spec.gpu_count; ++g) {
      const MilliGpu free = state.free_milli[g];
      if (free < task.milli_per_gpu) continue;
      bool seen = false;
      for (int h = 0; h < g && !seen; ++h) seen = state.free_milli[h] == free;
      if (!seen) visit(single_gpu(g));
    }
  } else {
    visit(lowest_whole_free_gpus(spec, state, task.gpu_count));
  }
}

}  // namespace tidepool
