// A token bucket per key (the API token's id): `rate` requests per second on average, bursts of
// up to `burst`. Thread-safe; the time is passed in.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/instant.h"

namespace tidepool {

class RateLimiter {
 public:
  // rate <= 0: no limit.
  RateLimiter(double rate, double burst) : rate_(rate), burst_(burst < 1 ? 1 : burst) {}

  // Whether a request of `key` at `now` may go ahead (it takes one token if so).
  bool allow(const std::string& key, Instant now);

 private:
  struct Bucket {
    double tokens = 0;
    Instant updated_at;
  };
  double rate_;
  double burst_;
  std::mutex mutex_;  // guards buckets_ (every HTTP thread takes from them)
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace tidepool
