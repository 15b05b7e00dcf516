// How long jobs waited before they started, per tenant, as counts per bucket: the control plane
// observes each start, and the metrics render the counts as the Prometheus histogram
// tidepool_queue_wait_seconds{tenant}, from which queries take percentiles (histogram_quantile).
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace tidepool {

// Upper bounds of the buckets, in seconds: a minute to a month (a last bucket, +Inf, holds the
// rest). Waits of a GPU pool range from seconds to weeks, so the bounds grow about 3x each.
inline constexpr std::array<double, 12> kQueueWaitBounds = {
    60,       300,       900,   1800,      3600,      3 * 3600,
    6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, 30 * 86400};

struct QueueWaits {
  std::array<std::int64_t, kQueueWaitBounds.size() + 1> counts{};  // per bucket, not cumulative
  double sum_seconds = 0;
  std::int64_t count = 0;

  // One start after `seconds` of waiting (negative counts as 0).
  void observe(double seconds);
};

}  // namespace tidepool
