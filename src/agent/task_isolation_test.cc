// TaskProcess's isolation with real processes, as root (the tests skip otherwise, saying so): a
// task in its own PID and mount namespaces sees only its own processes and takes every one of
// them with it, setsid or not; a task runs as the uid it is given, without groups or a way back
// to root; a task in a cgroup is killed whole through it; strays that were reparented to the
// agent are reaped.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "agent/cgroup_limits.h"
#include "agent/task_process.h"
#include "agent/test_processes.h"

namespace tidepool {
namespace {

using test_support::eventually;
using test_support::processes_with;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int kUid = 61987;  // in the agent's default range, used by no job in these tests

using test_support::read_text;

// The zombies whose parent is this process.
std::set<pid_t> zombie_children() {
  std::set<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const std::string parent = "\nPPid:\t" + std::to_string(::getpid()) + "\n";
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
    if (status.find("\nState:\tZ") != std::string::npos &&
        status.find(parent) != std::string::npos) {
      out.insert(pid);
    }
  }
  ::closedir(proc);
  return out;
}

class TaskIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: it switches uids and makes namespaces";
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tidepool_isolation_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    folder_ = pattern;
    marker_ = "TIDEPOOL_ISOLATION_MARKER=" + folder_;
  }
  void TearDown() override {
    for (pid_t pid : processes_with(marker_)) ::kill(pid, SIGKILL);
    std::error_code ignored;
    if (!folder_.empty()) std::filesystem::remove_all(folder_, ignored);
  }

  TaskLaunch launch(const std::string& script) const {
    TaskLaunch task;
    task.command = {"/bin/sh", "-c", script};
    task.environment = {{"PATH", "/usr/bin:/bin"}, {"TIDEPOOL_ISOLATION_MARKER", folder_}};
    task.log_path = log_path();
    return task;
  }
  [[nodiscard]] std::string log_path() const { return folder_ + "/task.log"; }
  [[nodiscard]] std::string log() const { return read_text(log_path()); }

  std::string folder_;
  std::string marker_;
};

TEST_F(TaskIsolationTest, ATaskInItsOwnNamespaceIsItsInitAndSeesOnlyItsOwnProcesses) {
  TaskLaunch task = launch("echo pid=$$; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo");
  task.own_pid_namespace = true;
  auto process = TaskProcess::start(task);
  ASSERT_TRUE(process) << process.error().message();
  EXPECT_EQ(process->wait().exit_code, 0) << log();
  // The command is PID 2 under the namespace's init; /proc lists the init, the shell, ls, grep,
  // tr: nothing of the machine's.
  EXPECT_THAT(log(), HasSubstr("pid=2\n"));
  std::istringstream pids(log().substr(log().find('\n') + 1));
  int count = 0;
  for (int pid = 0; pids >> pid; ++count) EXPECT_LT(pid, 10) << log();
  EXPECT_GE(count, 2) << log();
  EXPECT_LE(count, 5) << log();
  EXPECT_THAT(log(), Not(HasSubstr(" " + std::to_string(::getpid()) + " ")));
}

TEST_F(TaskIsolationTest, TheCommandsExitIsTheTasksExit) {
  TaskLaunch exits = launch("exit 3");
  exits.own_pid_namespace = true;
  auto process = TaskProcess::start(exits);
  ASSERT_TRUE(process) << process.error().message();
  EXPECT_EQ(process->wait(), (TaskExit{3, 0, "exited with status 3"}));

  TaskLaunch sleeps = launch("exec sleep 600");
  sleeps.own_pid_namespace = true;
  auto sleeper = TaskProcess::start(sleeps);
  ASSERT_TRUE(sleeper) << sleeper.error().message();
  ASSERT_TRUE(eventually([&] { return processes_with(marker_).size() == 1; }));
  ASSERT_TRUE(sleeper->signal_group(SIGTERM));
  EXPECT_EQ(sleeper->wait(), (TaskExit{-1, SIGTERM, "killed by signal 15 (SIGTERM)"}));
}

// The old way (a process group only): `setsid` leaves the group, and outlives the task.
TEST_F(TaskIsolationTest, KillingTheNamespacesInitKillsWhatLeftTheGroup) {
  TaskLaunch task = launch("setsid sleep 600 & (sleep 600 &) ; echo started; sleep 600");
  task.own_pid_namespace = true;
  auto process = TaskProcess::start(task);
  ASSERT_TRUE(process) << process.error().message();
  ASSERT_TRUE(eventually([&] { return processes_with(marker_).size() == 4; }))
      << processes_with(marker_).size();
  ASSERT_TRUE(process->signal_group(SIGKILL));
  const TaskExit exit = process->wait();
  EXPECT_EQ(exit.signal, SIGKILL) << exit.reason;
  // Reaped init: the kernel had killed the whole namespace before.
  EXPECT_TRUE(processes_with(marker_).empty());
  EXPECT_FALSE(process->group_alive());
}

