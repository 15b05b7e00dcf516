#include "agent/task_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <string_view>

#include "agent/system_reason.h"
#include "api/owned_fd.h"

namespace tidepool {
namespace {

// Where a command without '/' is looked up when the task's environment has no PATH.
constexpr std::string_view kDefaultPath = "/usr/bin:/bin";

// Signals the task starts with at their default action: the ones an agent or its parent commonly
// ignores (SIG_IGN, unlike a handler, survives exec).
constexpr std::array kDefaultSignals{SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGALRM, SIGTERM,
                                     SIGUSR1, SIGUSR2, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU};

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig); abbrev != nullptr)
    return fmt::format("SIG{}", abbrev);
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return fmt::format("SIGRTMIN+{}", sig - SIGRTMIN);
  return "unknown signal";
}

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

// What a child that could not exec tells the agent through the error pipe.
enum class ChildStage : int {
  kJoinCgroup = 1,
  kMount,
  kFork,
  kIdentity,
  kNoNewPrivs,
  kChdir,
  kStdio,
  kExec,
};
struct ChildFailure {
  int stage = 0;
  int error = 0;
};

// Everything the child needs, prepared before the fork: the child allocates nothing.
struct ChildPlan {
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_dir = nullptr;  // nullptr: stay
  int log_fd = -1;
  int null_fd = -1;
  int cgroup_fd = -1;  // cgroup.procs, opened for writing; -1: none
  int error_fd = -1;   // the error pipe's write end (O_CLOEXEC: closed by a successful exec)
  int status_fd = -1;  // with a namespace: where the init writes the command's wait status
  int uid = -1;
  int gid = -1;
  bool own_namespace = false;
};

// fork() without glibc's fork handlers, which are not safe in a child of a threaded program; with
// `flags` such as CLONE_NEWPID. The child runs on a copy of the caller's stack.
pid_t raw_fork(unsigned long flags) {
  return static_cast<pid_t>(
      ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
}

[[noreturn]] void child_fails(const ChildPlan& plan, ChildStage stage, int error) {
  const ChildFailure failure{static_cast<int>(stage), error};
  (void)!::write(plan.error_fd, &failure, sizeof failure);
  ::_exit(127);
}

// The job's command: in the child (or the namespace's PID 2), from here to exec.
[[noreturn]] void exec_command(const ChildPlan& plan) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &default_action, nullptr);
  if (::dup2(plan.null_fd, STDIN_FILENO) < 0 || ::dup2(plan.log_fd, STDOUT_FILENO) < 0 ||
      ::dup2(plan.log_fd, STDERR_FILENO) < 0) {
    child_fails(plan, ChildStage::kStdio, errno);
  }
  // Every descriptor above 2 closes at exec, whoever opened it; the error pipe stays open until
  // then, so a failure below can still be told.
  if (::syscall(SYS_close_range, STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = STDERR_FILENO + 1; fd < 4096; ++fd) (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (plan.uid >= 0) {
    // Raw system calls: glibc's setuid would try to signal the agent's other threads.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) != 0 ||
        ::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) != 0) {
      child_fails(plan, ChildStage::kIdentity, errno);
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      child_fails(plan, ChildStage::kNoNewPrivs, errno);
    }
  }
  if (plan.working_dir != nullptr && ::chdir(plan.working_dir) != 0) {
    child_fails(plan, ChildStage::kChdir, errno);
  }
  sigset_t empty;
  ::sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  ::execve(plan.program, plan.argv, plan.envp);
  child_fails(plan, ChildStage::kExec, errno);
}

// The namespace's init (PID 1): starts the command as PID 2, reaps every orphan of the namespace,
// and exits when the command has, after writing its wait status for the agent.
[[noreturn]] void namespace_init(const ChildPlan& plan) {
  // Private mounts first, so that the fresh /proc does not propagate to the agent's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    child_fails(plan, ChildStage::kMount, errno);
  }
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  const pid_t command = raw_fork(0);
  if (command < 0) child_fails(plan, ChildStage::kFork, errno);
  if (command == 0) exec_command(plan);
  // The init keeps only the status pipe: not the agent's sockets and files, nor the error pipe
  // (the agent waits for its end of file).
  (void)::dup2(plan.null_fd, STDIN_FILENO);
  (void)::dup2(plan.null_fd, STDOUT_FILENO);
  (void)::dup2(plan.null_fd, STDERR_FILENO);
  if (plan.status_fd > STDERR_FILENO + 1) {
    (void)::syscall(SYS_close_range, STDERR_FILENO + 1, plan.status_fd - 1, 0);
  }
  (void)::syscall(SYS_close_range, plan.status_fd + 1, ~0U, 0);
  while (true) {
    siginfo_t info{};
    if (::sigwaitinfo(&all, &info) != SIGCHLD) continue;  // the group's signals are not for it
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (reaped != command) continue;
      (void)!::write(plan.status_fd, &status, sizeof status);
      ::_exit(0);  // the kernel kills the rest of the namespace
    }
  }
}

