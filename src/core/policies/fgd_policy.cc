// FGD, Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC'23,
// section 4): place the task where the node's fragmentation (see core/fragmentation.h) grows
// least. As in the paper's implementation, the growth d (in milli-GPUs) is turned into a
// kube-scheduler score floor(100 * sigmoid(-d / 1000)), so nodes whose growth differs by little
// score alike, and equal scores go to the lowest tie rank (the authors' simulator takes the
// smallest node name, the names carrying a random per-run prefix). For a GPU fraction every GPU
// with the share free is tried and the one with the best score taken (lowest index on ties); whole
// GPUs are the lowest-indexed free ones.
#include "core/policies/fragmentation_delta.h"
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"
#include "core/policies/score_cache.h"
#include "core/policies/score_index.h"

namespace tidepool {
namespace {

class FgdPolicy final : public PlacementPolicy {
 public:
  FgdPolicy(const WorkloadProfile& profile, ScoreLookup lookup)
      : profile_(profile), lookup_(lookup) {}

  std::string_view name() const override { return "fgd"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    auto chosen = place_among(pool, task, {});
    if (!chosen) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return *chosen;
  }

  [[nodiscard]] bool places_among() const override { return true; }

  std::optional<Assignment> place_among(const Pool& pool, const TaskShape& task,
                                        std::span<const std::uint8_t> allowed) override {
    const auto evaluate = [&](NodeId n) {
      return best_fragmentation_choice(pool.spec(n), pool.state(n), task, profile_);
    };
    // The score reads the task's CPU and GPUs, not its memory (fragmentation ignores memory).
    return place_by_score(pool, task, lookup_ == ScoreLookup::kIndex ? &index_ : nullptr, cache_,
                          evaluate, TaskInScore::kAllButMemory, allowed);
  }

 private:
  WorkloadProfile profile_;
  ScoreLookup lookup_;
  NodeScoreCache cache_;
  NodeScoreIndex index_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_fgd_policy(const WorkloadProfile& profile,
                                                 ScoreLookup lookup) {
  return std::make_unique<FgdPolicy>(profile, lookup);
}

}  // namespace tidepool