TEST_F(TaskIsolationTest, WhenTheCommandEndsNothingOfItStays) {
  TaskLaunch task = launch("setsid sleep 600 & sleep 0.2; exit 0");
  task.own_pid_namespace = true;
  auto process = TaskProcess::start(task);
  ASSERT_TRUE(process) << process.error().message();
  EXPECT_EQ(process->wait().exit_code, 0);
  EXPECT_TRUE(processes_with(marker_).empty());
}

TEST_F(TaskIsolationTest, ATaskRunsAsItsUidWithoutGroupsOrAWayBack) {
  TaskLaunch task = launch(
      "id -u; id -g; id -G; grep -E '^NoNewPrivs' /proc/self/status; cat /etc/shadow "
      ">/dev/null 2>&1 && echo shadow=read || echo shadow=denied");
  task.uid = kUid;
  task.gid = kUid;
  task.own_pid_namespace = true;
  auto process = TaskProcess::start(task);
  ASSERT_TRUE(process) << process.error().message();
  EXPECT_EQ(process->wait().exit_code, 0) << log();
  const std::string id = std::to_string(kUid);
  EXPECT_EQ(log(), id + "\n" + id + "\n" + id + "\nNoNewPrivs:\t1\nshadow=denied\n");
}

TEST_F(TaskIsolationTest, AWorkingDirTheUidMayNotEnterIsRefused) {
  TaskLaunch task = launch("pwd");
  task.uid = kUid;
  task.gid = kUid;
  task.working_dir = folder_;  // 0700 root, from mkdtemp
  auto process = TaskProcess::start(task);
  ASSERT_FALSE(process);
  EXPECT_EQ(process.error().field, "working_dir");
  EXPECT_THAT(process.error().reason, HasSubstr("Permission denied"));
  TaskLaunch half = launch("true");
  half.uid = kUid;
  EXPECT_EQ(TaskProcess::start(half).error().field, "isolation");
}

// Kill by cgroup: every process of the task, setsid or double-forked, without a namespace.
TEST_F(TaskIsolationTest, KillAllOfTheTasksCgroupLeavesNoProcess) {
  const CgroupSetup setup = probe_cgroups("auto");
  if (!setup.usable) GTEST_SKIP() << "no cgroup v2 here: " << setup.warning;
  auto group = TaskCgroup::create(setup.root, "isolation-test-" + std::to_string(::getpid()), 0, 0,
                                  setup.limits);
  ASSERT_TRUE(group) << group.error().message();
  TaskLaunch task = launch("setsid sleep 600 & (sleep 600 &) ; exit 0");
  task.cgroup_procs = group->procs_path();
  auto process = TaskProcess::start(task);
  ASSERT_TRUE(process) << process.error().message();
  EXPECT_EQ(process->wait().exit_code, 0);
  // The shell is gone, its group with it, but two sleeps run on in the cgroup.
  ASSERT_TRUE(eventually([&] { return processes_with(marker_).size() == 2; }));
  EXPECT_TRUE(group->has_processes().value_or(false));
  ASSERT_TRUE(group->kill_all()) << "cgroup.kill";
  ASSERT_TRUE(eventually([&] {
    (void)reap_stray_children({});
    return !group->has_processes().value_or(true);
  }));
  EXPECT_EQ(read_text(group->procs_path()), "");
  EXPECT_TRUE(processes_with(marker_).empty());
  EXPECT_TRUE(group->remove());
}

// Without a namespace, what a task orphans comes to the (subreaper) agent: reaped, not left as
// zombies; a leader's exit stays for its TaskProcess.
TEST_F(TaskIsolationTest, StraysThatDoubleForkedAreReapedAndLeadersAreNot) {
  auto process = TaskProcess::start(launch("(sleep 0.1 &); (sleep 0.1 &); exit 4"));
  ASSERT_TRUE(process) << process.error().message();
  const pid_t leader = process->pid();
  ASSERT_TRUE(eventually([&] { return zombie_children().size() == 3; }))
      << zombie_children().size();
  EXPECT_TRUE(zombie_children().contains(leader));
  // The leader ended first, so it is what the kernel shows first: nothing is reaped past it.
  (void)reap_stray_children({leader});
  EXPECT_TRUE(zombie_children().contains(leader));
  EXPECT_EQ(process->poll()->exit_code, 4);
  (void)reap_stray_children({});
  EXPECT_TRUE(zombie_children().empty());
}

}  // namespace
}  // namespace tidepool
