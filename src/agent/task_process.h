// One task of a job, run by the node agent as a process group: started with posix_spawn in a new
// process group whose id is the leader's pid, with exactly the environment the agent composed,
// stdin from /dev/null and stdout and stderr appended to a log file. The agent signals the whole
// group (the task's own children included), polls the leader's exit, and watches whether anything
// of the group is still running: the GPUs are free only when the whole group is gone.
//
// Not thread-safe: one thread at a time per TaskProcess. The leader is reaped by pid (never
// waitpid(-1)), so other children of the agent are left alone; the agent must not ignore SIGCHLD
// (SIG_IGN makes the kernel reap children itself, and their exit status is lost).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

// What to start. Nothing is inherited from the agent implicitly: not its environment, not its
// signal mask or handlers, not its file descriptors.
struct TaskLaunch {
  // The program and its arguments (argv); must not be empty. A command[0] holding a '/' is used as
  // it is (a relative one is relative to working_dir); any other is looked up in the PATH of
  // `environment` as posix_spawnp would, or in "/usr/bin:/bin" when `environment` has no PATH.
  // PATH entries that are not absolute are skipped: they would depend on the directory.
  std::vector<std::string> command;
  // The whole environment of the process, as (name, value) pairs in this order. Names must not be
  // empty nor hold '='; nothing may hold a NUL character.
  std::vector<std::pair<std::string, std::string>> environment;
  // The directory the process starts in; must exist. Empty: the agent's own.
  std::string working_dir;
  // The file that stdout and stderr are appended to (O_APPEND, so two runs share one log). Created
  // with mode 0644 (less the agent's umask) when missing; the folder holding it is not created. A
  // relative path is relative to the agent's directory, not to working_dir.
  std::string log_path;
};

// How the leader of a task ended.
struct TaskExit {
  int exit_code = -1;  // the status passed to exit(), 0..255; -1 when killed by a signal
  int signal = 0;      // the signal that killed it; 0 when it exited
  // For people: "exited with status 0", "exited with status 3", "killed by signal 9 (SIGKILL)",
  // "killed by signal 11 (SIGSEGV), core dumped".
  std::string reason;

  friend bool operator==(const TaskExit&, const TaskExit&) = default;
};

// A started task: its leader process and the process group it leads. Movable, not copyable; a
// moved-from TaskProcess owns nothing.
//
// The process starts with an empty signal mask and with SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM,
// SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD, SIGTSTP, SIGTTIN and SIGTTOU at their default action,
// whatever the agent blocks or ignores; it gets no file descriptor but 0, 1 and 2. (glibc's
// posix_spawn starts every child with its two internal signals, 32 and 33, ignored; programs that
// use them install handlers, which replace that.)
//
// Destroying a TaskProcess whose leader was not reaped yet (by poll() or wait()) leaves neither a
// zombie nor an orphan: the destructor sends SIGKILL to the whole group, then waits for the leader
// (a process stuck in uninterruptible sleep, as in a hung driver call, holds it until the kernel
// lets go). Once the leader is reaped, the destructor signals nothing: members the task left behind
// are the agent's to stop with signal_group while group_alive(), since after they are gone the
// group's id may be given to another group.
class TaskProcess {
 public:
  // Starts the task. Errors name the field of `launch` that was wrong:
  //   "command"      empty; "<cmd>: not found" (with the PATH searched); "<cmd>: permission
  //                  denied"; any other reason exec failed (posix_spawn reports it as its result);
  //                  an argument holding a NUL character
  //   "environment"  a name that is empty or holds '=', or a variable holding a NUL character
  //   "working_dir"  does not exist, or is not a folder
  //   "log_path"     empty, or cannot be opened for appending (missing folder, a folder, no
  //                  permission: the system's reason is given)
  static Result<TaskProcess> start(const TaskLaunch& launch);

  TaskProcess(TaskProcess&& other) noexcept;
  // Ends the process this one owned, as the destructor does, then takes over `other`'s.
  TaskProcess& operator=(TaskProcess&& other) noexcept;
  TaskProcess(const TaskProcess&) = delete;
  TaskProcess& operator=(const TaskProcess&) = delete;
  ~TaskProcess();

  // The leader's pid, which is also the id of the task's process group.
  [[nodiscard]] pid_t pid() const { return pid_; }

  // Sends `sig` to every process of the group (kill(-pid, sig)). A group that is gone already
  // (ESRCH) is success: stopping something that stopped is done. Errors (field "signal"): `sig` is
  // not a signal, or the agent may not signal the group.
  //
  // Like every signal by number, this relies on the group id not being reused: it cannot be while
  // the leader is unreaped or any member lives. Once group_alive() has found the group gone, this
  // sends nothing more (the id may belong to another group by then).
  Result<void> signal_group(int sig);

  // The leader's exit if it has exited, without blocking (waitpid WNOHANG); remembered, so later
  // calls give the same. Once the leader is reaped, each call also reaps, without blocking,
  // members of the group that were reparented to the agent (when it made itself a child subreaper
  // with prctl(PR_SET_CHILD_SUBREAPER)): a zombie still counts as a member for group_alive().
  std::optional<TaskExit> poll();

  // Blocks until the leader exits, then as poll(). Members of the group may still run.
  TaskExit wait();

  // Whether any process of the group still exists (kill(-pid, 0) succeeds, or fails only for lack
  // of permission). An exited leader counts until it is reaped, so poll() first: after the leader
  // exits, children it left may still be running in the group.
  [[nodiscard]] bool group_alive() const;

 private:
  explicit TaskProcess(pid_t pid) : pid_(pid) {}
  // SIGKILL to the group and reaping, as the destructor says; leaves *this owning nothing.
  void end();
  // Reaps, without blocking, children of the agent in the group; only once the leader is reaped,
  // so that its status is not taken from poll().
  void reap_group_members() const;

  pid_t pid_ = -1;
  std::optional<TaskExit> exit_;
  // Set once the leader is reaped and the group found empty: it cannot come back, and its id may
  // go to another group later, so it is not signalled again.
  mutable bool group_gone_ = false;
};

// The TaskExit for a wait status as waitpid reports it for a process that ended.
TaskExit task_exit_from_wait_status(int status);

}  // namespace tidepool
