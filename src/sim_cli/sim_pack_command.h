// `tidepool sim pack`: the FGD packing experiment over traces x policies x seeds.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `pack` subcommand to `sim`; its exit status is written to `*exit_code`.
void add_sim_pack_command(CLI::App& sim, int* exit_code);

}  // namespace tidepool
