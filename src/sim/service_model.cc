#include "sim/service_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/queueing_model.h"

namespace tidepool {
namespace {

constexpr Seconds kRateCurveDay = 86'400;

// A normal draw (mean 0, variance 1) from twelve uniforms (Irwin-Hall): enough for a count of
// arrivals, and the same on every platform.
double arrivals_normal_draw(Rng& rng) {
  double sum = 0;
  for (int i = 0; i < 12; ++i) sum += static_cast<double>(rng.below(1'000'000)) / 1e6;
  return sum - 6;
}

// A Poisson count of mean `mean`: exact by inversion for small means, normal beyond.
std::int64_t arrivals_count(double mean, Rng& rng) {
  if (mean <= 0) return 0;
  if (mean > 50) {
    return std::max<std::int64_t>(0,
                                  std::llround(mean + std::sqrt(mean) * arrivals_normal_draw(rng)));
  }
  const double limit = std::exp(-mean);
  double product = 1;
  std::int64_t count = -1;
  do {
    ++count;
    product *= (static_cast<double>(rng.below(1'000'000)) + 0.5) / 1e6;
  } while (product > limit);
  return count;
}

}  // namespace

double rate_at(const RateCurve& curve, Seconds t) {
  double rate = 0;
  if (!curve.points.empty()) {
    const auto after = std::upper_bound(
        curve.points.begin(), curve.points.end(), t,
        [](Seconds time, const std::pair<Seconds, double>& p) { return time < p.first; });
    rate = after == curve.points.begin() ? 0 : std::prev(after)->second;
  } else {
    const Seconds day = ((t + curve.day_offset) % kRateCurveDay + kRateCurveDay) % kRateCurveDay;
    const double phase =
        2 * std::numbers::pi * static_cast<double>(day - curve.peak_at) / kRateCurveDay;
    rate = curve.trough + (curve.peak - curve.trough) * (1 + std::cos(phase)) / 2;
  }
  for (const RateBurst& b : curve.bursts) {
    if (t >= b.at && t < b.at + b.duration) rate *= b.factor;
  }
  return rate;
}

std::optional<std::int64_t> service_p95_ms(const SimServiceSpec& spec, double rate, int ready) {
  if (ready <= 0) return std::nullopt;
  return response_percentile_ms(rate, spec.service_s, ready * spec.scaler.slots_per_replica);
}

int oracle_replicas(const SimServiceSpec& spec, double rate) {
  const auto needed = replicas_for_p95(rate, spec.service_s, spec.scaler.target,
                                       spec.scaler.max_replicas, spec.scaler.slots_per_replica);
  return std::max(spec.scaler.min_replicas, needed.value_or(spec.scaler.max_replicas));
}

Observation observe_service(const SimServiceSpec& spec, Seconds at, double rate, int ready,
                            Rng& rng) {
  Observation o;
  o.at = at;
  o.ready_replicas = ready;
  const auto arrivals = arrivals_count(rate * static_cast<double>(spec.tick), rng);
  o.arrivals_milli_rps = arrivals * 1000 / std::max<Seconds>(1, spec.tick);
  o.service_us = std::max<std::int64_t>(1, std::llround(spec.service_s * 1e6));
  // The latency the replicas would report (a large figure when overloaded).
  o.value = service_p95_ms(spec, rate, ready).value_or(std::int64_t{3'600'000});
  return o;
}

}  // namespace tidepool
