#include "agent/gpu_hold.h"

#include <algorithm>

namespace tidepool {

namespace {

constexpr int kWholeGpu = 1000;

bool is_share(std::span<const int> gpus, const std::optional<MigInstance>& mig, int milli) {
  return !mig && gpus.size() == 1 && milli > 0 && milli < kWholeGpu;
}

}  // namespace

void GpuHold::add(std::span<const int> gpus, const std::optional<MigInstance>& mig, int milli) {
  if (mig && gpus.size() == 1) {
    if (instances_[gpus.front()].add(*mig)) return;
  } else if (is_share(gpus, mig, milli)) {
    int& held = shares_[gpus.front()];
    if (held + milli <= kWholeGpu) {
      held += milli;
      return;
    }
  }
  whole_.insert(gpus.begin(), gpus.end());
}

bool GpuHold::free_for(std::span<const int> gpus, const std::optional<MigInstance>& mig,
                       int milli) const {
  if (std::ranges::any_of(gpus, [&](int g) { return whole_.contains(g); })) return false;
  const auto share_held = [&](int g) {
    const auto held = shares_.find(g);
    return held == shares_.end() ? 0 : held->second;
  };
  const auto instances_held = [&](int g) {
    const auto held = instances_.find(g);
    return held != instances_.end() && !held->second.empty();
  };
  if (mig && gpus.size() == 1) {
    if (share_held(gpus.front()) > 0) return false;
    const auto held = instances_.find(gpus.front());
    return held == instances_.end() || held->second.fits(mig->profile, mig->start);
  }
  if (is_share(gpus, mig, milli)) {
    return !instances_held(gpus.front()) && share_held(gpus.front()) + milli <= kWholeGpu;
  }
  return std::ranges::none_of(gpus, [&](int g) { return instances_held(g) || share_held(g) > 0; });
}

}  // namespace tidepool
