#include "sim_cli/trace_source.h"

namespace tidepool {

void add_trace_options(CLI::App& command, TraceSource& source, bool jobs_required) {
  command
      .add_option("--jobs", source.jobs,
                  "job trace (philly: timestamp,duration,num_gpus,gpu_time,cluster)")
      ->required(jobs_required)
      ->check(CLI::ExistingFile);
  command.add_option("--format", source.format, "trace format (philly)")->capture_default_str();
}

Result<PhillyTrace> load_trace_source(const TraceSource& source) {
  if (source.format != "philly") {
    return fail("--format", "unknown trace format '" + source.format + "'; expected philly");
  }
  return load_philly_jobs(source.jobs);
}

}  // namespace tidepool
