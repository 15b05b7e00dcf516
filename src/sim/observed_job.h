// A job as another scheduler (Slurm) ran it, as shadow mode observes it (sim/shadow_schedule.h),
// and the bounds its figures must keep. The figures come from outside (Slurm's JSON, a trace
// file), so the readers (sim_cli/slurm_json.h, sim_cli/shadow_trace.h) read each one through the
// checks below, and no job they return breaks check_observed(); run_shadow() checks every job
// again, whatever gave it. The bounds are far beyond any real pool; what they rule out is
// arithmetic that overflows (times shifted to the run's start, milli-CPUs, products of a per-node
// figure and the nodes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

struct ObservedJob {
  std::string id;         // the observed scheduler's id ("1234", "1234_7")
  std::string tenant;     // its account, or its user when it has none
  std::string partition;  // may be empty
  std::int64_t submit = 0;
  int gpus = 0;                       // whole GPUs over all its nodes, 0..kMaxObservedGpus
  int node_count = 1;                 // nodes asked for, 1..kMaxObservedNodes
  MilliCpu milli_cpu = 0;             // over the whole job, 0..kMaxObservedCpus x 1000
  MemoryMib memory_mib = 0;           // over the whole job, 0..kMaxObservedMemoryMib
  std::optional<Seconds> time_limit;  // as asked (seconds, > 0), when known
  std::optional<std::int64_t> start;  // when it started; none while it has not
  std::optional<std::int64_t> end;  // when it ended (not before start); none while it runs or waits
  std::vector<std::string> nodes;   // where it ran (names of the pool's nodes)
  bool cancelled = false;           // ended without ever starting
};

// Times are seconds since the epoch, 0 up to the end of the year 9999.
inline constexpr std::int64_t kMaxObservedTime = 253'402'300'799;
inline constexpr std::int64_t kMaxObservedGpus = 1'000'000;
inline constexpr std::int64_t kMaxObservedNodes = 100'000;
inline constexpr std::int64_t kMaxObservedCpus = 100'000'000;
inline constexpr std::int64_t kMaxObservedMemoryMib = std::int64_t{1} << 40;  // 1 EiB

// `value` if it lies in 0..`most`, else an error naming `field` ("must be 0..N, got V").
Result<std::int64_t> observed_count(std::int64_t value, std::int64_t most,
                                    const std::string& field);

// `value` as a time: seconds since the epoch, 0..kMaxObservedTime.
Result<std::int64_t> observed_time(std::int64_t value, const std::string& field);

// a x b for a, b >= 0, if it is at most `most`, else an error naming `field` (no overflow).
Result<std::int64_t> observed_product(std::int64_t a, std::int64_t b, std::int64_t most,
                                      const std::string& field);

// Whether `job` keeps the bounds above: a non-empty id and tenant, times in range with an end
// only after a start and not before it, a time limit > 0 when given, the counts in range. The
// error's field is the job's field ("submit", "gpus", ...).
Result<void> check_observed(const ObservedJob& job);

}  // namespace tidepool
