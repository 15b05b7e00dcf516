// Random: a node drawn uniformly among those where the task fits, and for a GPU fraction a GPU
// drawn uniformly among those with the share free; whole GPUs are the lowest-indexed free ones.
// Source: the "Random" baseline of FGD (Weng et al., ATC'23, section 6.1).
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"

namespace tidepool {
namespace {

class RandomPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "random"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& rng) override {
    auto node = pick_random_fit(pool, task, rng, scratch_);
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    const NodeSpec& spec = pool.spec(*node);
    const NodeState& state = pool.state(*node);
    GpuSet gpus = 0;
    if (task.is_fractional()) {
      gpus = single_gpu(random_gpu_with_share(spec, state, task.milli_per_gpu, rng));
    } else if (task.needs_gpu()) {
      gpus = lowest_whole_free_gpus(spec, state, task.gpu_count);
    }
    return Assignment{*node, gpus};
  }

 private:
  std::vector<NodeId> scratch_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_random_policy() { return std::make_unique<RandomPolicy>(); }

}  // namespace tidepool
