// What a workload asks of a pool, derived at run time from the workload's profile (its task shapes
// and their counts, as FGD derives its task-type distribution) and the pool's capacity: the two
// figures Tidepool's placement (tidepool_policy.cc) steers by. Nothing in here is fitted to a
// trace; both are exact functions of the profile and the pool.
//
// Model pressure: per GPU model, the share of its GPU capacity that the demand tied to some models
// expects to take. Each shape that accepts only some of the pool's models spreads its GPU demand
// (count x milli-GPU) over the models it accepts in proportion to their capacity; the profile's
// demand is scaled to the pool's capacity (a packing fills the pool: at 100% arrived the demand is
// the capacity); the share is capped at 1. Demand that accepts every model of the pool presses on
// none. A model the pool lacks has no pressure.
//
// CPU supply: the pool's CPU over what its GPUs, all in use, would ask at the workload's CPU per
// GPU (the CPU of the shapes that need a GPU over their GPU demand). Under 1, the pool cannot feed
// all its GPUs: some GPUs are stranded whatever the placement.
#pragma once

#include <array>
#include <optional>

#include "core/fragmentation.h"
#include "core/gpu_model.h"
#include "core/pool.h"
#include "core/task.h"

namespace tidepool {

class PoolDemand {
 public:
  [[nodiscard]] static PoolDemand of(const WorkloadProfile& profile, const Pool& pool);

  // 0..1; nullopt for a model the pool lacks.
  [[nodiscard]] std::optional<double> pressure(GpuModelId model) const {
    const double p = pressure_[model.value];
    return p < 0 ? std::nullopt : std::optional<double>(p);
  }
  // The least pressure among the pool's models that `task` accepts (0 when it accepts none).
  [[nodiscard]] double least_pressure(const TaskShape& task) const;
  // The pressure `task` adds by taking a GPU of `model` rather than one of its least pressed model:
  // how much of the capacity it takes was expected by demand with fewer choices (0..1 per GPU).
  [[nodiscard]] double displacement(const TaskShape& task, GpuModelId model) const {
    return std::max(0.0, pressure(model).value_or(0.0) - least_pressure(task));
  }
  [[nodiscard]] double cpu_supply() const { return cpu_supply_; }

 private:
  std::array<double, kMaxGpuModels> pressure_{};  // -1: the pool lacks the model
  double cpu_supply_ = 0;
};

}  // namespace tidepool
