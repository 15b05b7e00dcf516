// Tidepool's default placement: FGD's fragmentation gradient, plus the GPU capacity a placement
// strands behind exhausted CPU.
//
// FGD (fgd_policy.cc) places a task where the workload's expected fragmentation grows least, and
// looks at CPU only one task ahead: a typical task that lacks CPU on a node sees that node's idle
// GPUs as fragment, but a node whose CPU drains faster than its GPUs looks fine until it is too
// late. On the openb traces this is what FGD loses: at 100% of capacity arrived, nine tenths of
// the GPU demand it turns away had GPU room on some node that had run out of CPU.
//
// Tidepool adds to FGD's fragmentation growth the growth of the node's stranded GPU capacity:
// the GPU share beyond what the node's free CPU can feed at the node's own CPU-per-GPU ratio,
//   stranded = max(0, free GPU - free CPU x (GPUs x 1000) / CPU capacity)   [milli-GPU],
// so tasks whose CPU-to-GPU mix would drain a node's CPU first go where CPU is plentiful, and each
// node's CPU and GPUs drain together. Both terms are milli-GPUs and are added as they are; the sum
// goes through FGD's own scoring (an integer 0..100 from a sigmoid, equal scores to the lowest
// tie rank), whose coarse grain packs equally good nodes in a consistent order.
//
// Three limits, each measured on the FGD traces (see README, "Results"):
//   - Only tasks on one GPU (a whole GPU or a fraction) are steered by stranding. CPU-only tasks
//     already go, by FGD's measure, where they block no typical task; steering them as well cost
//     0.85 pp of allocation on the trace with most CPU-only tasks (cpu250). Multi-GPU tasks need
//     wholly free GPUs, mostly whole nodes that FGD keeps together for them; steering them by CPU
//     cost up to 0.1 pp on the multigpu traces.
//   - Only on nodes whose GPU model (nearly) all of the workload's GPU demand accepts. Where part
//     of the demand is tied to particular models, FGD's measure keeps those models for it, and
//     steering other work by CPU onto them cost 3 to 4 pp on the gpuspec traces.
// The GPU within the node is chosen as FGD chooses it, so where stranding does not apply
// Tidepool places exactly as FGD does.
#include <array>
#include <cmath>
#include <optional>

#include "core/policies/fragmentation_delta.h"
#include "core/policies/node_choice.h"
#include "core/policies/policy_factories.h"
#include "core/policies/score_cache.h"
#include "core/policies/score_index.h"

namespace tidepool {
namespace {

// Share of the workload's GPU demand (count x milli-GPU, over every shape) above which a model
// counts as accepted by all of it.
constexpr double kUniversalModelShare = 0.99;

class TidepoolPolicy final : public PlacementPolicy {
 public:
  TidepoolPolicy(const WorkloadProfile& profile, ScoreLookup lookup)
      : profile_(profile), lookup_(lookup) {}

  std::string_view name() const override { return "tidepool"; }

  PlacementResult place(const Pool& pool, const TaskShape& task, Rng& /*rng*/) override {
    auto chosen = place_by_score(
        pool, task, lookup_ == ScoreLookup::kIndex ? &index_ : nullptr, cache_,
        [&](NodeId n) { return evaluate(pool.spec(n), pool.state(n), task); },
        TaskInScore::kAllButMemory);
    if (!chosen) return std::unexpected(Unplaceable{explain_unplaceable(pool, task)});
    return *chosen;
  }

 private:
  ScoredChoice evaluate(const NodeSpec& spec, const NodeState& state, const TaskShape& task) {
    const double scale = 1000.0 * static_cast<double>(profile_.total_count());
    double stranding = 0;  // milli-GPU, the same for every GPU choice on this node
    if (task.gpu_count == 1 && accepted_by_all_demand(spec.model)) {
      stranding = stranded(spec, state.total_free_milli - task.total_milli_gpu(),
                           state.free_cpu - task.milli_cpu) -
                  stranded(spec, state.total_free_milli, state.free_cpu);
    }
    ScoredChoice best{std::numeric_limits<std::int64_t>::min(), 0};
    for_each_gpu_choice(spec, state, task, [&](GpuSet gpus) {
      const double growth =
          static_cast<double>(fragmentation_growth(spec, state, task, gpus, profile_)) / scale +
          stranding / 1000.0;
      const auto score = static_cast<std::int64_t>(100.0 / (1.0 + std::exp(growth)));
      if (score > best.score) best = {score, gpus};
    });
    return best;
  }

  // GPU share (milli) of the node that its free CPU cannot feed at the node's own ratio.
  static double stranded(const NodeSpec& spec, std::int64_t free_milli_gpu, MilliCpu free_cpu) {
    if (spec.milli_cpu <= 0) return static_cast<double>(free_milli_gpu);
    const double fed = static_cast<double>(free_cpu) * spec.gpu_count * kMilliPerGpu /
                       static_cast<double>(spec.milli_cpu);
    return std::max(0.0, static_cast<double>(free_milli_gpu) - fed);
  }

  bool accepted_by_all_demand(GpuModelId model) {
    std::optional<bool>& known = universal_[model.value];
    if (!known) {
      double accepting = 0, all = 0;
      for (const TypicalTask& shape : profile_.all_shapes()) {
        if (!shape.shape.needs_gpu()) continue;
        const double demand = static_cast<double>(shape.count * shape.shape.total_milli_gpu());
        all += demand;
        if (shape.shape.models.accepts(model)) accepting += demand;
      }
      known = all > 0 && accepting >= kUniversalModelShare * all;
    }
    return *known;
  }

  WorkloadProfile profile_;
  ScoreLookup lookup_;
  NodeScoreCache cache_;
  NodeScoreIndex index_;
  std::array<std::optional<bool>, kMaxGpuModels> universal_{};
};

}  // namespace

std::unique_ptr<PlacementPolicy> make_tidepool_policy(const WorkloadProfile& profile,
                                                      ScoreLookup lookup) {
  return std::make_unique<TidepoolPolicy>(profile, lookup);
}

}  // namespace tidepool