[[noreturn]] void child_main(const ChildPlan& plan) {
  if (plan.cgroup_fd >= 0 && ::write(plan.cgroup_fd, "0", 1) != 1) {
    child_fails(plan, ChildStage::kJoinCgroup, errno);
  }
  (void)::setpgid(0, 0);  // a group of its own, whose id is this pid
  if (plan.own_namespace) namespace_init(plan);
  exec_command(plan);
}

std::string child_failure_text(const TaskLaunch& launch, const ChildFailure& failure) {
  const std::string reason = system_reason(failure.error);
  const std::string& name = launch.command.front();
  switch (static_cast<ChildStage>(failure.stage)) {
    case ChildStage::kJoinCgroup:
      return fmt::format("cannot join the cgroup ({}): {}", launch.cgroup_procs, reason);
    case ChildStage::kMount:
      return fmt::format("cannot mount a fresh /proc in the task's namespace: {}", reason);
    case ChildStage::kFork:
      return fmt::format("the namespace's init cannot fork: {}", reason);
    case ChildStage::kIdentity:
      return fmt::format("cannot switch to uid {} gid {}: {}", launch.uid, launch.gid, reason);
    case ChildStage::kNoNewPrivs:
      return fmt::format("cannot set no_new_privs: {}", reason);
    case ChildStage::kChdir:
      return fmt::format("{}: {}", launch.working_dir, reason);
    case ChildStage::kStdio:
      return fmt::format("cannot set up stdin, stdout and stderr: {}", reason);
    case ChildStage::kExec:
      break;
  }
  switch (failure.error) {
    case ENOENT:
      return fmt::format("{}: not found", name);
    case EACCES:
      return fmt::format("{}: permission denied", name);
    default:
      return fmt::format("{}: cannot run it: {}", name, reason);
  }
}

std::string_view child_failure_field(const ChildFailure& failure) {
  switch (static_cast<ChildStage>(failure.stage)) {
    case ChildStage::kChdir:
      return "working_dir";
    case ChildStage::kExec:
      return "command";
    case ChildStage::kStdio:
      return "log_path";
    default:
      return "isolation";
  }
}

