// tidepool-sim: the program behind `tidepool sim`, `tidepool plan` and `tidepool shadow`
// (external_command.h).
#include <CLI/CLI.hpp>
#include <string_view>

#include "apps/external_command.h"
#include "sim_cli/plan_capacity_command.h"
#include "sim_cli/plan_tco_command.h"
#include "sim_cli/shadow_command.h"
#include "sim_cli/sim_pack_command.h"
#include "sim_cli/sim_replay_command.h"
#include "sim_cli/sim_run_command.h"
#include "sim_cli/sim_tenants_command.h"

int main(int argc, char** argv) {
  CLI::App app("Tidepool: one GPU pool shared by business units", "tidepool");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tidepool 0.1.0");
  int exit_code = 0;
  CLI::App* sim =
      app.add_subcommand("sim", "Trace-driven simulation with the scheduler's own code");
  sim->require_subcommand(1);
  tidepool::add_sim_pack_command(*sim, &exit_code);
  tidepool::add_sim_replay_command(*sim, &exit_code);
  tidepool::add_sim_run_command(*sim, &exit_code);
  tidepool::add_sim_tenants_command(*sim, &exit_code);
  CLI::App* plan = app.add_subcommand(
      "plan",
      "Capacity and cost planning: the smallest pool for a queueing target, TCO of owning GPUs");
  plan->require_subcommand(1);
  tidepool::add_plan_capacity_command(*plan, &exit_code);
  tidepool::add_plan_tco_command(*plan, &exit_code);
  tidepool::add_shadow_command(app, &exit_code);
  // `tidepool-sim plan|shadow ...` and `tidepool-sim sim ...`; any other first word is taken as
  // `sim`'s.
  const std::string_view first = argc >= 2 ? std::string_view(argv[1]) : std::string_view();
  const char* command = first == "plan" || first == "shadow" ? argv[1] : "sim";
  try {
    app.parse(tidepool::external_program_args(argc, argv, command));
  } catch (const CLI::ParseError& error) {
    return tidepool::usage_exit_status(app.exit(error));
  }
  return exit_code;
}
