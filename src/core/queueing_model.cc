#include "core/queueing_model.h"

#include <cmath>

namespace tidepool {

namespace {

// About 11.6 days: a p95 beyond it is no steady state anyone waits for.
constexpr double kLongestResponseS = 1e6;

// P(T > t) of the model (see the header), for utilisation < 1.
double response_tail(double lambda, double mu, int c, double wait_chance, double t) {
  const double theta = c * mu - lambda;
  const double served = std::exp(-mu * t);
  double waited = 0;
  // Near theta = mu the general form cancels to noise: the limit's form is exact to ~1e-6 there.
  if (std::abs(theta - mu) < 1e-6 * mu) {
    waited = (1 + mu * t) * served;
  } else {
    waited = (theta * served - mu * std::exp(-theta * t)) / (theta - mu);
  }
  return (1 - wait_chance) * served + wait_chance * waited;
}

}  // namespace

double erlang_c(int servers, double load) {
  if (servers < 1 || load < 0 || load >= servers) return 1.0;
  double b = 1.0;
  for (int k = 1; k <= servers; ++k) b = load * b / (k + load * b);
  const double rho = load / servers;
  return b / (1 - rho * (1 - b));
}

std::optional<std::int64_t> response_percentile_ms(double arrivals_per_second,
                                                   double mean_service_s, int replicas,
                                                   int percentile) {
  if (!(arrivals_per_second >= 0) || !(mean_service_s > 0) || replicas < 1 || percentile < 1 ||
      percentile > 99) {
    return std::nullopt;
  }
  const double mu = 1 / mean_service_s;
  const double load = arrivals_per_second / mu;
  if (load >= replicas) return std::nullopt;
  const double wait_chance = erlang_c(replicas, load);
  const double beyond = 1 - percentile / 100.0;
  // The tail falls from 1 at t = 0: double the upper end until it is below, then bisect to 1 ms.
  // A tail still above at kLongestResponseS (near saturation, where the wait is unbounded for
  // any purpose) counts as not keeping up.
  const auto above = [&](double t) {
    return !(response_tail(arrivals_per_second, mu, replicas, wait_chance, t) <= beyond);
  };
  double hi = mean_service_s;
  while (hi < kLongestResponseS && above(hi)) hi *= 2;
  if (above(hi)) return std::nullopt;
  double lo = 0;
  while (hi - lo > 0.0005) {
    const double mid = (lo + hi) / 2;
    (response_tail(arrivals_per_second, mu, replicas, wait_chance, mid) > beyond ? lo : hi) = mid;
  }
  return static_cast<std::int64_t>(std::ceil(hi * 1000 - 0.5));
}

std::optional<int> replicas_for_p95(double arrivals_per_second, double mean_service_s,
                                    std::int64_t target_ms, int max_replicas,
                                    int slots_per_replica) {
  if (max_replicas < 1 || slots_per_replica < 1 || !(mean_service_s > 0) ||
      !(arrivals_per_second >= 0)) {
    return std::nullopt;
  }
  const auto meets = [&](int replicas) {
    const auto p95 =
        response_percentile_ms(arrivals_per_second, mean_service_s, replicas * slots_per_replica);
    return p95 && *p95 <= target_ms;
  };
  if (!meets(max_replicas)) return std::nullopt;
  // The p95 never rises as replicas are added: bisect for the first count that meets the target.
  int lo = 0;  // fails (or is no count)
  int hi = max_replicas;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (meets(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace tidepool
