// BestFit: the node with the least resources left after placement (FGD paper's "Best-fit"
// baseline, after Kubernetes' MostAllocated): with equal weights for CPU and GPU,
//   left = 0.5 * (free CPU - CPU) / 128 cores + 0.5 * (free GPU - GPU) / 8 GPUs,
//   score = 100 * (1 - left) truncated to an integer, highest wins, equal scores go to the
//   lowest tie rank (node_choice.h).
// GPUs within the node: best fit.
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

class BestFitPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "best-fit"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    auto node = pick_highest_score(pool, task, [&](NodeId n) {
      const NodeState& s = pool.state(n);
      const double left =
          0.5 * static_cast<double>(s.free_cpu - task.milli_cpu) / kMaxSpecMilliCpu +
          0.5 * static_cast<double>(s.total_free_milli - task.total_milli_gpu()) / kMaxSpecMilliGpu;
      return static_cast<std::int64_t>(100.0 * (1.0 - left));
    });
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return Assignment{*node, best_fit_gpus(pool.spec(*node), pool.state(*node), task)};
  }

 private:
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_best_fit_policy() {
  return std::make_unique<BestFitPolicy>();
}

}  // namespace tidepool
