#include "core/service_replicas.h"

#include <algorithm>
#include <tuple>

namespace tidepool {

std::string_view replica_phase_name(ReplicaPhase phase) {
  switch (phase) {
    case ReplicaPhase::kPending:
      return "pending";
    case ReplicaPhase::kStarting:
      return "starting";
    case ReplicaPhase::kReady:
      return "ready";
    case ReplicaPhase::kDraining:
      return "draining";
  }
  return "?";
}

int live_replicas(std::span<const ReplicaView> replicas) {
  return static_cast<int>(std::count_if(replicas.begin(), replicas.end(), [](const ReplicaView& r) {
    return r.phase != ReplicaPhase::kDraining;
  }));
}

ReplicaPlan plan_replicas(std::span<const ReplicaView> replicas, int wanted) {
  ReplicaPlan plan;
  const int live = live_replicas(replicas);
  wanted = std::max(wanted, 0);
  if (wanted >= live) {
    plan.add = wanted - live;
    return plan;
  }
  // Pending, then starting, then ready; the newest first within each (then the higher id).
  std::vector<ReplicaView> order;
  for (const ReplicaView& r : replicas) {
    if (r.phase != ReplicaPhase::kDraining) order.push_back(r);
  }
  std::sort(order.begin(), order.end(), [](const ReplicaView& a, const ReplicaView& b) {
    return std::tuple(a.phase, -a.since, -static_cast<std::int64_t>(a.id)) <
           std::tuple(b.phase, -b.since, -static_cast<std::int64_t>(b.id));
  });
  for (int i = 0; i < live - wanted; ++i) {
    const ReplicaView& r = order[static_cast<std::size_t>(i)];
    switch (r.phase) {
      case ReplicaPhase::kPending:
        plan.withdraw.push_back(r.id);
        break;
      case ReplicaPhase::kStarting:
        plan.stop.push_back(r.id);
        break;
      case ReplicaPhase::kReady:
      case ReplicaPhase::kDraining:
        plan.drain.push_back(r.id);
        break;
    }
  }
  return plan;
}

}  // namespace tidepool
