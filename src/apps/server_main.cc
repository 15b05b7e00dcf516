// tidepool-server: the program behind `tidepool server` and the admin commands that open a store
// (external_command.h).
#include <CLI/CLI.hpp>
#include <string_view>

#include "apps/admin_command.h"
#include "apps/external_command.h"
#include "apps/server_command.h"

int main(int argc, char** argv) {
  CLI::App app("Tidepool: one GPU pool shared by business units", "tidepool");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tidepool 0.1.0");
  int exit_code = 0;
  tidepool::add_server_command(app, &exit_code);
  tidepool::add_store_admin_commands(app, &exit_code);
  const bool admin = argc > 1 && std::string_view(argv[1]) == "admin";
  try {
    app.parse(tidepool::external_program_args(argc, argv, admin ? "admin" : "server"));
  } catch (const CLI::ParseError& error) {
    return tidepool::usage_exit_status(app.exit(error));
  }
  return exit_code;
}
