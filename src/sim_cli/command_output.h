// Runs a program (found on PATH) with arguments and collects what it writes, for the commands
// that ask another system (`tidepool shadow --slurm` runs squeue, sacct and sinfo). No shell: the
// arguments are passed as they are.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"

namespace tidepool {

struct CommandOutput {
  int exit_status = 0;  // the program's exit status; 128 + N when signal N ended it
  std::string out;      // its standard output
  std::string err;      // its standard error (the last 64 KiB)
};

// Runs argv[0] with argv, in this process' environment, and waits for it, at most `timeout`: past
// it the program is killed (SIGKILL, by its PID) and the run fails. Fails when the program cannot
// be started; a program that runs and fails is a CommandOutput with its status.
Result<CommandOutput> run_command(const std::vector<std::string>& argv,
                                  std::chrono::seconds timeout);

}  // namespace tidepool
