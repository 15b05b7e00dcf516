// One task of a job, run by the node agent as a process group: started in a new process group
// whose id is the leader's pid, with exactly the environment the agent composed, stdin from
// /dev/null and stdout and stderr appended to a log file. The agent signals the whole group (the
// task's own children included), polls the leader's exit, and watches whether anything of the
// group is still running: the GPUs are free only when the whole group is gone.
//
// Isolation (TaskLaunch's uid, own_pid_namespace, cgroup_procs), all set in the child between fork
// and exec with async-signal-safe calls only:
//   - cgroup_procs: the child joins that cgroup first, so that all it forks is born there;
//   - own_pid_namespace: the leader is the init (PID 1) of a new PID namespace, and of a new mount
//     namespace where a fresh /proc shows only the namespace's processes. The leader is a small
//     init that is part of the agent (it never execs): it forks the job's command as PID 2, reaps
//     what is orphaned in the namespace, and exits when the command does, passing the command's
//     wait status back to the agent through a pipe. When the init ends (exits, or gets SIGKILL
//     from the agent), the kernel kills every process of the namespace, setsid or double-forked
//     ones included, before the agent can reap the init: so once poll() saw the leader's exit,
//     nothing of the task is left. Signals the agent sends to the group reach the command and
//     its children directly; the init blocks them all (SIGKILL ends it);
//   - uid/gid: the command runs with that uid and gid (real, effective, saved), no supplementary
//     groups, and no_new_privs (set-uid programs cannot raise it again); its working folder is
//     entered after the switch, with the job's rights.
// Without any of them the task starts with posix_spawn, as the agent's own user.
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

  // Isolation (see the file comment). uid and gid: both or neither, -1 for the agent's own (the
  // agent needs CAP_SETUID and CAP_SETGID). own_pid_namespace needs CAP_SYS_ADMIN. cgroup_procs:
  // the cgroup.procs file of the task's cgroup, empty for none.
  int uid = -1;
  int gid = -1;
  bool own_pid_namespace = false;
  std::string cgroup_procs;
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
  //                  permission: the system's reason is given). Created with mode 0600 when any
  //                  isolation is asked for.
  //   "isolation"    uid without gid or the reverse; the namespaces, the cgroup, or the uid switch
  //                  refused (the agent lacks the capability: the system's reason is given)
  static Result<TaskProcess> start(const TaskLaunch& launch);

  TaskProcess(TaskProcess&& other) noexcept;
  // Ends the process this one owned, as the destructor does, then takes over `other`'s.
  TaskProcess& operator=(TaskProcess&& other) noexcept;
  TaskProcess(const TaskProcess&) = delete;
  TaskProcess& operator=(const TaskProcess&) = delete;
  ~TaskProcess();

  // The leader's pid, which is also the id of the task's process group (with own_pid_namespace:
  // the namespace's init, as the agent's namespace sees it).
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
  TaskProcess(pid_t pid, int status_fd) : pid_(pid), status_fd_(status_fd) {}
  // start() with any isolation: a raw fork as the file comment says.
  static Result<TaskProcess> start_isolated(const TaskLaunch& launch, const std::string& program,
                                            char* const* argv, char* const* envp, int log_fd,
                                            int null_fd);
  // The exit of the reaped leader: the command's, as the namespace's init passed it, else the
  // leader's own `status`.
  TaskExit leader_exit(int status);
  // SIGKILL to the group and reaping, as the destructor says; leaves *this owning nothing.
  void end();
  // Reaps, without blocking, children of the agent in the group; only once the leader is reaped,
  // so that its status is not taken from poll().
  void reap_group_members() const;

  pid_t pid_ = -1;
  int status_fd_ = -1;  // with own_pid_namespace: where the init writes the command's wait status
  std::optional<TaskExit> exit_;
  // Set once the leader is reaped and the group found empty: it cannot come back, and its id may
  // go to another group later, so it is not signalled again.
  mutable bool group_gone_ = false;
};

// The TaskExit for a wait status as waitpid reports it for a process that ended.
TaskExit task_exit_from_wait_status(int status);

// Reaps, without blocking, every child of the calling process that has ended and whose pid is not
// in `leaders` (the leaders of live TaskProcesses, whose exit poll() must see): processes a task
// left behind that were reparented to an agent that is a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)), so that none stays a zombie. Stops at a leader that ended and
// was not polled yet (the kernel shows the ended children one at a time): poll the tasks first, and
// call it again after. Returns how many it reaped.
int reap_stray_children(const std::vector<pid_t>& leaders);

}  // namespace tidepool
