#include "server/rate_limiter.h"

#include <algorithm>

namespace tidepool {

bool RateLimiter::allow(const std::string& key, std::int64_t now_ms) {
  if (rate_ <= 0) return true;
  std::lock_guard lock(mutex_);
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{burst_, now_ms});
  Bucket& b = it->second;
  if (now_ms > b.updated_ms) {
    b.tokens =
        std::min(burst_, b.tokens + rate_ * static_cast<double>(now_ms - b.updated_ms) / 1000.0);
    b.updated_ms = now_ms;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace tidepool
