#include "core/policies/fragmentation_delta.h"

namespace tidepool {

std::int64_t fragmentation_growth(const NodeSpec& spec, const NodeState& state,
                                  const TaskShape& task, GpuSet gpus,
                                  const WorkloadProfile& profile) {
  NodeState after = state;
  subtract_task(after, task, gpus);
  return scaled_node_fragmentation(spec, after, profile) -
         scaled_node_fragmentation(spec, state, profile);
}

}  // namespace tidepool
