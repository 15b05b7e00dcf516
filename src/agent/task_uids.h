// The unprivileged uids the agent runs jobs' tasks as: one per job on this node, taken from a
// configured range (agent flag --task-uids, e.g. 61000-61999) and given back when the job's
// last task here is gone. The gid of a task is the same number. Two jobs on one node never share
// a uid, so neither can read the other's folders (0700), signal its processes or trace them.
//
// Which uid a job gets: base + job % size when that one is free (so that the nodes that share a
// checkpoint folder on common storage, with the same range, mostly agree on a job's uid), else the
// lowest free one. Deterministic: the same allocations in the same order give the same uids.
//
// Not thread-safe; no I/O: the agent persists the allocations in its tasks.json (with each task)
// and gives them back with restore() after a restart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace tidepool {

struct UidRange {
  int first = 61000;
  int last = 61999;  // inclusive

  [[nodiscard]] int size() const { return last - first + 1; }
  [[nodiscard]] bool contains(int uid) const { return uid >= first && uid <= last; }
};

// "61000-61999": two decimal uids, first <= last, both in 1..4294967294 and above 0 (never root);
// fails naming "--task-uids".
Result<UidRange> parse_uid_range(std::string_view text);

class TaskUids {
 public:
  explicit TaskUids(UidRange range) : range_(range) {}

  // The uid of `job`: the one it holds already, else a free one. Errors: the range is used up
  // (as many jobs on this node as uids in the range).
  Result<int> acquire(std::int64_t job);

  // Records that `job` holds `uid` (from tasks.json). False, changing nothing, when `uid` is out of
  // the range or held by another job (a state file edited by hand, or a narrowed range).
  bool restore(std::int64_t job, int uid);

  // Gives back the uid of `job`, if it holds one.
  void release(std::int64_t job);

  // The uid `job` holds, if any.
  [[nodiscard]] std::optional<int> of(std::int64_t job) const;

  [[nodiscard]] const UidRange& range() const { return range_; }

 private:
  UidRange range_;
  std::map<std::int64_t, int> by_job_;
  std::map<int, std::int64_t> by_uid_;
};

}  // namespace tidepool
