// A job stream from a file, for `tidepool shadow --trace FILE`: the jobs another scheduler ran,
// as shadow mode reads them (sim/shadow_schedule.h). Three forms, told apart by the first
// character that is not white space:
//   - a saved `squeue --json` or `sacct --json` reply ('{' and a "jobs" list of Slurm's fields;
//     sim_cli/slurm_json.h);
//   - JSON lines ('{' on every line, one job per line) or CSV with a header (anything else), with
//     the fields:
//       id          required, unique
//       tenant      required (the account, team or user that pays)
//       submit      required, seconds since the epoch
//       gpus        required, whole GPUs over all the job's nodes
//       start, end  seconds since the epoch, when it started and ended (absent or empty: not yet)
//       nodes       where it ran: a hostlist ("tp[1-2]"; in JSON also a list of names)
//       node_count  nodes asked for, for a job not started (default 1)
//       cpus, memory_mib, time_limit (seconds), partition: optional
//       cancelled   true (JSON) or 1 (CSV): ended without starting
// Every figure must keep the bounds of sim/observed_job.h (a node count below 1 is taken as 1).
// Errors name the file, the line and the field; nothing is skipped, clamped or wrapped silently.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "sim/shadow_schedule.h"

namespace tidepool {

// Reads the jobs of `text` (the file's contents; `source` names it in errors).
Result<std::vector<ObservedJob>> read_shadow_trace(const std::string& text,
                                                   const std::string& source);

}  // namespace tidepool
