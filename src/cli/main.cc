// The tidepool command: the user commands, and the front end of the programs behind `tidepool
// server` and `tidepool sim` (external_command.h).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/client_commands.h"
#include "cli/demo_command.h"
#include "cli/external_command.h"

namespace {

using AddCommands = void (*)(CLI::App&, int*);

// Every group of commands, in the order --help lists them.
constexpr AddCommands kCommandGroups[] = {
    tidepool::add_job_commands,    tidepool::add_pool_commands, tidepool::add_token_commands,
    tidepool::add_market_commands, tidepool::add_demo_command,
};

std::unique_ptr<CLI::App> top_level() {
  auto app =
      std::make_unique<CLI::App>("Tidepool: one GPU pool shared by business units", "tidepool");
  app->require_subcommand(1);
  app->set_version_flag("--version", "tidepool 0.1.0");
  return app;
}

bool has_command(CLI::App& app, const std::string& word) {
  return !app.get_subcommands([&](CLI::App* sub) { return sub->check_name(word); }).empty();
}

// The parser for this command line. Building every command's parser is most of the start-up
// time of a one-shot command such as `tidepool submit` (run once per job, as sbatch is), so a
// line that names a command gets the parser of that command's group alone: it parses and
// answers exactly as the whole one would. Anything else (no command, an option first, an unknown
// word) gets every command, so that --help and the errors list them all.
std::unique_ptr<CLI::App> parser_for(int argc, char** argv, int* exit_code) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    for (const AddCommands add : kCommandGroups) {
      auto app = top_level();
      add(*app, exit_code);
      if (has_command(*app, word)) return app;
    }
  }
  auto app = top_level();
  for (const auto& external : tidepool::kExternalCommands) {
    // Listed for --help; find_external_command runs them before parsing.
    app->add_subcommand(std::string(external.name), std::string(external.summary) + " (`tidepool " +
                                                        std::string(external.name) + " --help`)")
        ->allow_extras()
        ->prefix_command();
  }
  for (const AddCommands add : kCommandGroups) add(*app, exit_code);
  return app;
}

}  // namespace

int main(int argc, char** argv) {
  // A server that closes the connection makes a write fail with EPIPE, not end the command.
  std::signal(SIGPIPE, SIG_IGN);
  if (const auto* external = tidepool::find_external_command(argc, argv); external != nullptr) {
    const tidepool::Error error = tidepool::run_external_command(*external, argv);
    std::fprintf(stderr, "error: %s\n", error.message().c_str());
    return 127;
  }
  int exit_code = 0;
  const std::unique_ptr<CLI::App> app = parser_for(argc, argv, &exit_code);
  CLI11_PARSE(*app, argc, argv);
  return exit_code;
}
