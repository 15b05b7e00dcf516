// Tidepool's default placement. It starts from FGD's idea (place where the workload's expected
// fragmentation grows least) and fixes what costs FGD allocation:
//   1. Exact comparison. FGD squeezes the fragmentation growth through a sigmoid into an integer
//      0..100 score, so growths that differ by up to ~40 milli-GPU tie and the tie is broken at
//      random. Tidepool compares the exact integer growth.
//   2. Packing among equals. When growths are equal (often: every empty node of a model looks
//      alike), Tidepool prefers the node with the least free GPU capacity left, then the least
//      free CPU, so partly used nodes fill up before fresh ones are opened; fresh nodes stay whole
//      for the multi-GPU tasks that need them.
//   3. The same rule inside the node: the GPU whose use grows fragmentation least, then the
//      tightest fit.
#include <tuple>

#include "core/policies/fragmentation_delta.h"
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"
#include "core/policies/score_cache.h"

namespace tidepool {
namespace {

class TidepoolPolicy final : public PlacementPolicy {
 public:
  explicit TidepoolPolicy(const WorkloadProfile& profile) : profile_(profile) {}

  std::string_view name() const override { return "tidepool"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    const int slot = cache_.slot_for(task, pool.node_count());
    auto node = pick_highest_score(pool, task, [&](NodeId n) {
      const NodeState& s = pool.state(n);
      const std::uint32_t version = pool.version(n);
      const ScoredChoice* choice = cache_.find(slot, n, version);
      if (choice == nullptr) {
        cache_.store(slot, n, version, evaluate(pool.spec(n), s, task));
        choice = cache_.find(slot, n, version);
      }
      // Less growth first; then the fuller node.
      return std::tuple(choice->score, -static_cast<std::int64_t>(s.total_free_milli),
                        -s.free_cpu);
    });
    if (!node) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return Assignment{*node, cache_.find(slot, *node, pool.version(*node))->gpus};
  }

 private:
  ScoredChoice evaluate(const NodeSpec& spec, const NodeState& state, const TaskShape& task) const {
    ScoredChoice best{std::numeric_limits<std::int64_t>::min(), 0};
    MilliGpu best_free = 0;
    for_each_gpu_choice(spec, state, task, [&](GpuSet gpus) {
      const std::int64_t s = -fragmentation_growth(spec, state, task, gpus, profile_);
      MilliGpu free = 0;
      for (int g = 0; g < spec.gpu_count; ++g) {
        if (gpu_set_contains(gpus, g)) free += state.free_milli[g];
      }
      if (s > best.score || (s == best.score && free < best_free)) {
        best = {s, gpus};
        best_free = free;
      }
    });
    return best;
  }

  WorkloadProfile profile_;
  NodeScoreCache cache_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_tidepool_policy(const WorkloadProfile& profile) {
  return std::make_unique<TidepoolPolicy>(profile);
}

}  // namespace tidepool
