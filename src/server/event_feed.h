// The event stream behind GET /v1/events: the loop publishes each committed batch's events; HTTP
// threads read those after a sequence number, waiting (long poll) until one arrives. Recent
// events are kept in memory; older ones are read from the store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "store/store.h"

namespace tidepool {

class EventFeed {
 public:
  EventFeed(Store& store, std::size_t keep) : store_(store), keep_(keep) {}

  // Starts over after the store's last event (the server (re)loading its state).
  void reset(std::int64_t last_seq);
  void publish(const std::vector<EventRecord>& events);
  // Wakes every waiter and makes later waits return at once (shutdown).
  void close();

  // Up to `limit` events after `after` that `visible` accepts, in order; if there are none yet,
  // waits up to `timeout` for some. `last_seq` is set to the last event looked at, so that the
  // next call can continue after it even when the events it skipped were not visible.
  Result<std::vector<EventRecord>> wait_after(
      std::int64_t after, int limit, std::chrono::milliseconds timeout,
      const std::function<bool(const EventRecord&)>& visible, std::int64_t& last_seq);

 private:
  Store& store_;
  std::size_t keep_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<EventRecord> recent_;
  std::int64_t last_seq_ = 0;
  bool closed_ = false;
};

}  // namespace tidepool
