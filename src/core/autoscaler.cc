#include "core/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/queueing_model.h"

namespace tidepool {

namespace {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Thousandths as a decimal with one place: 11250 -> "11.2".
std::string thousandths(std::int64_t value) {
  return fmt::format("{:.1f}", static_cast<double>(value) / 1000.0);
}

}  // namespace

std::string_view scale_metric_name(ScaleMetric metric) {
  switch (metric) {
    case ScaleMetric::kP95LatencyMs:
      return "p95_latency_ms";
    case ScaleMetric::kQueuePerReplica:
      return "queue_per_replica";
    case ScaleMetric::kConcurrencyPerReplica:
      return "concurrency_per_replica";
  }
  return "?";
}

Result<ScaleMetric> parse_scale_metric(std::string_view name) {
  for (ScaleMetric metric : {ScaleMetric::kP95LatencyMs, ScaleMetric::kQueuePerReplica,
                             ScaleMetric::kConcurrencyPerReplica}) {
    if (scale_metric_name(metric) == name) return metric;
  }
  return fail("metric", fmt::format("'{}' is not one of p95_latency_ms, queue_per_replica, "
                                    "concurrency_per_replica",
                                    name));
}

Result<AutoscalerSpec> make_autoscaler_spec(AutoscalerSpec spec) {
  if (spec.min_replicas < 0 || spec.min_replicas > kMaxReplicas) {
    return fail("min_replicas",
                fmt::format("{} is outside 0..{}", spec.min_replicas, kMaxReplicas));
  }
  if (spec.max_replicas < std::max(spec.min_replicas, 1) || spec.max_replicas > kMaxReplicas) {
    return fail("max_replicas",
                fmt::format("{} is outside {}..{} (at least min_replicas and 1)", spec.max_replicas,
                            std::max(spec.min_replicas, 1), kMaxReplicas));
  }
  if (spec.target <= 0 || spec.target > std::int64_t{1'000'000'000}) {
    return fail("target", fmt::format("{} is outside 1..1000000000", spec.target));
  }
  if (spec.stable_window < 6 || spec.stable_window > 3600) {
    return fail("stable_window", fmt::format("{}s is outside 6s..1h", spec.stable_window));
  }
  if (spec.panic_window < 1 || spec.panic_window > spec.stable_window) {
    return fail("panic_window",
                fmt::format("{}s is outside 1s..the stable window", spec.panic_window));
  }
  if (spec.panic_percent <= 100 || spec.panic_percent > 10'000) {
    return fail("panic_percent", fmt::format("{} is outside 101..10000", spec.panic_percent));
  }
  if (spec.tolerance_percent < 0 || spec.tolerance_percent > 50) {
    return fail("tolerance_percent", fmt::format("{} is outside 0..50", spec.tolerance_percent));
  }
  for (auto [field, period] :
       {std::pair{"up_period", spec.up_period}, std::pair{"down_period", spec.down_period}}) {
    if (period < 1 || period > 86'400) {
      return fail(field, fmt::format("{}s is outside 1s..1d", period));
    }
  }
  if (spec.down_window < 0 || spec.down_window > 86'400) {
    return fail("down_window", fmt::format("{}s is outside 0s..1d", spec.down_window));
  }
  if (spec.slots_per_replica < 1 || spec.slots_per_replica > 1024) {
    return fail("slots_per_replica", fmt::format("{} is outside 1..1024", spec.slots_per_replica));
  }
  if (spec.lead < 0 || spec.lead > 3600) {
    return fail("lead", fmt::format("{}s is outside 0s..1h", spec.lead));
  }
  return spec;
}

Autoscaler::Autoscaler(AutoscalerSpec spec) : spec_(spec) {}

void Autoscaler::observe(const Observation& observation) {
  if (!observed_.empty() && observation.at < observed_.back().at) return;
  observed_.push_back(observation);
}

std::optional<Autoscaler::Demand> Autoscaler::model_demand(Seconds now, Seconds window,
                                                           bool trend) const {
  // The reports of the window, all with the load's figures, or no model.
  double n = 0, sum_t = 0, sum_rate = 0, sum_service = 0, sum_tt = 0, sum_t_rate = 0,
         sum_rate_rate = 0;
  for (auto it = observed_.rbegin(); it != observed_.rend() && it->at > now - window; ++it) {
    if (it->at > now) continue;
    if (!it->arrivals_milli_rps || !it->service_us || *it->service_us <= 0) return std::nullopt;
    const double t = static_cast<double>(it->at - now);
    const double rate = static_cast<double>(*it->arrivals_milli_rps) / 1000.0;
    n += 1;
    sum_t += t;
    sum_tt += t * t;
    sum_rate += rate;
    sum_t_rate += t * rate;
    sum_rate_rate += rate * rate;
    sum_service += static_cast<double>(*it->service_us) / 1e6;
  }
  if (n == 0) return std::nullopt;
  const double rate = sum_rate / n;
  const double service = sum_service / n;
  double planned = rate;
  std::string rising;
  const double spread = sum_tt - sum_t * sum_t / n;
  if (trend && n >= 3 && spread > 0) {
    // The rise counts only where the reports show one: the slope less twice its standard error
    // (noise alone then rarely plans ahead, and the down window would keep what it planned).
    const double covariance = sum_t_rate - sum_t * sum_rate / n;
    const double fitted = covariance / spread;
    const double residual =
        std::max(0.0, sum_rate_rate - sum_rate * sum_rate / n - fitted * covariance);
    const double slope = fitted - 2 * std::sqrt(residual / (n - 2) / spread);
    const Seconds ahead = window / 2 + spec_.up_period + spec_.lead;
    if (slope > 0) {
      planned = rate + slope * static_cast<double>(ahead);
      rising =
          fmt::format(", rising {:.2f}/s per s: {:.1f}/s planned {}s ahead", slope, planned, ahead);
    }
  }
  const auto replicas =
      replicas_for_p95(planned, service, spec_.target, spec_.max_replicas, spec_.slots_per_replica);
  const std::string load = fmt::format("{:.1f} requests/s over {}s{}, {:.0f} ms to serve one", rate,
                                       window, rising, service * 1000);
  if (!replicas) {
    return Demand{spec_.max_replicas,
                  fmt::format("{}: even {} replicas miss the p95 target of {} ms", load,
                              spec_.max_replicas, spec_.target)};
  }
  return Demand{*replicas, fmt::format("{}: {} replicas meet the p95 target of {} ms", load,
                                       *replicas, spec_.target)};
}

std::optional<Autoscaler::Demand> Autoscaler::demand(Seconds now, Seconds window, int current,
                                                     bool trend, bool tolerant) const {
  if (spec_.metric == ScaleMetric::kP95LatencyMs) {
    if (auto modelled = model_demand(now, window, trend)) return modelled;
  }
  const auto window_mean = mean(now, window);
  if (!window_mean) return std::nullopt;
  int wanted = wanted_for(*window_mean, current);
  // Within the tolerance of what the current count handles, it stays.
  const std::int64_t capacity = spec_.metric == ScaleMetric::kP95LatencyMs
                                    ? spec_.target
                                    : std::int64_t{current} * spec_.target;
  if (tolerant && current > 0 &&
      std::abs(*window_mean - capacity) * 100 <= std::int64_t{spec_.tolerance_percent} * capacity) {
    wanted = current;
  }
  return Demand{wanted, describe(*window_mean, window)};
}

std::optional<std::int64_t> Autoscaler::mean(Seconds now, Seconds window) const {
  std::int64_t sum = 0;
  std::int64_t count = 0;
  for (auto it = observed_.rbegin(); it != observed_.rend() && it->at > now - window; ++it) {
    if (it->at > now) continue;
    sum += it->value;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

int Autoscaler::wanted_for(std::int64_t mean, int current) const {
  std::int64_t wanted = 0;
  if (spec_.metric == ScaleMetric::kP95LatencyMs) {
    wanted = ceil_div(std::int64_t{std::max(current, 1)} * mean, spec_.target);
  } else {
    wanted = ceil_div(mean, spec_.target);
  }
  return static_cast<int>(std::clamp<std::int64_t>(wanted, 0, kMaxReplicas));
}

std::string Autoscaler::describe(std::int64_t mean, Seconds window) const {
  switch (spec_.metric) {
    case ScaleMetric::kP95LatencyMs:
      return fmt::format("p95 latency {} ms over {}s, target {} ms", mean, window, spec_.target);
    case ScaleMetric::kQueuePerReplica:
      return fmt::format("{} requests waiting over {}s, target {} per replica", thousandths(mean),
                         window, thousandths(spec_.target));
    case ScaleMetric::kConcurrencyPerReplica:
      return fmt::format("{} requests in flight over {}s, target {} per replica", thousandths(mean),
                         window, thousandths(spec_.target));
  }
  return "";
}

ScaleDecision Autoscaler::decide(Seconds now, int current) {
  current = std::clamp(current, 0, kMaxReplicas);
  const Seconds kept = std::max(spec_.stable_window, spec_.panic_window);
  while (!observed_.empty() && observed_.front().at <= now - kept) observed_.pop_front();
  const auto bounded = [&](int n) { return std::clamp(n, spec_.min_replicas, spec_.max_replicas); };
  const auto stable_demand =
      demand(now, spec_.stable_window, current, /*trend=*/true, /*tolerant=*/true);
  if (!stable_demand) {
    const int wanted = bounded(current);
    return {wanted, false,
            fmt::format("{} -> {}: no figures from the replicas in the last {}s", current, wanted,
                        spec_.stable_window)};
  }
  const int stable = stable_demand->replicas;
  std::string why = stable_demand->why;
  wanted_.push_back({now, stable});
  while (!wanted_.empty() && wanted_.front().at <= now - spec_.down_window) wanted_.pop_front();

  // Panic: a burst over the short window.
  const auto burst_demand =
      demand(now, spec_.panic_window, current, /*trend=*/false, /*tolerant=*/false);
  const int burst = burst_demand ? burst_demand->replicas : 0;
  if (current > 0 && std::int64_t{burst} * 100 >= std::int64_t{spec_.panic_percent} * current) {
    panic_until_ = now + spec_.stable_window;
    why = burst_demand->why + " (a burst: panic)";
  }
  const bool panic = now < panic_until_;

  int target = stable;
  if (panic) {
    target = std::max({stable, burst, current});
  } else if (target < current) {
    // Down only to the highest count wanted over the down window.
    for (const Wanted& w : wanted_) target = std::max(target, w.replicas);
    if (target > stable) {
      why += fmt::format("; {} wanted within the last {}s", target, spec_.down_window);
    }
  }
  target = bounded(target);

  if (target > current) {
    if (!panic && last_up_ >= 0 && now - last_up_ < spec_.up_period) {
      return {current, panic,
              fmt::format("{} -> {}: {}; the last step up was {}s ago (at most one per {}s)",
                          current, current, why, now - last_up_, spec_.up_period)};
    }
    target = std::min(target, current + std::max(4, current));
    last_up_ = now;
  } else if (target < current) {
    if (last_down_ >= 0 && now - last_down_ < spec_.down_period) {
      return {current, panic,
              fmt::format("{} -> {}: {}; the last step down was {}s ago (at most one per {}s)",
                          current, current, why, now - last_down_, spec_.down_period)};
    }
    target = std::max(target, current - std::max(1, current / 2));
    last_down_ = now;
  }
  return {target, panic, fmt::format("{} -> {}: {}", current, target, why)};
}

}  // namespace tidepool
