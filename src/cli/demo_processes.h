// The processes of `tidepool demo`: the server and the agents it starts as its children, and the
// job processes the agents start, which it finds again by a marker in their environment.
//
// Children run in process groups of their own, so that Ctrl-C in the terminal reaches the demo
// only and the demo decides the order of the shutdown (agents first, then the server). Each gets
// SIGTERM should the demo die without stopping it (PR_SET_PDEATHSIG), stdin from /dev/null and
// stdout and stderr appended to its log file. Not thread-safe; the demo is single-threaded, which
// fork() needs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tidepool {

// The environment variable that marks the job processes of one demo run: the demo adds it to
// every spec it submits, with the run folder as its value.
inline constexpr const char* kDemoRunEnv = "DEMO_RUN_DIR";

// The program `name`: the one in the folder of the running executable if it is there and
// executable, else the first on PATH. The error names both places.
Result<std::string> locate_program(const std::string& name);

// The folder of the running executable (from /proc/self/exe); empty if unknown.
std::string executable_dir();

class DemoChild {
 public:
  // Starts argv[0] (a path) with `argv`, output appended to `log_path`.
  static Result<DemoChild> start(std::string label, const std::vector<std::string>& argv,
                                 const std::string& log_path);

  DemoChild(DemoChild&& other) noexcept;
  DemoChild& operator=(DemoChild&& other) noexcept;
  DemoChild(const DemoChild&) = delete;
  DemoChild& operator=(const DemoChild&) = delete;
  ~DemoChild();  // kills (SIGKILL) and reaps a child still running

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] const std::string& label() const { return label_; }
  [[nodiscard]] const std::string& log_path() const { return log_path_; }

  // Reaps the child if it has exited; whether it still runs.
  bool running();
  // How it ended ("exited with status 1", "killed by signal 9"); empty while it runs.
  [[nodiscard]] const std::string& exit_reason() const { return exit_reason_; }
  // Sends `signal` to the child (not to its group) if it runs.
  void send(int signal);

 private:
  DemoChild(std::string label, pid_t pid, std::string log_path)
      : label_(std::move(label)), pid_(pid), log_path_(std::move(log_path)) {}

  std::string label_;
  pid_t pid_ = -1;
  std::string log_path_;
  std::string exit_reason_;
};

// How a stop went, for each process: "stopped" or "killed after 10 s" (or "killed").
struct StopOutcome {
  std::string label;
  std::string how;
};

// Sends SIGTERM to every child still running and waits for them up to `grace`, polling every 50
// ms; SIGKILLs those left then (or at once when `hurry` returns true) and reaps them.
std::vector<StopOutcome> stop_children(const std::vector<DemoChild*>& children,
                                       std::chrono::milliseconds grace,
                                       const std::function<bool()>& hurry);

// The live processes (zombies left out) whose environment holds NAME=VALUE exactly, other than
// this process; those of other users, whose environment cannot be read, are never found.
std::vector<pid_t> processes_with_env(const std::string& name, const std::string& value);

// Stops the processes with NAME=VALUE in their environment as stop_children does: SIGTERM, up to
// `grace`, then SIGKILL. Returns how many were found.
int stop_marked_processes(const std::string& name, const std::string& value,
                          std::chrono::milliseconds grace, const std::function<bool()>& hurry);

// The last `lines` lines of the file at `path` (empty if it cannot be read).
std::string tail_of_file(const std::string& path, int lines);

}  // namespace tidepool
