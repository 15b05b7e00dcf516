// GpuPacking: fill partly used GPUs first, then free GPUs of partly used nodes, and open an idle
// node last (FGD paper's "GPU Packing" baseline). Scores, highest first:
//   fits on partly used GPUs:        100 - (sum of their free share in %) / 10, at least 50;
//   needs wholly free GPUs of a used node: 50 - (number of them), at least 33;
//   idle node:                       33 - (its GPU count), at least its GPU count.
// The GPUs considered are those with the least free share that still hold the task. CPU-only
// tasks score 0 everywhere (the lowest-ranked feasible node). GPUs within the node: best fit.
#include <algorithm>

#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

std::int64_t packing_score(const NodeSpec& spec, const NodeState& s, const TaskShape& task) {
  const int gpus = spec.gpu_count;
  if (s.whole_free_gpus == gpus) {
    return std::max<std::int64_t>(33 - gpus, gpus);
  }
  // GPU indexes by free share ascending, index order among equals.
  int order[kMaxGpusPerNode];
  for (int g = 0; g < gpus; ++g) order[g] = g;
  std::stable_sort(order, order + gpus,
                   [&](int a, int b) { return s.free_milli[a] < s.free_milli[b]; });
  int needed = task.gpu_count;
  int whole_used = 0;
  std::int64_t free_percent_used = 0;
  for (int k = 0; k < gpus && needed > 0; ++k) {
    const MilliGpu free = s.free_milli[order[k]];
    if (free < task.milli_per_gpu) continue;
    --needed;
    if (free == kMilliPerGpu) ++whole_used;
    free_percent_used += std::int64_t{free} * 100 / kMilliPerGpu;
  }
  if (whole_used > 0) return std::max<std::int64_t>(50 - whole_used, 33);
  return std::max<std::int64_t>(100 - free_percent_used / 10, 50);
}

class GpuPackingPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "gpu-packing"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    auto node = pick_highest_score(pool, task, [&](NodeId n) -> std::int64_t {
      if (!task.needs_gpu()) return 0;
      return packing_score(pool.spec(n), pool.state(n), task);
    });
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return Assignment{*node, best_fit_gpus(pool.spec(*node), pool.state(*node), task)};
  }

 private:
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_gpu_packing_policy() {
  return std::make_unique<GpuPackingPolicy>();
}

}  // namespace tidepool
