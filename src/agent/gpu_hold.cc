#include "agent/gpu_hold.h"

#include <algorithm>

namespace tidepool {

void GpuHold::add(std::span<const int> gpus, const std::optional<MigInstance>& mig) {
  if (mig && gpus.size() == 1) {
    if (instances_[gpus.front()].add(*mig)) return;
  }
  whole_.insert(gpus.begin(), gpus.end());
}

bool GpuHold::free_for(std::span<const int> gpus, const std::optional<MigInstance>& mig) const {
  if (std::ranges::any_of(gpus, [&](int g) { return whole_.contains(g); })) return false;
  if (mig && gpus.size() == 1) {
    const auto held = instances_.find(gpus.front());
    return held == instances_.end() || held->second.fits(mig->profile, mig->start);
  }
  return std::ranges::none_of(gpus, [&](int g) {
    const auto held = instances_.find(g);
    return held != instances_.end() && !held->second.empty();
  });
}

}  // namespace tidepool
