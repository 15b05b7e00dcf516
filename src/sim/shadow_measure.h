// The figures of one schedule in shadow mode (sim/shadow_schedule.h): the schedule is replayed on
// a copy of the pool in time order, which checks that it never gives a GPU to two jobs at once,
// and measured over the jobs it compares. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/fragmentation.h"
#include "core/pool.h"
#include "sim/shadow_schedule.h"

namespace tidepool {

// One job as a schedule has it; times in seconds since the first submit.
struct ScheduledJob {
  Seconds submit = 0;
  std::optional<Seconds> start;  // none: never started
  std::optional<Seconds> end;    // none: holds its GPUs to the end
  TaskShape task;
  // One per task. A place with no GPUs named (gpus == 0) takes the task's count of the node's
  // lowest-numbered whole free GPUs at the start.
  std::vector<Assignment> places;
  bool compared = false;
  std::uint64_t comm_key = 0;  // the efficiency model's profile (draw_comm_profile)
};

struct MeasuredSchedule {
  ShadowSummary summary;
  // Per job: the places it held (GPUs named); empty for a job not started, or one the pool could
  // not hold where the schedule put it (a conflict).
  std::vector<std::vector<Assignment>> places;
};

// Replays `jobs` on `pool` (empty) and measures them as the file comment of shadow_schedule.h
// says. At one time (whole seconds: which of a second's events came first is not known): ends of
// jobs that started earlier, then jobs that start and end at that time (taken and given back at
// once), then starts, each kind by job index. A start the pool cannot hold is a conflict, counted
// and left out of every figure.
MeasuredSchedule measure_schedule(const Pool& pool, std::span<const ScheduledJob> jobs,
                                  const WorkloadProfile& profile, std::uint64_t seed);

}  // namespace tidepool
