// What the agent reads about its tasks' processes from /proc: a process's start time (so that a
// pid taken back after a restart is known to be the same process, not a reused pid), and the CPU
// time and memory of a whole process group (the load that fake GPUs report).
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace tidepool {

// The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22); 0 when
// there is no such process.
std::uint64_t process_start_ticks(pid_t pid);

struct GroupUsage {
  std::uint64_t cpu_ticks = 0;  // user + system time of the group's processes
  std::int64_t rss_mib = 0;     // resident memory of the group's processes
  std::int64_t at_ms = 0;       // when it was read (the caller's clock)
};

// The usage of every process whose process group is `group`, read at `now_ms`.
GroupUsage group_usage(pid_t group, std::int64_t now_ms);

// The share of one CPU the group used between two readings, 0..100.
int busy_percent(const GroupUsage& before, const GroupUsage& after);

}  // namespace tidepool
