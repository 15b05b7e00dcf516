// CPU and memory limits for a job's tasks through cgroup v2, where the machine allows it.
//
// The agent gets one cgroup v2 directory, the root, under which it makes one child group per task
// (<root>/<name>) and writes the task's limits there: cpu.max, a quota of CPU time per 100 ms
// period, and memory.max, in bytes; the kernel OOM-kills the task's processes past the latter. The
// task's leader is put into its group right after it starts (add_process); what it forks stays in
// the group even when it leaves the task's process group, so kill_all reaches everything.
//
// Finding the root ("auto"): the agent's own cgroup, read from the "0::/path" line of
// /proc/self/cgroup under the cgroup2 mount /sys/fs/cgroup, as systemd hands it to a service with
// Delegate=yes. cgroup v2 lets a group pass controllers to its children (cgroup.subtree_control)
// only while no process is in it (the "no internal processes" rule), so the agent first moves
// itself into a leaf child "agent" when its cgroup holds processes, enables +cpu +memory there,
// and makes the tasks' groups under a second child, "tasks", where it enables them again:
//
//   <agent's cgroup>/            cgroup.subtree_control: cpu memory
//   <agent's cgroup>/agent/      the agent process
//   <agent's cgroup>/tasks/      the root; cgroup.subtree_control: cpu memory
//   <agent's cgroup>/tasks/<name>/   one task: cpu.max, memory.max, its processes
//
// Where /sys/fs/cgroup is not a cgroup2 mount (a cgroup v1 or hybrid layout), the cgroup2
// hierarchy is looked for elsewhere in /proc/self/mountinfo (a hybrid layout mounts it at
// /sys/fs/cgroup/unified).
//
// Membership and kill only: where the cgroup the agent finds does not offer the cpu and memory
// controllers (none delegated) but the agent may make groups in it and the kernel has cgroup.kill
// (Linux 5.14), the tasks still get a group each, so that every process of a task, setsid or
// double-forked, is killed with it; their limits are not enforced (limits false, one warning
// line). With "auto" that root is <agent's cgroup>/tidepool-tasks; the agent does not move.
//
// Where nothing of that is possible (a read-only cgroup file system as in most containers, an old
// kernel), probing says why in one line and tasks run without a cgroup.
//
// Not thread-safe: one thread at a time per TaskCgroup. probe_cgroups may move the calling
// process into another cgroup (all its threads with it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace tidepool {

// What probe_cgroups found.
struct CgroupSetup {
  // Tasks get a group each (membership and kill).
  bool usable = false;
  // Their cpu.max and memory.max are written and enforced; false in the membership and kill only
  // mode (and when !usable).
  bool limits = false;
  // The cgroup v2 directory under which task groups are made; empty when !usable.
  std::string root;
  // When !usable, or usable without limits: one line saying why and what to do, for the agent to
  // log. Empty when usable with limits, and when the user turned cgroups off ("none").
  std::string warning;
};

// Finds the root for task groups. `requested` is
//   "auto"   the agent's own cgroup, as the file comment says, in the cgroup2 hierarchy mounted at
//            /sys/fs/cgroup (checked with statfs) or, failing that, where mountinfo says;
//   "none"   no limits: usable false and no warning;
//   a path   a cgroup v2 directory the agent was given, used as it is: it must exist, be writable
//            and offer the cpu and memory controllers (cgroup.controllers), which are enabled for
//            its children (cgroup.subtree_control) unless they are already; without them, it is
//            used for membership and kill only when it has a cgroup.kill file.
// Never fails: what it cannot do is the warning.
CgroupSetup probe_cgroups(std::string_view requested);

// probe_cgroups without looking at the machine, for tests: the cgroup2 file system is taken to be
// mounted at `mount_dir` (not checked) and `proc_self_cgroup` is the text of /proc/self/cgroup.
// For "auto", the process moved into the leaf "agent" is still the caller (getpid()).
CgroupSetup probe_cgroups_at(const std::string& mount_dir, std::string_view proc_self_cgroup,
                             std::string_view requested);

