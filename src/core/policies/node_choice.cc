#include "core/policies/node_choice.h"

namespace tidepool {

std::optional<NodeId> pick_random_fit(const Pool& pool, const TaskShape& task, Rng& rng,
                                      std::vector<NodeId>& scratch) {
  scratch.clear();
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(pool.node_count()); ++i) {
    if (fits(pool.specs()[i], pool.states()[i], task)) scratch.push_back(NodeId{i});
  }
  if (scratch.empty()) return std::nullopt;
  return scratch[rng.below(scratch.size())];
}

GpuSet lowest_whole_free_gpus(const NodeSpec& spec, const NodeState& state, int count) {
  GpuSet chosen = 0;
  for (int g = 0; g < spec.gpu_count && count > 0; ++g) {
    if (state.free_milli[g] == kMilliPerGpu) {
      chosen |= single_gpu(g);
      --count;
    }
  }
  return count == 0 ? chosen : 0;
}

int tightest_gpu(const NodeSpec& spec, const NodeState& state, MilliGpu share) {
  int best = -1;
  for (int g = 0; g < spec.gpu_count; ++g) {
    const MilliGpu free = state.free_milli[g];
    if (free >= share && (best < 0 || free < state.free_milli[best])) best = g;
  }
  return best;
}

int random_gpu_with_share(const NodeSpec& spec, const NodeState& state, MilliGpu share, Rng& rng) {
  int candidates[kMaxGpusPerNode];
  int n = 0;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (state.free_milli[g] >= share) candidates[n++] = g;
  }
  if (n == 0) return -1;
  return candidates[rng.below(static_cast<std::uint64_t>(n))];
}

GpuSet best_fit_gpus(const NodeSpec& spec, const NodeState& state, const TaskShape& task) {
  if (!task.needs_gpu()) return 0;
  if (task.is_fractional()) {
    const int g = tightest_gpu(spec, state, task.milli_per_gpu);
    return g < 0 ? 0 : single_gpu(g);
  }
  return lowest_whole_free_gpus(spec, state, task.gpu_count);
}

void subtract_task(NodeState& state, const TaskShape& task, GpuSet gpus) {
  state.free_cpu -= task.milli_cpu;
  state.free_memory -= task.memory_mib;
  for (int g = 0; g < kMaxGpusPerNode; ++g) {
    if (gpu_set_contains(gpus, g)) state.free_milli[g] -= task.milli_per_gpu;
  }
}

}  // namespace tidepool
