#include "server/rate_limiter.h"

#include <algorithm>

namespace tidepool {

bool RateLimiter::allow(const std::string& key, Instant now) {
  if (rate_ <= 0) return true;
  std::lock_guard lock(mutex_);
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{burst_, now});
  Bucket& b = it->second;
  if (now > b.updated_at) {
    b.tokens = std::min(
        burst_, b.tokens + rate_ * std::chrono::duration<double>(now - b.updated_at).count());
    b.updated_at = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace tidepool
