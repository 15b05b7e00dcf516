// Shell completion of the tidepool command (`tidepool completion bash|zsh`), written from the
// command parser itself, so that a new command, option or -o form completes without anyone
// editing a script: the commands and subcommands at each level, each command's options, the
// values of an option that takes one of a set (-o table|wide|...), and file names where a
// command or option reads a file. Pure: builds text from the parser.
#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tidepool {

// What completion needs to know of one command.
struct CommandShape {
  struct Flag {
    std::vector<std::string> names;    // "-o", "--output"
    bool takes_value = false;          // --server URL, unlike --all
    std::vector<std::string> choices;  // the values of an option checked as one of a set
    bool file = false;                 // its value is a file name
  };
  std::vector<std::string> path;  // the words after the program: {"token", "list"}; {} the top
  std::string summary;
  std::vector<std::string> subcommands;
  std::vector<Flag> flags;
  bool takes_files = false;  // a positional argument that is a file (submit FILE...)
};

// Every command of `app`, the top level first, then depth first in the order --help lists them.
// Words a shell would need to quote are left out (none of Tidepool's are).
std::vector<CommandShape> command_shapes(const CLI::App& app);

// The completion script of `program` for bash (`source <(tidepool completion bash)`), and for zsh
// (the same function through zsh's bashcompinit, so the two cannot drift).
std::string bash_completion(std::span<const CommandShape> shapes, std::string_view program);
std::string zsh_completion(std::span<const CommandShape> shapes, std::string_view program);

}  // namespace tidepool
