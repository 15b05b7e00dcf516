#include "agent/task_uids.h"

#include <fmt/format.h>

#include <charconv>

namespace tidepool {
namespace {

constexpr std::int64_t kLargestUid = 4'294'967'294;  // (uid_t)-1 means "unchanged"

// -1 when `text` is not a decimal number.
std::int64_t parse_number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return -1;
  return value;
}

}  // namespace

Result<UidRange> parse_uid_range(std::string_view text) {
  const auto dash = text.find('-');
  const std::int64_t first = parse_number(text.substr(0, dash));
  const std::int64_t last =
      dash == std::string_view::npos ? -1 : parse_number(text.substr(dash + 1));
  if (first < 0 || last < 0) {
    return fail("--task-uids",
                fmt::format("'{}' is not a range of uids such as 61000-61999", text));
  }
  if (first < 1 || last > kLargestUid || first > last || last > INT32_MAX) {
    return fail(
        "--task-uids",
        fmt::format("'{}': expected FIRST-LAST with 1 <= FIRST <= LAST <= {}", text, INT32_MAX));
  }
  return UidRange{static_cast<int>(first), static_cast<int>(last)};
}

Result<int> TaskUids::acquire(std::int64_t job) {
  if (auto held = of(job)) return *held;
  const int size = range_.size();
  const int preferred = range_.first + static_cast<int>(((job % size) + size) % size);
  int chosen = -1;
  if (!by_uid_.contains(preferred)) {
    chosen = preferred;
  } else {
    for (int uid = range_.first; uid <= range_.last; ++uid) {
      if (!by_uid_.contains(uid)) {
        chosen = uid;
        break;
      }
    }
  }
  if (chosen < 0) {
    return fail("uid", fmt::format("all {} uids of {}-{} are held by jobs on this node", size,
                                   range_.first, range_.last));
  }
  by_job_[job] = chosen;
  by_uid_[chosen] = job;
  return chosen;
}

bool TaskUids::restore(std::int64_t job, int uid) {
  if (!range_.contains(uid)) return false;
  if (auto it = by_uid_.find(uid); it != by_uid_.end()) return it->second == job;
  if (by_job_.contains(job)) return false;
  by_job_[job] = uid;
  by_uid_[uid] = job;
  return true;
}

void TaskUids::release(std::int64_t job) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return;
  by_uid_.erase(it->second);
  by_job_.erase(it);
}

std::optional<int> TaskUids::of(std::int64_t job) const {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tidepool
