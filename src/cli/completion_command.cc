#include "cli/completion_command.h"

#include <cstdio>
#include <string>

#include "cli/completion.h"

namespace tidepool {

void add_completion_command(CLI::App& app,
                            std::function<std::unique_ptr<CLI::App>()> whole_parser) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("completion", "Print the shell completion script of tidepool");
  cmd->add_option("SHELL", *shell, "The shell: bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  cmd->footer(
      "Load it in the current shell, or add the line to ~/.bashrc or ~/.zshrc:\n"
      "  source <(tidepool completion bash)\n"
      "  source <(tidepool completion zsh)\n"
      "It completes the commands, their options, the values of -o and of other options that\n"
      "take one of a set, and file names where a command reads a file.");
  cmd->callback([shell, whole_parser = std::move(whole_parser)] {
    const std::unique_ptr<CLI::App> whole = whole_parser();
    const auto shapes = command_shapes(*whole);
    const std::string script =
        *shell == "zsh" ? zsh_completion(shapes, "tidepool") : bash_completion(shapes, "tidepool");
    std::fwrite(script.data(), 1, script.size(), stdout);
  });
}

}  // namespace tidepool
