// How a placement changes a node's FGD fragmentation, and the GPU choices worth trying.
#pragma once

#include <cstdint>

#include "core/fragmentation.h"
#include "core/node.h"
#include "core/policies/node_choice.h"
#include "core/task.h"

namespace tidepool {

// Scaled fragmentation of the node after `task` takes `gpus`, minus before (see
// scaled_node_fragmentation). Negative: the placement reduces fragmentation.
std::int64_t fragmentation_growth(const NodeSpec& spec, const NodeState& state,
                                  const TaskShape& task, GpuSet gpus,
                                  const WorkloadProfile& profile);

// Calls visit(GpuSet) for each distinct way to give `task` GPUs on this node: each GPU with the
// share free for a fraction (in index order), the lowest wholly free GPUs for whole GPUs (all
// wholly free GPUs are alike), the empty set for a CPU-only task. The task must fit the node.
template <class Visit>
void for_each_gpu_choice(const NodeSpec& spec, const NodeState& state, const TaskShape& task,
                         Visit&& visit) {
  if (!task.needs_gpu()) {
    visit(GpuSet{0});
  } else if (task.is_fractional()) {
    for (int g = 0; g < spec.gpu_count; ++g) {
      if (state.free_milli[g] >= task.milli_per_gpu) visit(single_gpu(g));
    }
  } else {
    visit(lowest_whole_free_gpus(spec, state, task.gpu_count));
  }
}

}  // namespace tidepool
