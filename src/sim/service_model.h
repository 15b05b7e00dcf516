// The simulator's inference services: what a service is (its replicas, its latency target, its
// autoscaler), the request rate it receives over time, and how its latency follows from the rate
// and its ready replicas. The cluster simulation (sim/cluster_simulation.h) drives the services
// with the core's rules: the autoscaler (core/autoscaler.h) decides the count, the replica plan
// (core/service_replicas.h) what to add or drain, the scheduler places each replica with the
// service's spread (core/replica_spread.h).
//
// The latency model: each replica serves up to `slots` (scaler.slots_per_replica) requests at
// once, each taking an
// exponential time of mean `service_s`; requests wait in one queue for the first free slot of a
// ready replica. That is an M/M/c queue with c = ready replicas x slots (core/queueing_model.h),
// taken in its steady state at each tick's rate. No ready replica, or more arriving than the
// replicas can serve: the queue grows without bound (overloaded), above any target.
//
// The rate (requests per second), at sim time t:
//   - a trace (points (t_i, r_i), the rate r_i from t_i until the next point), or
//   - a diurnal curve between `trough` and `peak`: with d the time of day of t (sim time 0 is
//     `day_offset` seconds into a day) and p = peak_at,
//       rate = trough + (peak - trough) x (1 + cos(2 pi (d - p) / 86400)) / 2
//     (the peak at p, the trough 12 h away);
//   then multiplied by the factor of every burst in force ([at, at + duration)).
// The replicas measure it: what the autoscaler observes each tick is the count of arrivals in the
// tick (Poisson, drawn from the service's seed) over the tick's length, and the mean service time.
//
// The oracle (the fewest replica-hours that meet the target, knowing the rate in advance): at each
// tick the fewest replicas whose p95 meets the target at that tick's rate (and at least
// min_replicas), ready at once, with no start-up, drain or step limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/autoscaler.h"
#include "core/ids.h"
#include "core/replica_spread.h"
#include "core/resources.h"
#include "core/rng.h"
#include "core/task.h"

namespace tidepool {

struct RateBurst {
  Seconds at = 0;        // sim time
  Seconds duration = 0;  // > 0
  double factor = 1;     // > 0
};

struct RateCurve {
  double trough = 0;  // requests/s, >= 0
  double peak = 0;    // >= trough
  Seconds peak_at = 14 * 3600;
  Seconds day_offset = 0;  // the time of day of sim time 0
  std::vector<RateBurst> bursts;
  // A trace instead of the curve: (sim time, requests/s) by time; empty: the curve.
  std::vector<std::pair<Seconds, double>> points;
};

// The rate at sim time t (see the file comment).
[[nodiscard]] double rate_at(const RateCurve& curve, Seconds t);

struct SimServiceSpec {
  std::string name;
  TenantId tenant;
  QueueId queue;
  TaskShape replica;  // one replica's GPUs (or fraction), CPU, memory and accepted models
  int priority = 1000;
  double service_s = 0.1;  // mean time to serve one request, > 0
  Seconds drain = 30;      // from the drain to the stop (its requests answered)
  Seconds tick = 10;       // how often the replicas report and the autoscaler decides
  // Min/max replicas, the p95 target and windows; slots_per_replica: the requests a replica
  // serves at once; lead: its start-up, from placement to serving.
  AutoscalerSpec scaler;
  ReplicaSpread spread;
  RateCurve rate;
  Seconds start = 0;  // the service runs over [start, end)
  Seconds end = 0;
  std::uint64_t seed = 42;
};

// One tick of a service, as reported in services.csv.
struct ServiceTick {
  Seconds time = 0;
  double rate = 0;                     // the true rate (requests/s)
  int ready = 0;                       // replicas serving
  int live = 0;                        // replicas not draining (pending, starting, ready)
  int wanted = 0;                      // the autoscaler's count
  int oracle = 0;                      // the oracle's count
  std::optional<std::int64_t> p95_ms;  // nullopt: overloaded
};

struct SimServiceResult {
  std::string name;
  std::int64_t target_ms = 0;
  Seconds seconds = 0;               // ticks' time measured
  Seconds seconds_above_target = 0;  // of which the p95 was above the target (or overloaded)
  double replica_hours = 0;          // replicas held (placed), start-up and drain included
  double gpu_hours = 0;              // their GPUs
  double oracle_replica_hours = 0;
  int max_replicas_held = 0;
  int decisions = 0;  // ticks whose decision changed the count
  std::string last_reason;
  std::vector<ServiceTick> ticks;

  // The share of the time measured above the target (0 with none measured).
  [[nodiscard]] double above_target_share() const {
    return seconds > 0 ? static_cast<double>(seconds_above_target) / static_cast<double>(seconds)
                       : 0.0;
  }
  // Replica-hours over the oracle's (0 without an oracle's).
  [[nodiscard]] double replica_hours_over_oracle() const {
    return oracle_replica_hours > 0 ? replica_hours / oracle_replica_hours : 0.0;
  }
};

// The p95 in ms of `ready` replicas at `rate` (nullopt: overloaded or none ready).
[[nodiscard]] std::optional<std::int64_t> service_p95_ms(const SimServiceSpec& spec, double rate,
                                                         int ready);
// The oracle's replicas at `rate`.
[[nodiscard]] int oracle_replicas(const SimServiceSpec& spec, double rate);
// What the replicas report for a tick at `rate` (arrivals drawn from `rng`).
[[nodiscard]] Observation observe_service(const SimServiceSpec& spec, Seconds at, double rate,
                                          int ready, Rng& rng);

}  // namespace tidepool
