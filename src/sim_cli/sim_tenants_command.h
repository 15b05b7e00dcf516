// `tidepool sim tenants-from-trace`: a tenants file derived from a job trace, one tenant per team
// of the trace with guarantees in proportion to its share of GPU time (sim/tenants_from_trace.h).
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `tenants-from-trace` subcommand to `sim`; its exit status is written to `*exit_code`.
void add_sim_tenants_command(CLI::App& sim, int* exit_code);

}  // namespace tidepool
