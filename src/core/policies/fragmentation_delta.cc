#include "core/policies/fragmentation_delta.h"

#include <cmath>
#include <limits>

namespace tidepool {

// The terms of scaled_node_fragmentation before and after, side by side: per typical task, one
// pass over the GPUs for the state before, then only the GPUs taken for the state after.
std::int64_t fragmentation_growth(const NodeSpec& spec, const NodeState& state,
                                  const TaskShape& task, GpuSet gpus,
                                  const WorkloadProfile& profile) {
  const int gpu_count = spec.gpu_count;
  const MilliCpu cpu_after = state.free_cpu - task.milli_cpu;
  std::int64_t idle = 0;
  for (int g = 0; g < gpu_count; ++g) idle += state.free_milli[g];
  int taken = 0;
  for (int g = 0; g < gpu_count; ++g) taken += gpu_set_contains(gpus, g) ? 1 : 0;
  const std::int64_t idle_after = idle - std::int64_t{taken} * task.milli_per_gpu;
  if (idle == 0 && idle_after == 0) return 0;

  std::int64_t before = 0, after = 0;
  for (const TypicalTask& typical : profile.tasks()) {
    const TaskShape& t = typical.shape;
    if (!t.needs_gpu()) {
      before += typical.count * idle;
      after += typical.count * idle_after;
      continue;
    }
    const bool model = t.models.accepts(spec.model);
    const bool cpu_before = model && state.free_cpu >= t.milli_cpu;
    const bool cpu_now = model && cpu_after >= t.milli_cpu;
    if (!cpu_before && !cpu_now) {
      before += typical.count * idle;
      after += typical.count * idle_after;
      continue;
    }
    std::int64_t below = 0;
    int with_share = 0;
    for (int g = 0; g < gpu_count; ++g) {
      const MilliGpu free = state.free_milli[g];
      if (free >= t.milli_per_gpu) {
        ++with_share;
      } else {
        below += free;
      }
    }
    std::int64_t below_after = below;
    int with_share_after = with_share;
    for (int g = 0; g < gpu_count; ++g) {
      if (!gpu_set_contains(gpus, g)) continue;
      const MilliGpu free = state.free_milli[g];
      const MilliGpu left = free - task.milli_per_gpu;
      if (free >= t.milli_per_gpu) {
        --with_share_after;
      } else {
        below_after -= free;
      }
      if (left >= t.milli_per_gpu) {
        ++with_share_after;
      } else {
        below_after += left;
      }
    }
    const bool usable_before = cpu_before && with_share >= t.gpu_count;
    const bool usable_after = cpu_now && with_share_after >= t.gpu_count;
    before += typical.count * (usable_before ? below : idle);
    after += typical.count * (usable_after ? below_after : idle_after);
  }
  return (idle_after == 0 ? 0 : after) - (idle == 0 ? 0 : before);
}

ScoredChoice best_fragmentation_choice(const NodeSpec& spec, const NodeState& state,
                                       const TaskShape& task, const WorkloadProfile& profile,
                                       double extra_gpus) {
  const double scale = 1000.0 * static_cast<double>(profile.total_count());
  ScoredChoice best{std::numeric_limits<std::int64_t>::min(), 0};
  for_each_gpu_choice(spec, state, task, [&](GpuSet gpus) {
    const double growth =
        static_cast<double>(fragmentation_growth(spec, state, task, gpus, profile)) / scale +
        extra_gpus;
    const auto score = static_cast<std::int64_t>(100.0 / (1.0 + std::exp(growth)));
    if (score > best.score) best = {score, gpus};
  });
  return best;
}

}  // namespace tidepool
