// The tidepool command: the user commands, and the front end of the programs behind `tidepool
// server` and `tidepool sim` (external_command.h).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "cli/client_commands.h"
#include "cli/demo_command.h"
#include "cli/external_command.h"

int main(int argc, char** argv) {
  // A server that closes the connection makes a write fail with EPIPE, not end the command.
  std::signal(SIGPIPE, SIG_IGN);
  if (const auto* external = tidepool::find_external_command(argc, argv); external != nullptr) {
    const tidepool::Error error = tidepool::run_external_command(*external, argv);
    std::fprintf(stderr, "error: %s\n", error.message().c_str());
    return 127;
  }

  CLI::App app("Tidepool: one GPU pool shared by business units", "tidepool");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tidepool 0.1.0");
  int exit_code = 0;
  for (const auto& external : tidepool::kExternalCommands) {
    // Listed for --help; find_external_command runs them before parsing.
    app.add_subcommand(std::string(external.name), std::string(external.summary) + " (`tidepool " +
                                                       std::string(external.name) + " --help`)")
        ->allow_extras()
        ->prefix_command();
  }
  tidepool::add_client_commands(app, &exit_code);
  tidepool::add_demo_command(app, &exit_code);

  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
