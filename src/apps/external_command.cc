#include "apps/external_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace tidepool {

namespace {

bool opens_a_store(int argc, char** argv) {
  if (argc < 3) return false;
  const std::string_view verb = argv[2];
  if (verb == "restore" || verb == "verify") return true;
  if (verb != "backup") return false;
  for (int i = 3; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--config" || arg.starts_with("--config=")) return true;
  }
  return false;
}

}  // namespace

const ExternalCommand* find_external_command(int argc, char** argv) {
  if (argc < 2) return nullptr;
  if (std::string_view(argv[1]) == kStoreAdminCommand.name && opens_a_store(argc, argv)) {
    return &kStoreAdminCommand;
  }
  for (const ExternalCommand& command : kExternalCommands) {
    if (command.name == argv[1]) return &command;
  }
  return nullptr;
}

Error run_external_command(const ExternalCommand& command, char** argv) {
  const std::string program(command.program);
  std::error_code ignored;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  std::string beside;
  if (!self.empty()) {
    beside = (self.parent_path() / program).string();
    execv(beside.c_str(), argv);
  }
  const int beside_error = errno;
  execvp(program.c_str(), argv);
  return Error{
      "", fmt::format("`tidepool {}` runs the program {}, which is neither beside tidepool ({}: "
                      "{}) nor on PATH ({}); install it with tidepool",
                      command.name, program, beside.empty() ? program : beside,
                      std::strerror(beside_error), std::strerror(errno))};
}

std::vector<std::string> external_program_args(int argc, char** argv, std::string_view name) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);
  if (argc < 2 || argv[1] != name) args.emplace_back(name);
  return args;
}

}  // namespace tidepool
