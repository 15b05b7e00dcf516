// Tidepool's default placement: FGD's fragmentation gradient, plus the GPU capacity a placement
// strands behind exhausted CPU, plus the capacity it takes from demand with fewer model choices.
//
// FGD (fgd_policy.cc) places a task where the workload's expected fragmentation grows least. Two
// things it does not see, each a growth in GPUs added to FGD's (every term is in GPUs, added as
// it is; the sum goes through FGD's own scoring, an integer 0..100 from a sigmoid, equal scores to
// the lowest tie rank):
//
//   - Stranding. FGD looks at CPU only one task ahead: a node whose CPU drains faster than its
//     GPUs looks fine until its remaining GPUs can no longer be fed (on the openb default trace,
//     at 100% arrived, nine tenths of the GPU demand FGD turns away had GPU room on some node that
//     had run out of CPU). A node's stranded GPU capacity is the GPU share beyond what its free
//     CPU can feed at the node's own CPU-per-GPU ratio,
//       stranded = max(0, free GPU - free CPU x (GPUs x 1000) / CPU capacity)   [milli-GPU],
//     and a task on one GPU adds its growth, so each node's CPU and GPUs drain together.
//   - Model pressure (pool_demand.h). Demand tied to some GPU models expects part of their
//     capacity; a task that takes a GPU of a pressed model while it accepts a less pressed one
//     takes capacity that demand with fewer choices needed: it adds, per GPU it takes, the
//     difference of the two pressures. So demand that can use only some models finds room on
//     them, and demand that can use any goes elsewhere first.
//
// Both are derived at run time from the workload's profile and the pool (pool_demand.h), and both
// apply only where the pool can feed its GPUs (CPU supply >= 1): when it cannot, some GPUs strand
// whatever the placement, CPU rather than models or GPUs binds, and FGD's own measure (which sees
// a node's GPUs that lack CPU as fragments) is what to follow. Where neither applies Tidepool
// places exactly as FGD does. Measured on the FGD traces and on pools derived from openb's (half
// and double the CPU, half the memory, nodes of 2, 4 and 8 GPUs, other model mixes): README,
// "Why Tidepool's policy beats FGD".
//
// Limits, measured:
//   - Only tasks on one GPU (a whole GPU or a fraction) are steered by stranding. CPU-only tasks
//     already go, by FGD's measure, where they block no typical task; steering them as well cost
//     0.85 pp of allocation on the trace with most CPU-only tasks (cpu250). Multi-GPU tasks need
//     wholly free GPUs, mostly whole nodes that FGD keeps together for them.
//   - The GPU within the node is chosen as FGD chooses it: stranding and pressure are the same
//     for every GPU choice on a node.
//   - The scores depend only on the node, the task (not its memory) and what the profile and the
//     pool's capacity give once, and are equal for GPUs of equal free share, so the index
//     (score_index.h) serves Tidepool as it serves FGD.
#include <algorithm>
#include <optional>

#include "core/policies/fragmentation_delta.h"
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"
#include "core/policies/pool_demand.h"
#include "core/policies/score_cache.h"
#include "core/policies/score_index.h"

namespace tidepool {
namespace {

class TidepoolPolicy final : public PlacementPolicy {
 public:
  TidepoolPolicy(const WorkloadProfile& profile, ScoreLookup lookup)
      : profile_(profile), lookup_(lookup) {}

  std::string_view name() const override { return "tidepool"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    auto chosen = place_among(pool, task, {});
    if (!chosen) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return *chosen;
  }

  [[nodiscard]] bool places_among() const override { return true; }

  std::optional<Assignment> place_among(const Pool& pool, const TaskShape& task,
                                        std::span<const std::uint8_t> allowed) override {
    // The pool's capacity is the same in every pool the policy is asked about (the scheduler's
    // trial copies are copies of one pool; PoolDemand reads the nodes' specs, not their state).
    if (!demand_) demand_ = PoolDemand::of(profile_, pool);
    return place_by_score(
        pool, task, lookup_ == ScoreLookup::kIndex ? &index_ : nullptr, cache_,
        [&](NodeId n) { return evaluate(pool.spec(n), pool.state(n), task); },
        TaskInScore::kAllButMemory, allowed);
  }

 private:
  ScoredChoice evaluate(const NodeSpec& spec, const NodeState& state, const TaskShape& task) {
    double steering = 0;  // milli-GPU, the same for every GPU choice on this node
    if (demand_->cpu_supply() >= 1.0 && task.needs_gpu()) {
      steering +=
          demand_->displacement(task, spec.model) * static_cast<double>(task.total_milli_gpu());
      if (task.gpu_count == 1) {
        steering += stranded(spec, state.total_free_milli - task.total_milli_gpu(),
                             state.free_cpu - task.milli_cpu) -
                    stranded(spec, state.total_free_milli, state.free_cpu);
      }
    }
    return best_fragmentation_choice(spec, state, task, profile_, steering / 1000.0);
  }

  // GPU share (milli) of the node that its free CPU cannot feed at the node's own ratio.
  static double stranded(const NodeSpec& spec, std::int64_t free_milli_gpu, MilliCpu free_cpu) {
    if (spec.milli_cpu <= 0) return static_cast<double>(free_milli_gpu);
    const double fed = static_cast<double>(free_cpu) * spec.gpu_count * kMilliPerGpu /
                       static_cast<double>(spec.milli_cpu);
    return std::max(0.0, static_cast<double>(free_milli_gpu) - fed);
  }

  WorkloadProfile profile_;
  ScoreLookup lookup_;
  NodeScoreCache cache_;
  NodeScoreIndex index_;
  std::optional<PoolDemand> demand_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_tidepool_policy(const WorkloadProfile& profile,
                                                      ScoreLookup lookup) {
  return std::make_unique<TidepoolPolicy>(profile, lookup);
}

}  // namespace tidepool
