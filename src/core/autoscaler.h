// The autoscaler of inference services: from what the replicas report, how many replicas a
// service wants. Pure and deterministic (the caller gives the time and the figures); the
// simulator's services and the server's use this one rule.
//
// The figures (Observation): every report, the service's ready replicas and one value of its
// metric: the requests waiting (queue_per_replica) or in flight (concurrency_per_replica) summed
// over its replicas, or its p95 latency in milliseconds (p95_latency_ms).
//
// The rule, at each decide(now, current):
//   - The wanted count from a window's mean value. Queue and concurrency add up over replicas:
//     ceil(mean / target). Latency does not: the current count scaled by mean / target (as
//     Kubernetes' HPA scales on a per-pod metric), ceil(current x mean / target).
//   - Latency with the load's figures (every report of the window gives the request rate and
//     the mean service time): the queueing model (core/queueing_model.h, M/M/c with c = replicas
//     x slots_per_replica) gives the fewest replicas whose p95 meets the target at the planned
//     rate. The rate does not depend on the replicas, so this does not oscillate as the ratio
//     rule can on a latency curve that is flat until saturation. The planned rate is the
//     window's mean rate plus its rise (the least-squares slope less twice its standard error,
//     so that noise does not count as a rise; never negative) over the time until a
//     replica asked for now serves and the next step may be taken: half the window (the mean's
//     lag on a ramp) + up_period + lead (the replicas' start-up). No tolerance here: the model's
//     count is what meets the target.
//   - Stable: the mean over `stable_window` (60 s by default, Knative's). Within `tolerance` (10%)
//     of the current count's capacity the count stays (no flapping on noise).
//   - Panic: the mean over `panic_window` (6 s) asks for at least `panic_percent` (200%) of the
//     current count: the service scales up to it at once, and while panicking (until a
//     stable_window has passed without such a burst) it never scales down (Knative's KPA).
//   - Up: at most one step per `up_period` (15 s), of at most max(4, 100% of current) replicas
//     (HPA's default rule).
//   - Down: the highest count wanted over the last `down_window` (300 s: KEDA's, HPA's
//     stabilisation), so that a dip does not drop replicas a minute before the load returns; at
//     most one step per `down_period` (60 s), of at most half the replicas. The caller drains the
//     replicas it removes.
//   - Always within [min_replicas, max_replicas]. No figures yet: min_replicas.
// Each decision carries its reason with the numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

enum class ScaleMetric : std::uint8_t { kP95LatencyMs, kQueuePerReplica, kConcurrencyPerReplica };
// "p95_latency_ms", "queue_per_replica", "concurrency_per_replica"
[[nodiscard]] std::string_view scale_metric_name(ScaleMetric metric);
[[nodiscard]] Result<ScaleMetric> parse_scale_metric(std::string_view name);

struct AutoscalerSpec {
  int min_replicas = 1;  // >= 0
  int max_replicas = 1;  // >= max(min_replicas, 1), at most kMaxReplicas
  ScaleMetric metric = ScaleMetric::kQueuePerReplica;
  // Per replica for queue and concurrency (in thousandths: 2500 is 2.5 requests), or the p95
  // latency in milliseconds. > 0.
  std::int64_t target = 1000;
  Seconds stable_window = 60;  // 6 s .. 1 h
  Seconds panic_window = 6;    // 1 s .. stable_window
  int panic_percent = 200;     // > 100
  int tolerance_percent = 10;  // 0 .. 50
  Seconds up_period = 15;      // >= 1
  Seconds down_window = 300;   // >= 0
  Seconds down_period = 60;    // >= 1
  // Latency with the load's figures (see the file comment): requests one replica serves at once
  // (1..1024), and the seconds a replica takes from placement to serving (0..1 h).
  int slots_per_replica = 1;
  Seconds lead = 0;
};
inline constexpr int kMaxReplicas = 10'000;
// A service that gives no max_replicas may grow to 16 replicas, or to its min_replicas if more: a
// target alone then scales (a default of min_replicas would never move), and a careless one stays
// bounded. The services' readers (the spec's, the simulator's file) both take it from here.
inline constexpr int kDefaultMaxReplicas = 16;
[[nodiscard]] constexpr int default_max_replicas(int min_replicas) {
  return min_replicas > kDefaultMaxReplicas ? min_replicas : kDefaultMaxReplicas;
}

// The spec, or an Error naming the field at fault.
Result<AutoscalerSpec> make_autoscaler_spec(AutoscalerSpec spec);

struct Observation {
  Seconds at = 0;
  int ready_replicas = 0;
  // Queue or concurrency: in thousandths of requests, summed over the replicas; latency: ms.
  std::int64_t value = 0;
  // The load, for latency (both or neither): requests arriving per second at the service, in
  // thousandths, and the mean time a replica takes to serve one, without its wait, in us (> 0).
  std::optional<std::int64_t> arrivals_milli_rps;
  std::optional<std::int64_t> service_us;
};

struct ScaleDecision {
  int wanted = 0;
  bool panic = false;
  std::string reason;  // "3 -> 5: 11.2 requests waiting over 60s, 2.0 per replica wanted"
};

class Autoscaler {
 public:
  // `spec` must pass make_autoscaler_spec.
  explicit Autoscaler(AutoscalerSpec spec);

  // A report; reports older than the last one are ignored (a late heartbeat).
  void observe(const Observation& observation);
  // How many replicas the service wants now, given `current` (those placed, starting or ready).
  // Remembers the decision: the periods and the down window count from it.
  ScaleDecision decide(Seconds now, int current);

  [[nodiscard]] const AutoscalerSpec& spec() const { return spec_; }

 private:
  struct Wanted {
    Seconds at = 0;
    int replicas = 0;
  };
  // What a window's reports ask for: a count and its reason; nullopt without reports.
  struct Demand {
    int replicas = 0;
    std::string why;
  };
  // The count the reports in (now - window, now] ask for, given `current`: by the queueing model
  // when they carry the load (planning `ahead` seconds along the trend when `trend`), else by
  // the ratio of the mean value to the target (within the tolerance when `tolerant`).
  [[nodiscard]] std::optional<Demand> demand(Seconds now, Seconds window, int current, bool trend,
                                             bool tolerant) const;
  [[nodiscard]] std::optional<Demand> model_demand(Seconds now, Seconds window, bool trend) const;
  // The mean of the values observed in (now - window, now], if any.
  [[nodiscard]] std::optional<std::int64_t> mean(Seconds now, Seconds window) const;
  // The count the mean asks for, given `current`.
  [[nodiscard]] int wanted_for(std::int64_t mean, int current) const;
  [[nodiscard]] std::string describe(std::int64_t mean, Seconds window) const;

  AutoscalerSpec spec_;
  std::deque<Observation> observed_;  // the last stable_window (or down_window) of reports
  std::deque<Wanted> wanted_;         // the stable counts of the last down_window
  Seconds panic_until_ = -1;          // panicking while now < panic_until_
  Seconds last_up_ = -1;
  Seconds last_down_ = -1;
};

}  // namespace tidepool
