// `tidepool sim replay`: a trace's pods arrive at their creation time, queue until they fit and
// leave after their recorded run time (see sim/replay_simulation.h).
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `replay` subcommand to `sim`; its exit status is written to `*exit_code`.
void add_sim_replay_command(CLI::App& sim, int* exit_code);

}  // namespace tidepool
