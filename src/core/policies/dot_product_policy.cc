// DotProduct: Tetris' alignment score (Grandl et al., SIGCOMM'14) in the form the FGD paper
// evaluates (its "DotProd" baseline, with merged GPU dimension and max-spec normalisation):
//   free = (free CPU / 128 cores, free GPU / 8 GPUs), demand = (CPU / 128 cores, GPU / 8 GPUs),
//   score = 100 * (1 - free . demand / 2) truncated to an integer,
// highest score wins, so the node whose free resources align least with the demand is filled
// first; equal scores go to the lowest tie rank. GPUs within the node: best fit.
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

class DotProductPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "dot-product"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    const double cpu = static_cast<double>(task.milli_cpu) / kMaxSpecMilliCpu;
    const double gpu = static_cast<double>(task.total_milli_gpu()) / kMaxSpecMilliGpu;
    auto node = pick_highest_score(pool, task, [&](NodeId n) {
      const NodeState& s = pool.state(n);
      const double dot = static_cast<double>(s.free_cpu) / kMaxSpecMilliCpu * cpu +
                         static_cast<double>(s.total_free_milli) / kMaxSpecMilliGpu * gpu;
      return static_cast<std::int64_t>(100.0 * (1.0 - dot / 2.0));
    });
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return Assignment{*node, best_fit_gpus(pool.spec(*node), pool.state(*node), task)};
  }

 private:
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_dot_product_policy() {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace tidepool
