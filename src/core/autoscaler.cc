#include "core/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

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
  return spec;
}

Autoscaler::Autoscaler(AutoscalerSpec spec) : spec_(spec) {}

void Autoscaler::observe(const Observation& observation) {
  if (!observed_.empty() && observation.at < observed_.back().at) return;
  observed_.push_back(observation);
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
  const auto stable_mean = mean(now, spec_.stable_window);
  if (!stable_mean) {
    const int wanted = bounded(current);
    return {wanted, false,
            fmt::format("{} -> {}: no figures from the replicas in the last {}s", current, wanted,
                        spec_.stable_window)};
  }
  // Stable: what the window's mean asks for, unless it is within the tolerance of now.
  int stable = wanted_for(*stable_mean, current);
  const std::int64_t capacity = spec_.metric == ScaleMetric::kP95LatencyMs
                                    ? spec_.target
                                    : std::int64_t{current} * spec_.target;
  if (current > 0 &&
      std::abs(*stable_mean - capacity) * 100 <= std::int64_t{spec_.tolerance_percent} * capacity) {
    stable = current;
  }
  std::string why = describe(*stable_mean, spec_.stable_window);
  wanted_.push_back({now, stable});
  while (!wanted_.empty() && wanted_.front().at <= now - spec_.down_window) wanted_.pop_front();

  // Panic: a burst over the short window.
  const std::int64_t burst_mean = mean(now, spec_.panic_window).value_or(0);
  const int burst = wanted_for(burst_mean, current);
  if (current > 0 && std::int64_t{burst} * 100 >= std::int64_t{spec_.panic_percent} * current) {
    panic_until_ = now + spec_.stable_window;
    why = describe(burst_mean, spec_.panic_window) + " (a burst: panic)";
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
