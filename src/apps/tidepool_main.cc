// The tidepool command: the user commands, and the front end of the programs behind `tidepool
// server` and `tidepool sim` (external_command.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/exit_status.h"
#include "apps/external_command.h"
#include "cli/client_commands.h"
#include "cli/completion_command.h"
#include "cli/demo_command.h"

namespace {

using AddCommands = void (*)(CLI::App&, int*);

// Every group of commands, in the order --help lists them.
constexpr AddCommands kCommandGroups[] = {
    tidepool::add_job_commands,    tidepool::add_job_control_commands,
    tidepool::add_pool_commands,   tidepool::add_service_commands,
    tidepool::add_token_commands,  tidepool::add_event_commands,
    tidepool::add_market_commands, tidepool::add_admin_commands,
    tidepool::add_demo_command,
};

std::unique_ptr<CLI::App> top_level() {
  auto app =
      std::make_unique<CLI::App>("Tidepool: one GPU pool shared by business units", "tidepool");
  app->require_subcommand(1);
  app->set_version_flag("--version", "tidepool 0.1.0");
  app->footer(std::string(tidepool::exit_status_help()));
  return app;
}

bool has_command(CLI::App& app, const std::string& word) {
  return !app.get_subcommands([&](CLI::App* sub) { return sub->check_name(word); }).empty();
}

// The parser of every command: the external ones (listed for --help; find_external_command runs
// them before parsing), every group, and `completion`, which writes its script from this parser.
std::unique_ptr<CLI::App> whole_parser(int* exit_code) {
  auto app = top_level();
  for (const auto& external : tidepool::kExternalCommands) {
    app->add_subcommand(std::string(external.name), std::string(external.summary) + " (`tidepool " +
                                                        std::string(external.name) + " --help`)")
        ->allow_extras()
        ->prefix_command();
  }
  for (const AddCommands add : kCommandGroups) add(*app, exit_code);
  tidepool::add_completion_command(*app, [exit_code] { return whole_parser(exit_code); });
  return app;
}

// The parser for this command line. Building every command's parser is most of the start-up
// time of a one-shot command such as `tidepool submit` (run once per job, as sbatch is), so a
// line that names a command gets the parser of that command's group alone: it parses and
// answers exactly as the whole one would. Anything else (no command, an option first, an unknown
// word, `completion`) gets every command, so that --help and the errors list them all.
std::unique_ptr<CLI::App> parser_for(int argc, char** argv, int* exit_code) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    for (const AddCommands add : kCommandGroups) {
      auto app = top_level();
      add(*app, exit_code);
      if (has_command(*app, word)) return app;
    }
  }
  return whole_parser(exit_code);
}

// The edit distance between two words (insertions, deletions, substitutions).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "unknown command 'jbos'; did you mean 'jobs'?": the nearest commands (at most 2 edits, or
// those that start with the word).
std::string unknown_command(CLI::App& app, const std::string& word) {
  std::vector<std::string> near;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    if (edit_distance(word, name) <= 2 || (word.size() >= 2 && name.starts_with(word))) {
      near.push_back("'" + name + "'");
    }
  }
  std::string text = "unknown command '" + word + "'";
  if (!near.empty()) {
    text += "; did you mean ";
    for (std::size_t i = 0; i < near.size(); ++i) {
      text += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + near[i];
    }
    text += "?";
  }
  return text + "\nRun 'tidepool --help' for the commands.";
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
  if (argc > 1 && argv[1][0] != '-' && !has_command(*app, argv[1])) {
    std::fprintf(stderr, "error: %s\n", unknown_command(*app, argv[1]).c_str());
    return static_cast<int>(tidepool::ExitStatus::kUsage);
  }
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version end with 0; every usage error with the one status of usage errors.
    return tidepool::usage_exit_status(app->exit(error));
  }
  return exit_code;
}
