// `tidepool completion bash|zsh`: prints the shell completion script of every tidepool command
// (completion.h), written from the parser of the whole command line.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

namespace tidepool {

// `whole_parser` builds the parser of every command, which the script is written from.
void add_completion_command(CLI::App& app, std::function<std::unique_ptr<CLI::App>()> whole_parser);

}  // namespace tidepool
