// Reader for the Microsoft Philly trace as prepared for the Pollux/Sia simulators
// (../shared/traces/philly/, Jeon et al., USENIX ATC'19): one job a row, columns
//
//   timestamp,duration,num_gpus,gpu_time,cluster
//   2017-09-04 10:30:41,2240194.0,8,17921552.0,7f04ca
//
// timestamp   submit time "YYYY-MM-DD HH:MM:SS" (exactly so; a valid calendar date and time of
//             day, seconds 0..59). The trace gives no zone; the reader takes the time as UTC and
//             never consults the C library's local time zone.
// duration    run time in seconds, an integer or a decimal ("2240194.0"), 0..kMaxPhillySeconds;
//             a fraction is rounded to the nearest whole second (halves up).
// num_gpus    the job's GPUs, an integer 1..kMaxPhillyGpus.
// gpu_time    GPU-seconds, a number like duration, not negative. It is not otherwise used: the
//             prepared trace has gpu_time = duration x num_gpus, and the reader does not enforce
//             that (a mismatch is neither an error nor a warning); duration and num_gpus rule.
// cluster     the virtual cluster (a team), taken as the tenant; must not be empty.
// Other columns are ignored; empty lines are skipped. Errors name "<source>:<line> column
// '<name>'" and say what is wrong; a trace without jobs is an error. No exception escapes.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

// The most GPUs one Philly job may ask for (the trace's largest is 128).
inline constexpr int kMaxPhillyGpus = 1024;
// The longest duration accepted (about 317 years): bounds later arithmetic on durations.
inline constexpr Seconds kMaxPhillySeconds = 10'000'000'000;

struct PhillyJob {
  std::string id;        // "philly-<i>": i is the job's 0-based index in file order
  Seconds submit = 0;    // seconds since the earliest submit time in the file (so >= 0)
  Seconds duration = 0;  // run time in seconds; 0 is allowed
  int gpus = 0;          // 1..kMaxPhillyGpus
  std::string tenant;    // the virtual cluster
};

struct PhillyTrace {
  std::vector<PhillyJob> jobs;  // in file order (not necessarily by submit time)
  // The earliest submit time, in seconds since 1970-01-01 00:00:00 UTC (timestamps read as UTC).
  std::int64_t start_epoch = 0;
};

// Reads the trace from `in`; `source` names the input in errors (a path, or e.g. "<stdin>").
Result<PhillyTrace> read_philly_jobs(std::istream& in, const std::string& source);

// Reads the trace file at `path`, which names it in errors.
Result<PhillyTrace> load_philly_jobs(const std::string& path);

}  // namespace tidepool
