#include "core/node.h"

#include <algorithm>

namespace tidepool {

NodeState empty_state(const NodeSpec& spec) {
  NodeState state;
  state.free_cpu = spec.milli_cpu;
  state.free_memory = spec.memory_mib;
  for (int i = 0; i < spec.gpu_count; ++i) state.free_milli[i] = kMilliPerGpu;
  refresh_summary(state, spec.gpu_count);
  return state;
}

void refresh_summary(NodeState& state, int gpu_count) {
  state.whole_free_gpus = 0;
  state.max_free_milli = 0;
  state.total_free_milli = 0;
  for (int i = 0; i < gpu_count; ++i) {
    const MilliGpu free = state.free_milli[i];
    if (free == kMilliPerGpu) ++state.whole_free_gpus;
    state.max_free_milli = std::max(state.max_free_milli, free);
    state.total_free_milli += free;
  }
}

}  // namespace tidepool
