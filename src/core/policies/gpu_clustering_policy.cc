// GpuClustering: keep tasks of the same GPU demand together, so that nodes specialise (FGD
// paper's "GPU Clustering" baseline, after Alibaba's production heuristic). Tasks are classed by
// demand (a GPU fraction, or k whole GPUs); a node scores, by the classes already running there,
//   (75, 100] only the task's own class, (50, 75] its class among others,
//   (25, 50]  an idle node,               [0, 25]  only other classes,
// and within each band more allocated GPU scores higher: band + 25 * (8000 - free milli) / 8000
// (integer arithmetic). CPU-only tasks score 0 everywhere (the lowest-ranked feasible node). GPUs
// within the node: best fit.
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

class GpuClusteringPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "gpu-clustering"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    const int own = task_class(task);
    auto node = pick_highest_score(pool, task, [&](NodeId n) -> std::int64_t {
      if (own == kCpuOnlyClass) return 0;
      const NodeState& s = pool.state(n);
      int classes_present = 0;
      for (int c = kFractionalClass; c < kTaskClassCount; ++c) {
        if (s.tasks_by_class[c] > 0) ++classes_present;
      }
      const std::int64_t used = std::int64_t{25} *
                                (static_cast<std::int64_t>(kMaxSpecMilliGpu) - s.total_free_milli) /
                                static_cast<std::int64_t>(kMaxSpecMilliGpu);
      std::int64_t band = 0;
      if (s.tasks_by_class[own] > 0) {
        band = classes_present == 1 ? 75 : 50;
      } else if (classes_present == 0) {
        band = 25;
      }
      return band + used;
    });
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return Assignment{*node, best_fit_gpus(pool.spec(*node), pool.state(*node), task)};
  }

 private:
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_gpu_clustering_policy() {
  return std::make_unique<GpuClusteringPolicy>();
}

}  // namespace tidepool