// The mount point of the cgroup2 file system in `mountinfo` (the text of /proc/self/mountinfo):
// /sys/fs/cgroup when it is one, else the first cgroup2 mount listed; empty when there is none.
// `mount_root` gets the part of the hierarchy mounted there (the fourth field, "/" mostly).
std::string find_cgroup2_mount(std::string_view mountinfo, std::string* mount_root = nullptr);

// One task's cgroup, <root>/<name>. Movable, not copyable; a moved-from TaskCgroup owns nothing.
// The directory is removed when the TaskCgroup is destroyed (best effort: the kernel refuses while
// a process is still in the group, so kill_all and reap first).
//
// Errors from the file system name the file and the system's reason ("cannot write \"1\" to
// /sys/fs/cgroup/x/tasks/j1/cgroup.kill: Permission denied").
class TaskCgroup {
 public:
  // Makes <root>/<name> and writes its limits:
  //   cpu.max     "<quota_us> 100000", quota_us = cpu_milli * 100 (1500 millicores: 150 ms of CPU
  //               time each 100 ms), at least 1000 (the kernel's least quota); "max" for 0
  //   memory.max  memory_mib * 1048576 bytes; "max" for 0
  // A directory that exists already (left by an agent that stopped before removing it) is reused
  // and its limits rewritten. Errors name the input that was wrong ("name": empty, ".", "..", or
  // holding '/'; "cpu_milli", "memory_mib": negative or too large) or the file that could not be
  // written; a directory this call made is removed again when writing a limit fails. With
  // `limits` false (the membership and kill only mode) no limit is written.
  static Result<TaskCgroup> create(const std::string& root, const std::string& name,
                                   std::int64_t cpu_milli, std::int64_t memory_mib,
                                   bool limits = true);

  TaskCgroup(TaskCgroup&& other) noexcept;
  // Removes the group this one owned, as the destructor does, then takes over `other`'s.
  TaskCgroup& operator=(TaskCgroup&& other) noexcept;
  TaskCgroup(const TaskCgroup&) = delete;
  TaskCgroup& operator=(const TaskCgroup&) = delete;
  ~TaskCgroup();

  // The group's directory, <root>/<name>.
  [[nodiscard]] const std::string& path() const { return path_; }

  // Moves process `pid` (with all its threads) into the group: writes it to cgroup.procs. Its
  // children forked from then on are born in the group.
  Result<void> add_process(int pid);

  // Sends SIGKILL to every process in the group, including those that left the task's process
  // group: writes "1" to cgroup.kill where the kernel has it (Linux 5.14 and later); else kills
  // each pid listed in cgroup.procs, and reads the list again until it shows no pid not killed
  // before (a member may fork while the others are killed). Returns once the signals are sent; the
  // processes may take a moment to die, and the agent still reaps its own children. A process gone
  // already is not an error.
  Result<void> kill_all();

  // The group's cgroup.procs file: a task joins the group by writing to it (TaskLaunch).
  [[nodiscard]] std::string procs_path() const { return path_ + "/cgroup.procs"; }

  // Whether any process is in the group (cgroup.procs lists a pid). Errors: the file cannot be
  // read.
  [[nodiscard]] Result<bool> has_processes() const;

  // Whether the kernel OOM-killed a process of the group: the "oom_kill N" line of memory.events
  // has N > 0. False when the file cannot be read.
  [[nodiscard]] bool oom_killed() const;

  // Removes the group's directory (rmdir); the kernel refuses while a process is in the group
  // ("Device or resource busy"). Once it succeeded, the destructor does nothing more.
  Result<void> remove();

 private:
  TaskCgroup(std::string path, bool owned) : path_(std::move(path)), owned_(owned) {}

  std::string path_;
  bool owned_ = false;  // whether the directory is still the object's to remove
};

}  // namespace tidepool
