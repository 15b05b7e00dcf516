#include "server/queue_waits.h"

#include <algorithm>

namespace tidepool {

void QueueWaits::observe(double seconds) {
  seconds = std::max(0.0, seconds);
  const auto bucket = std::lower_bound(kQueueWaitBounds.begin(), kQueueWaitBounds.end(), seconds) -
                      kQueueWaitBounds.begin();
  ++counts[static_cast<std::size_t>(bucket)];
  sum_seconds += seconds;
  ++count;
}

}  // namespace tidepool
