// Where a command's job trace comes from: --jobs and --format (only "philly" for now). Shared by
// the sim commands that read a multi-tenant trace.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/error.h"
#include "sim/philly_trace.h"

namespace tidepool {

struct TraceSource {
  std::string jobs;
  std::string format = "philly";
};

// Adds --jobs (an existing file; required unless `jobs_required` is false, for a command that
// can take its jobs from elsewhere) and --format to `command`.
void add_trace_options(CLI::App& command, TraceSource& source, bool jobs_required = true);

// Reads the trace; fails naming --format for an unknown format, else with the reader's error.
Result<PhillyTrace> load_trace_source(const TraceSource& source);

}  // namespace tidepool
