// `tidepool shadow`: follows another scheduler's job stream (Slurm's, polled with squeue and,
// where accounting runs, sacct; or a trace file) and runs Tidepool's scheduler beside it on the
// same jobs and nodes without acting (sim/shadow_schedule.h), then reports both side by side
// (sim_cli/shadow_report.h).
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `shadow` command to `app`; its exit status is written to `*exit_code`.
void add_shadow_command(CLI::App& app, int* exit_code);

}  // namespace tidepool
