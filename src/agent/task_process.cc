#include "agent/task_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cassert>
#include <cerrno>
#include <string_view>

namespace tidepool {
namespace {

// Where a command without '/' is looked up when the task's environment has no PATH.
constexpr std::string_view kDefaultPath = "/usr/bin:/bin";

// Signals the task starts with at their default action: the ones an agent or its parent commonly
// ignores (SIG_IGN, unlike a handler, survives exec).
constexpr std::array kDefaultSignals{SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGALRM, SIGTERM,
                                     SIGUSR1, SIGUSR2, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU};

// strerror's text, without strerror's shared buffer (the agent has threads).
std::string system_reason(int error) {
  const char* text = ::strerrordesc_np(error);
  return text != nullptr ? text : fmt::format("error {}", error);
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig); abbrev != nullptr)
    return fmt::format("SIG{}", abbrev);
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return fmt::format("SIGRTMIN+{}", sig - SIGRTMIN);
  return "unknown signal";
}

// A file descriptor of the agent, closed at the end of the scope.
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

// open() with O_CLOEXEC, moved to a number of 3 or more: when the agent runs with 0, 1 or 2
// closed, the file could otherwise get one of them and be overwritten by the child's own dup2s
// before it is copied. -1 with errno set on failure.
int open_above_stdio(const char* path, int flags, mode_t mode = 0) {
  const int fd = ::open(path, flags | O_CLOEXEC, mode);
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int error = errno;
  ::close(fd);
  errno = error;
  return moved;
}

class SpawnFileActions {
 public:
  SpawnFileActions() { ::posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { ::posix_spawnattr_init(&attributes_); }
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

bool holds_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

Result<void> check_launch(const TaskLaunch& launch) {
  if (launch.command.empty()) {
    return fail("command", "is empty; give the program to run and its arguments");
  }
  if (launch.command.front().empty()) return fail("command", "the program name is empty");
  for (std::size_t i = 0; i < launch.command.size(); ++i) {
    if (holds_nul(launch.command[i])) {
      return fail("command", fmt::format("argument {} holds a NUL character", i));
    }
  }
  for (const auto& [name, value] : launch.environment) {
    if (name.empty()) return fail("environment", "a variable has an empty name");
    if (name.find('=') != std::string::npos || holds_nul(name) || holds_nul(value)) {
      return fail("environment",
                  fmt::format("\"{}\" is not a variable name (it holds '=' or a NUL character)",
                              name.substr(0, name.find('\0'))));
    }
  }
  if (launch.log_path.empty()) {
    return fail("log_path", "is empty; the task's output needs a file (/dev/null to drop it)");
  }
  if (!launch.working_dir.empty()) {
    struct stat info {};
    if (::stat(launch.working_dir.c_str(), &info) != 0) {
      const int error = errno;
      return fail("working_dir",
                  error == ENOENT
                      ? fmt::format("{}: does not exist", launch.working_dir)
                      : fmt::format("{}: {}", launch.working_dir, system_reason(error)));
    }
    if (!S_ISDIR(info.st_mode)) {
      return fail("working_dir", fmt::format("{}: is not a folder", launch.working_dir));
    }
    // Checked here because the child's chdir failing would come back from posix_spawn as if exec
    // had failed.
    if (::access(launch.working_dir.c_str(), X_OK) != 0) {
      return fail("working_dir", fmt::format("{}: {}", launch.working_dir, system_reason(errno)));
    }
  }
  return {};
}

// The file to exec for command[0]: as posix_spawnp and execvp search, but in the task's PATH
// rather than the agent's.
Result<std::string> find_program(const TaskLaunch& launch) {
  const std::string& name = launch.command.front();
  if (name.find('/') != std::string::npos) return name;
  std::string_view search = kDefaultPath;
  for (const auto& [variable, value] : launch.environment) {
    if (variable == "PATH") {
      search = value;  // the first one, as getenv finds it
      break;
    }
  }
  bool denied = false;
  std::string_view rest = search;
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view folder = rest.substr(0, colon);
    if (!folder.empty() && folder.front() == '/') {
      std::string candidate(folder);
      if (candidate.back() != '/') candidate += '/';
      candidate += name;
      struct stat info {};
      if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        denied = true;  // execvp goes on looking, and reports EACCES if nothing else is found
      }
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (denied) {
    return fail("command", fmt::format("{}: permission denied (found in PATH {}, not executable)",
                                       name, search));
  }
  return fail("command", fmt::format("{}: not found in PATH {}", name, search));
}

// The exit of a leader that waitpid could not reap (`error`: its errno); ECHILD when the kernel
// reaped it already because SIGCHLD was ignored.
TaskExit lost_exit(int error) {
  return TaskExit{.exit_code = -1,
                  .signal = 0,
                  .reason = fmt::format("exit status lost: {} (does the agent ignore SIGCHLD?)",
                                        system_reason(error))};
}

}  // namespace

TaskExit task_exit_from_wait_status(int status) {
  TaskExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
    exit.reason = fmt::format("exited with status {}", exit.exit_code);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
    exit.reason = fmt::format("killed by signal {} ({})", exit.signal, signal_name(exit.signal));
    if (WCOREDUMP(status)) exit.reason += ", core dumped";
  } else {
    exit.reason = fmt::format("ended with wait status {:#x}", status);
  }
  return exit;
}

