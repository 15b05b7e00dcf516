#include "core/policies/pool_demand.h"

#include <algorithm>
#include <limits>

namespace tidepool {

PoolDemand PoolDemand::of(const WorkloadProfile& profile, const Pool& pool) {
  std::array<double, kMaxGpuModels> capacity{};  // milli-GPU per model
  for (const NodeSpec& spec : pool.specs()) {
    // A node without GPUs may name a model outside the catalog.
    if (spec.gpu_count > 0)
      capacity[spec.model.value] += static_cast<double>(spec.gpu_count) * kMilliPerGpu;
  }
  const auto pool_gpu = static_cast<double>(pool.capacity_milli_gpu());
  const auto pool_cpu = static_cast<double>(pool.capacity_milli_cpu());
  std::array<double, kMaxGpuModels> tied{};  // milli-GPU of model-tied demand, per model
  double demand = 0;
  double demand_cpu = 0;
  for (const TypicalTask& shape : profile.all_shapes()) {
    if (!shape.shape.needs_gpu()) continue;
    const double gpu = static_cast<double>(shape.count * shape.shape.total_milli_gpu());
    demand += gpu;
    demand_cpu += static_cast<double>(shape.count * shape.shape.milli_cpu);
    double accepted = 0;
    bool everywhere = true;
    for (int m = 0; m < kMaxGpuModels; ++m) {
      if (capacity[m] <= 0) continue;
      if (shape.shape.models.accepts(GpuModelId{static_cast<std::uint32_t>(m)})) {
        accepted += capacity[m];
      } else {
        everywhere = false;
      }
    }
    if (everywhere || accepted <= 0) continue;
    for (int m = 0; m < kMaxGpuModels; ++m) {
      if (capacity[m] > 0 &&
          shape.shape.models.accepts(GpuModelId{static_cast<std::uint32_t>(m)})) {
        tied[m] += gpu * capacity[m] / accepted;
      }
    }
  }
  PoolDemand out;
  for (int m = 0; m < kMaxGpuModels; ++m) {
    if (capacity[m] <= 0) {
      out.pressure_[m] = -1;
    } else if (demand > 0) {
      out.pressure_[m] = std::min(1.0, tied[m] / demand * pool_gpu / capacity[m]);
    }
  }
  out.cpu_supply_ = demand_cpu > 0 && pool_gpu > 0 ? pool_cpu / (demand_cpu / demand * pool_gpu)
                                                   : std::numeric_limits<double>::infinity();
  return out;
}

double PoolDemand::least_pressure(const TaskShape& task) const {
  double least = std::numeric_limits<double>::infinity();
  for (int m = 0; m < kMaxGpuModels; ++m) {
    if (pressure_[m] >= 0 && task.models.accepts(GpuModelId{static_cast<std::uint32_t>(m)})) {
      least = std::min(least, pressure_[m]);
    }
  }
  return least == std::numeric_limits<double>::infinity() ? 0 : least;
}

}  // namespace tidepool