bool wants_isolation(const TaskLaunch& launch) {
  return launch.uid >= 0 || launch.gid >= 0 || launch.own_pid_namespace ||
         !launch.cgroup_procs.empty();
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
  if ((launch.uid >= 0) != (launch.gid >= 0)) {
    return fail("isolation", "give the task both a uid and a gid, or neither");
  }
  const bool isolated = wants_isolation(launch);

  const OwnedFd log(open_above_stdio(launch.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     isolated ? 0600 : 0644));
  if (log.get() < 0) {
    return fail("log_path", fmt::format("{}: cannot open it for appending: {}", launch.log_path,
                                        system_reason(errno)));
  }
  const OwnedFd null_input(open_above_stdio("/dev/null", O_RDONLY));
  if (null_input.get() < 0) {
    return fail(
        "", fmt::format("cannot open /dev/null for the task's stdin: {}", system_reason(errno)));
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

  if (isolated) {
    return start_isolated(launch, *program, argv.data(), envp.data(), log.get(), null_input.get());
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
  return TaskProcess(pid, -1);
}

Result<TaskProcess> TaskProcess::start_isolated(const TaskLaunch& launch,
                                                const std::string& program, char* const* argv,
                                                char* const* envp, int log_fd, int null_fd) {
  std::optional<OwnedFd> cgroup;
  if (!launch.cgroup_procs.empty()) {
    cgroup.emplace(open_above_stdio(launch.cgroup_procs.c_str(), O_WRONLY));
    if (cgroup->get() < 0) {
      return fail("isolation",
                  fmt::format("cannot open {}: {}", launch.cgroup_procs, system_reason(errno)));
    }
  }
  int error_pipe[2] = {-1, -1};
  int status_pipe[2] = {-1, -1};
  if (::pipe2(error_pipe, O_CLOEXEC) != 0 ||
      (launch.own_pid_namespace && ::pipe2(status_pipe, O_CLOEXEC) != 0)) {
    const int error = errno;
    for (int fd : {error_pipe[0], error_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return fail("",
                fmt::format("cannot make a pipe for the task's start: {}", system_reason(error)));
  }
  const ChildPlan plan{
      .program = program.c_str(),
      .argv = argv,
      .envp = envp,
      .working_dir = launch.working_dir.empty() ? nullptr : launch.working_dir.c_str(),
      .log_fd = log_fd,
      .null_fd = null_fd,
      .cgroup_fd = cgroup ? cgroup->get() : -1,
      .error_fd = error_pipe[1],
      .status_fd = status_pipe[1],
      .uid = launch.uid,
      .gid = launch.gid,
      .own_namespace = launch.own_pid_namespace};
  const pid_t pid = raw_fork(launch.own_pid_namespace ? CLONE_NEWPID | CLONE_NEWNS : 0);
  if (pid == 0) child_main(plan);
  const int fork_error = errno;
  ::close(error_pipe[1]);
  if (status_pipe[1] >= 0) ::close(status_pipe[1]);
  if (pid < 0) {
    ::close(error_pipe[0]);
    if (status_pipe[0] >= 0) ::close(status_pipe[0]);
    return fail(
        "isolation",
        fmt::format("cannot start the task{}: {}",
                    launch.own_pid_namespace ? " in PID and mount namespaces of its own" : "",
                    system_reason(fork_error)));
  }
  // End of file once the command exec'd (the pipe is O_CLOEXEC) or every holder ended.
  ChildFailure failure;
  std::size_t got = 0;
  while (got < sizeof failure) {
    const ssize_t n =
        ::read(error_pipe[0], reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(error_pipe[0]);
  if (got == sizeof failure) {
    if (launch.own_pid_namespace) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (status_pipe[0] >= 0) ::close(status_pipe[0]);
    return fail(std::string(child_failure_field(failure)), child_failure_text(launch, failure));
  }
  if (status_pipe[0] >= 0) (void)::fcntl(status_pipe[0], F_SETFL, O_NONBLOCK);
  return TaskProcess(pid, status_pipe[0]);
}

TaskProcess::TaskProcess(TaskProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      status_fd_(std::exchange(other.status_fd_, -1)),
      exit_(std::exchange(other.exit_, std::nullopt)),
      group_gone_(std::exchange(other.group_gone_, false)) {}

TaskProcess& TaskProcess::operator=(TaskProcess&& other) noexcept {
  if (this != &other) {
    end();
    pid_ = std::exchange(other.pid_, -1);
    status_fd_ = std::exchange(other.status_fd_, -1);
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
    exit_ = leader_exit(status);
    reap_group_members();
  }
  if (status_fd_ >= 0) ::close(status_fd_);
  status_fd_ = -1;
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
      exit_ = leader_exit(status);
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
      exit_ = leader_exit(status);
    } else {
      exit_ = lost_exit(errno);
    }
  }
  return *poll();
}

TaskExit TaskProcess::leader_exit(int status) {
  if (status_fd_ >= 0) {
    int command_status = 0;
    const ssize_t got = ::read(status_fd_, &command_status, sizeof command_status);
    ::close(status_fd_);
    status_fd_ = -1;
    if (got == sizeof command_status) return task_exit_from_wait_status(command_status);
  }
  return task_exit_from_wait_status(status);
}

int reap_stray_children(const std::vector<pid_t>& leaders) {
  int reaped = 0;
  while (true) {
    siginfo_t info{};
    // WNOWAIT: look first, so that a leader's exit stays for its TaskProcess.
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return reaped;  // ECHILD: no child at all
    }
    if (info.si_pid == 0) return reaped;  // children left, none ended
    // A leader that ended waits for its poll(); the others are reaped at the next call, after it.
    if (std::ranges::find(leaders, info.si_pid) != leaders.end()) return reaped;
    if (::waitpid(info.si_pid, nullptr, WNOHANG) > 0) ++reaped;
  }
}

bool TaskProcess::group_alive() const {
  if (pid_ <= 0 || group_gone_) return false;
  if (::kill(-pid_, 0) == 0 || errno == EPERM) return true;
  // With the leader reaped and no member left, nothing can join the group again.
  if (exit_) group_gone_ = true;
  return false;
}

}  // namespace tidepool