Result<TaskProcess> TaskProcess::start(const TaskLaunch& launch) {
  if (auto checked = check_launch(launch); !checked) return std::unexpected(checked.error());
  auto program = find_program(launch);
  if (!program) return std::unexpected(program.error());

  const OwnedFd log(open_above_stdio(launch.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
  if (log.get() < 0) {
    return fail("log_path", fmt::format("{}: cannot open it for appending: {}", launch.log_path,
                                        system_reason(errno)));
  }
  const OwnedFd null_input(open_above_stdio("/dev/null", O_RDONLY));
  if (null_input.get() < 0) {
    return fail(
        "", fmt::format("cannot open /dev/null for the task's stdin: {}", system_reason(errno)));
  }

  // In the child, in this order, between fork and exec.
  SpawnFileActions actions;
  int status = ::posix_spawn_file_actions_adddup2(actions.get(), null_input.get(), STDIN_FILENO);
  for (const int output : {STDOUT_FILENO, STDERR_FILENO}) {
    if (status == 0) status = ::posix_spawn_file_actions_adddup2(actions.get(), log.get(), output);
  }
  if (status == 0 && !launch.working_dir.empty()) {
    status = ::posix_spawn_file_actions_addchdir_np(actions.get(), launch.working_dir.c_str());
  }
  if (status == 0) {
    // Everything the agent opens is O_CLOEXEC already; this also keeps out descriptors that a
    // library opened without it or that the agent inherited from whoever started it.
    status = ::posix_spawn_file_actions_addclosefrom_np(actions.get(), STDERR_FILENO + 1);
  }

  SpawnAttributes attributes;
  sigset_t empty_mask;
  sigset_t defaults;
  ::sigemptyset(&empty_mask);
  ::sigemptyset(&defaults);
  for (const int sig : kDefaultSignals) ::sigaddset(&defaults, sig);
  if (status == 0) {
    status = ::posix_spawnattr_setflags(
        attributes.get(), POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  if (status == 0) status = ::posix_spawnattr_setpgroup(attributes.get(), 0);  // a group of its own
  if (status == 0) status = ::posix_spawnattr_setsigmask(attributes.get(), &empty_mask);
  if (status == 0) status = ::posix_spawnattr_setsigdefault(attributes.get(), &defaults);
  if (status != 0) {
    return fail("", fmt::format("cannot prepare the task's launch: {}", system_reason(status)));
  }

  std::vector<char*> argv;
  argv.reserve(launch.command.size() + 1);
  for (const std::string& argument : launch.command) {
    argv.push_back(const_cast<char*>(argument.c_str()));  // exec's signature; never written
  }
  argv.push_back(nullptr);
  std::vector<std::string> variables;
  variables.reserve(launch.environment.size());
  for (const auto& [name, value] : launch.environment) variables.push_back(name + "=" + value);
  std::vector<char*> envp;
  envp.reserve(variables.size() + 1);
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  // glibc's posix_spawn waits until the child has exec'd, and returns the errno of a failed exec
  // (or of a failed file action: the working folder was checked above, so it is the exec's).
  status = ::posix_spawn(&pid, program->c_str(), actions.get(), attributes.get(), argv.data(),
                         envp.data());
  if (status != 0) {
    const std::string& name = launch.command.front();
    switch (status) {
      case ENOENT:
        return fail("command", fmt::format("{}: not found", name));
      case EACCES:
        return fail("command", fmt::format("{}: permission denied", name));
      default:
        return fail("command", fmt::format("{}: cannot run it: {}", name, system_reason(status)));
    }
  }
  return TaskProcess(pid);
}

TaskProcess::TaskProcess(TaskProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_(std::exchange(other.exit_, std::nullopt)),
      group_gone_(std::exchange(other.group_gone_, false)) {}

TaskProcess& TaskProcess::operator=(TaskProcess&& other) noexcept {
  if (this != &other) {
    end();
    pid_ = std::exchange(other.pid_, -1);
    exit_ = std::exchange(other.exit_, std::nullopt);
    group_gone_ = std::exchange(other.group_gone_, false);
  }
  return *this;
}

TaskProcess::~TaskProcess() { end(); }

void TaskProcess::end() {
  if (pid_ > 0 && !exit_) {
    // The unreaped leader holds the group id, so this reaches this task's group and no other.
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    exit_ = task_exit_from_wait_status(status);
    reap_group_members();
  }
  pid_ = -1;
  exit_.reset();
  group_gone_ = false;
}

void TaskProcess::reap_group_members() const {
  if (pid_ <= 0 || !exit_) return;
  while (true) {
    const pid_t reaped = ::waitpid(-pid_, nullptr, WNOHANG);
    if (reaped > 0 || (reaped < 0 && errno == EINTR)) continue;
    return;  // 0: members left, none ended; ECHILD: none is a child of the agent
  }
}

Result<void> TaskProcess::signal_group(int sig) {
  assert(pid_ > 0 && "signal_group on a TaskProcess that owns no process");
  if (pid_ <= 0) return fail("signal", "this task owns no process (it was moved from)");
  if (group_gone_) return {};
  if (::kill(-pid_, sig) == 0) return {};
  const int error = errno;
  if (error == ESRCH) {
    if (exit_) group_gone_ = true;
    return {};
  }
  if (error == EINVAL) return fail("signal", fmt::format("{} is not a signal", sig));
  return fail("signal", fmt::format("cannot send {} to process group {}: {}", signal_name(sig),
                                    pid_, system_reason(error)));
}

std::optional<TaskExit> TaskProcess::poll() {
  if (pid_ <= 0) return std::nullopt;
  if (!exit_) {
    int status = 0;
    pid_t reaped = -1;
    do {
      reaped = ::waitpid(pid_, &status, WNOHANG);
    } while (reaped < 0 && errno == EINTR);
    if (reaped == 0) return std::nullopt;
    if (reaped == pid_) {
      exit_ = task_exit_from_wait_status(status);
    } else {
      exit_ = lost_exit(errno);
    }
  }
  reap_group_members();
  return exit_;
}

TaskExit TaskProcess::wait() {
  assert(pid_ > 0 && "wait on a TaskProcess that owns no process");
  if (pid_ <= 0) return TaskExit{.exit_code = -1, .signal = 0, .reason = "no process"};
  if (!exit_) {
    int status = 0;
    pid_t reaped = -1;
    do {
      reaped = ::waitpid(pid_, &status, 0);
    } while (reaped < 0 && errno == EINTR);
    if (reaped == pid_) {
      exit_ = task_exit_from_wait_status(status);
    } else {
      exit_ = lost_exit(errno);
    }
  }
  return *poll();
}

bool TaskProcess::group_alive() const {
  if (pid_ <= 0 || group_gone_) return false;
  if (::kill(-pid_, 0) == 0 || errno == EPERM) return true;
  // With the leader reaped and no member left, nothing can join the group again.
  if (exit_) group_gone_ = true;
  return false;
}

}  // namespace tidepool
