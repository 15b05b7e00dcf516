// The event stream behind GET /v1/events: the loop publishes each committed batch's events; HTTP
// threads read those after a sequence number, either waiting on a thread (wait_after) or, for a
// long poll that holds no thread, reading at once (read_after) and looking again when a listener
// says that something was published. Recent events are kept in memory; older ones are read from
// the store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/instant.h"
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

  // Up to `limit` events after `after` that `visible` accepts, in order, without waiting (none
  // yet: empty). `last_seq` as for wait_after.
  Result<std::vector<EventRecord>> read_after(
      std::int64_t after, int limit, const std::function<bool(const EventRecord&)>& visible,
      std::int64_t& last_seq);

  // The sequence number to read after for the events from time `from` on: that of the last event
  // before it (0: none). The stream is in time order (each batch is stamped when the loop commits
  // it), so this is a binary search of O(log n) single-event reads, in memory or from the store.
  Result<std::int64_t> seq_before(Instant from);

  // Calls `listener` after each publish() that added events, and after close() (on the thread
  // that published, without the feed's lock held: it must be quick, e.g. post work elsewhere).
  // Returns an id for remove_listener, which returns once no call of that listener runs.
  std::uint64_t add_listener(std::function<void()> listener);
  void remove_listener(std::uint64_t id);
  [[nodiscard]] bool closed() const;

  // Up to `limit` events after `after` that `visible` accepts, in order; if there are none yet,
  // waits up to `timeout` for some. `last_seq` is set to the last event looked at, so that the
  // next call can continue after it even when the events it skipped were not visible.
  Result<std::vector<EventRecord>> wait_after(
      std::int64_t after, int limit, std::chrono::milliseconds timeout,
      const std::function<bool(const EventRecord&)>& visible, std::int64_t& last_seq);

 private:
  Store& store_;
  std::size_t keep_;
  // Takes events from memory after `last_seq` into `out` (with the lock held).
  void take_recent(int limit, const std::function<bool(const EventRecord&)>& visible,
                   std::vector<EventRecord>& out, std::int64_t& last_seq) const;
  void notify_listeners();

  // Guards recent_, last_seq_ and closed_ (the loop thread appends, HTTP threads read); waited on
  // by changed_.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // Guards next_listener_ and listeners_, and is held while listeners run, so that one removed
  // is never called afterwards; never taken with mutex_ held.
  std::mutex listeners_mutex_;
  std::uint64_t next_listener_ = 1;
  std::map<std::uint64_t, std::function<void()>> listeners_;
  std::deque<EventRecord> recent_;
  std::int64_t last_seq_ = 0;
  bool closed_ = false;
};

}  // namespace tidepool
