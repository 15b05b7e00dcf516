// What a service does to its replicas to reach the count its autoscaler wants: how many to add
// and which to take away. One rule for the simulator's services and the server's.
//
// A replica is pending (waiting for a place), starting (placed, not serving yet), ready (serving)
// or draining (taken out of service: no new requests; it stops once its requests are answered).
// Draining replicas do not count: a replica that dies is simply gone from the list, and the count
// falls short, so it is replaced.
//
// Taking away, the replicas that serve nothing go first, so that no request is cut and nothing
// placed is stopped while a waiting one could go instead: pending ones (withdrawn, the newest
// first), then starting ones (stopped at once, the newest first), then ready ones (drained, the
// newest first: the oldest have proven themselves and are warm).
//
// Pure: the replicas in, a plan out; the caller submits, withdraws, stops and drains.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/resources.h"

namespace tidepool {

enum class ReplicaPhase : std::uint8_t { kPending, kStarting, kReady, kDraining };
// "pending", "starting", "ready", "draining"
[[nodiscard]] std::string_view replica_phase_name(ReplicaPhase phase);

struct ReplicaView {
  std::uint32_t id = 0;  // the caller's: a job id
  ReplicaPhase phase = ReplicaPhase::kPending;
  Seconds since = 0;  // when it was submitted (the newest goes first)
};

struct ReplicaPlan {
  int add = 0;                          // new replicas to submit
  std::vector<std::uint32_t> withdraw;  // pending: withdraw
  std::vector<std::uint32_t> stop;      // starting: stop now (serving nothing yet)
  std::vector<std::uint32_t> drain;     // ready: stop sending them requests, then stop them
};

// The replicas that count (all but draining ones).
[[nodiscard]] int live_replicas(std::span<const ReplicaView> replicas);

// The plan that brings the live replicas to `wanted` (>= 0).
[[nodiscard]] ReplicaPlan plan_replicas(std::span<const ReplicaView> replicas, int wanted);

}  // namespace tidepool
