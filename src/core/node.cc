#include "core/node.h"

#include <algorithm>

namespace tidepool {

NodeState empty_state(const NodeSpec& spec) {
  NodeState state;
  state.free_cpu = spec.milli_cpu;
  state.free_memory = spec.memory_mib;
  for (int i = 0; i < spec.gpu_count; ++i) state.free_milli[i] = kMilliPerGpu;
  // MIG: a partitioned GPU is in MIG mode from the start, offering its instances; a GPU
  // partitioned on demand takes what an empty layout takes.
  if (spec.mig_on_demand != 0) state.mig_fits = MigLayout{}.profiles_that_fit();
  for (const NodeSpec::MigPartition& partition : spec.mig_partitions) {
    const auto layout = MigLayout::partitioned(partition.instances);
    if (partition.gpu < 0 || partition.gpu >= spec.gpu_count || !layout) {
      continue;  // Pool::create refuses it
    }
    state.mig_gpus |= GpuSet{1} << partition.gpu;
    state.free_milli[partition.gpu] = 0;
    state.mig_fits = static_cast<std::uint8_t>(state.mig_fits | layout->profiles_that_fit());
  }
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
