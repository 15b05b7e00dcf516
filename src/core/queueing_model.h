// The latency of an inference service's replicas under load, for the simulator's services and
// for the oracle that knows the request rate in advance: each replica an M/M/c server's server.
//
// The model (M/M/c, Erlang C): requests arrive as a Poisson process of rate lambda and wait in
// one queue for the first of c replicas free; a replica serves a request in an exponential time
// of mean s (rate mu = 1/s). With load A = lambda/mu and utilisation rho = A/c < 1:
//   - the chance a request waits is Erlang's C(c, A), from the Erlang B recurrence
//     B(0) = 1, B(k) = A B(k-1) / (k + A B(k-1)), and C = B(c) / (1 - rho (1 - B(c)));
//   - a wait is exponential of rate theta = c mu - lambda (with chance C; none otherwise);
//   - the response time is the wait plus the service, so
//     P(T > t) = (1 - C) e^(-mu t) + C (theta e^(-mu t) - mu e^(-theta t)) / (theta - mu),
//     and (theta = mu) C (1 + mu t) e^(-mu t) in place of the last term.
// A percentile of T is found by bisection to the millisecond. rho >= 1 has no steady state: the
// queue grows without bound (nullopt).
//
// Pure functions of their arguments (doubles in, whole milliseconds out).
#pragma once

#include <cstdint>
#include <optional>

namespace tidepool {

// Erlang's C(c, A): the chance that a request waits, for c >= 1 servers and load A >= 0 (A < c).
[[nodiscard]] double erlang_c(int servers, double load);

// The `percentile` (1..99) response time in milliseconds of `replicas` replicas serving
// `arrivals_per_second` requests of mean service `mean_service_s` seconds; nullopt when they
// cannot keep up (utilisation >= 1, or so near it that the p95 passes 10^6 s) or an argument is
// out of range.
[[nodiscard]] std::optional<std::int64_t> response_percentile_ms(double arrivals_per_second,
                                                                 double mean_service_s,
                                                                 int replicas, int percentile = 95);

// The fewest replicas (1..max_replicas) whose p95 response is at most `target_ms` at that rate,
// each replica serving up to `slots_per_replica` requests at once (c = replicas x slots servers),
// or nullopt when even max_replicas cannot (a service time over the target, say). Bisection:
// O(log max_replicas) percentiles.
[[nodiscard]] std::optional<int> replicas_for_p95(double arrivals_per_second, double mean_service_s,
                                                  std::int64_t target_ms, int max_replicas,
                                                  int slots_per_replica = 1);

}  // namespace tidepool
