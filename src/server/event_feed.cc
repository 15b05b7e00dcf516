#include "server/event_feed.h"

#include <algorithm>
#include <utility>

namespace tidepool {

void EventFeed::reset(std::int64_t last_seq) {
  std::lock_guard lock(mutex_);
  recent_.clear();
  last_seq_ = last_seq;
  changed_.notify_all();
}

void EventFeed::publish(const std::vector<EventRecord>& events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (const EventRecord& e : events) recent_.push_back(e);
    while (recent_.size() > keep_) recent_.pop_front();
    last_seq_ = std::max(last_seq_, events.back().seq);
    changed_.notify_all();
  }
  notify_listeners();
}

void EventFeed::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  notify_listeners();
}

bool EventFeed::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

std::uint64_t EventFeed::add_listener(std::function<void()> listener) {
  std::lock_guard lock(listeners_mutex_);
  const std::uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void EventFeed::remove_listener(std::uint64_t id) {
  std::lock_guard lock(listeners_mutex_);
  listeners_.erase(id);
}

void EventFeed::notify_listeners() {
  std::lock_guard lock(listeners_mutex_);
  for (const auto& [id, listener] : listeners_) listener();
}

void EventFeed::take_recent(int limit, const std::function<bool(const EventRecord&)>& visible,
                            std::vector<EventRecord>& out, std::int64_t& last_seq) const {
  auto it = std::ranges::lower_bound(recent_, last_seq + 1, {}, &EventRecord::seq);
  for (; it != recent_.end() && std::cmp_less(out.size(), limit); ++it) {
    last_seq = it->seq;
    if (visible(*it)) out.push_back(*it);
  }
}

Result<std::int64_t> EventFeed::seq_before(Instant from) {
  const std::int64_t at_ms = unix_ms(from);  // as the events are stamped
  std::int64_t below = 0;  // an event at or before it is before at_ms (0: the start)
  std::int64_t above = 0;  // the events from here on are at or after at_ms
  {
    std::lock_guard lock(mutex_);
    above = last_seq_ + 1;
    // Memory first: the recent events are the ones most often asked for.
    if (!recent_.empty()) {
      const auto first = std::ranges::lower_bound(recent_, at_ms, {}, &EventRecord::at_ms);
      if (first != recent_.begin()) return std::prev(first)->seq;
      above = recent_.front().seq;
    }
  }
  while (above - below > 1) {
    const std::int64_t middle = below + (above - below) / 2;
    auto one = store_.events_after(middle - 1, 1);
    if (!one) return std::unexpected(one.error());
    if (one->empty() || one->front().at_ms >= at_ms) {
      above = middle;
    } else {
      below = middle;
    }
  }
  return below;
}

Result<std::vector<EventRecord>> EventFeed::read_after(
    std::int64_t after, int limit, const std::function<bool(const EventRecord&)>& visible,
    std::int64_t& last_seq) {
  std::vector<EventRecord> out;
  last_seq = after;
  std::unique_lock lock(mutex_);
  const std::int64_t oldest = recent_.empty() ? last_seq_ + 1 : recent_.front().seq;
  if (last_seq + 1 < oldest && last_seq < last_seq_) {
    lock.unlock();
    auto stored = store_.events_after(last_seq, limit);
    if (!stored) return std::unexpected(stored.error());
    for (EventRecord& e : *stored) {
      last_seq = e.seq;
      if (visible(e)) out.push_back(std::move(e));
    }
    return out;
  }
  take_recent(limit, visible, out, last_seq);
  return out;
}

Result<std::vector<EventRecord>> EventFeed::wait_after(
    std::int64_t after, int limit, std::chrono::milliseconds timeout,
    const std::function<bool(const EventRecord&)>& visible, std::int64_t& last_seq) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<EventRecord> out;
  last_seq = after;
  std::unique_lock lock(mutex_);
  while (true) {
    const std::int64_t oldest = recent_.empty() ? last_seq_ + 1 : recent_.front().seq;
    if (last_seq + 1 < oldest && last_seq < last_seq_) {
      // Older than what memory keeps: read them from the store, without holding the lock.
      lock.unlock();
      auto stored = store_.events_after(last_seq, limit);
      lock.lock();
      if (!stored) return std::unexpected(stored.error());
      for (EventRecord& e : *stored) {
        last_seq = e.seq;
        if (visible(e)) out.push_back(std::move(e));
      }
      if (!out.empty() || stored->empty()) return out;
      continue;
    }
    take_recent(limit, visible, out, last_seq);
    if (!out.empty() || closed_) return out;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      // One last look, then answer with what there is (possibly nothing).
      take_recent(limit, visible, out, last_seq);
      return out;
    }
  }
}

}  // namespace tidepool
