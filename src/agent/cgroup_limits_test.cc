// The cgroup logic against a fake cgroup file system: a temporary directory where plain files stand
// in for the control files (made by the tests, as the kernel would make them), so the tests pass
// whether or not this machine lets the agent use cgroups. Only the last test looks at the real
// /sys/fs/cgroup, and accepts either outcome as long as it is explained.
#include "agent/cgroup_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "agent/test_processes.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace tidepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using test_support::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

using test_support::read_text;

// A fake cgroup directory with empty stand-ins for `files`.
void make_group(const std::string& dir, std::initializer_list<const char*> files) {
  fs::create_directories(dir);
  for (const char* file : files) write(dir + "/" + file, "");
}

// What the kernel makes in a task's group, less cgroup.kill (kernels before 5.14).
const std::initializer_list<const char*> kTaskFiles = {"cpu.max", "memory.max", "cgroup.procs",
                                                       "memory.events"};

// The fake's stand-ins are plain files, which rmdir refuses; the kernel's go with the directory.
void drop_files(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove(entry.path());
}

class TaskCgroupTest : public ::testing::Test {
 protected:
  // A fake group "job-1" as the kernel would make it, and a TaskCgroup on it.
  Result<TaskCgroup> create(std::int64_t cpu_milli, std::int64_t memory_mib) {
    make_group(group(), kTaskFiles);
    return TaskCgroup::create(temp_.path(), "job-1", cpu_milli, memory_mib);
  }
  [[nodiscard]] std::string group() const { return temp_.path() + "/job-1"; }

  TempDir temp_;
};

TEST_F(TaskCgroupTest, CreateWritesCpuAndMemoryLimits) {
  auto cgroup = create(1500, 2048);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  EXPECT_EQ(cgroup->path(), group());
  EXPECT_EQ(read_text(group() + "/cpu.max"), "150000 100000");
  EXPECT_EQ(read_text(group() + "/memory.max"), "2147483648");
}

TEST_F(TaskCgroupTest, CreateWritesMaxForZero) {
  auto cgroup = create(0, 0);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  EXPECT_EQ(read_text(group() + "/cpu.max"), "max");
  EXPECT_EQ(read_text(group() + "/memory.max"), "max");
}

TEST_F(TaskCgroupTest, CreateRaisesATinyCpuQuotaToTheKernelsLeast) {
  auto cgroup = create(5, 1);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  EXPECT_EQ(read_text(group() + "/cpu.max"), "1000 100000");
  EXPECT_EQ(read_text(group() + "/memory.max"), "1048576");
}

TEST_F(TaskCgroupTest, CreateRejectsBadInput) {
  make_group(group(), kTaskFiles);
  const std::string root = temp_.path();
  auto named = TaskCgroup::create(root, "../job-1", 100, 100);
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().field, "name");
  auto empty = TaskCgroup::create(root, "", 100, 100);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().field, "name");
  auto cpu = TaskCgroup::create(root, "job-1", -1, 100);
  ASSERT_FALSE(cpu);
  EXPECT_EQ(cpu.error().field, "cpu_milli");
  auto memory = TaskCgroup::create(root, "job-1", 100, std::int64_t{1} << 50);
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.error().field, "memory_mib");
}

// Without the controllers the kernel makes no cpu.max: the error names it, and the directory
// create made is gone again.
TEST_F(TaskCgroupTest, CreateNamesTheFileItCannotWriteAndRemovesWhatItMade) {
  auto cgroup = TaskCgroup::create(temp_.path(), "job-1", 1500, 2048);
  ASSERT_FALSE(cgroup);
  EXPECT_THAT(cgroup.error().message(), HasSubstr(group() + "/cpu.max"));
  EXPECT_THAT(cgroup.error().message(), HasSubstr("No such file or directory"));
  EXPECT_FALSE(fs::exists(group()));
}

TEST_F(TaskCgroupTest, AddProcessWritesThePid) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  auto added = cgroup->add_process(4242);
  ASSERT_TRUE(added) << added.error().message();
  EXPECT_EQ(read_text(group() + "/cgroup.procs"), "4242");
}

TEST_F(TaskCgroupTest, KillAllWritesOneToCgroupKill) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  write(group() + "/cgroup.kill", "");
  auto killed = cgroup->kill_all();
  ASSERT_TRUE(killed) << killed.error().message();
  EXPECT_EQ(read_text(group() + "/cgroup.kill"), "1");
}

// A real child stands for the task: listed in the fake cgroup.procs, it must die of SIGKILL.
TEST_F(TaskCgroupTest, KillAllWithoutCgroupKillKillsTheListedProcesses) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  char sleep_path[] = "/bin/sleep";
  char seconds[] = "60";
  char* argv[] = {sleep_path, seconds, nullptr};
  pid_t child = -1;
  ASSERT_EQ(::posix_spawn(&child, sleep_path, nullptr, nullptr, argv, environ), 0);
  // Ends the child if an assertion below fails first.
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{.pid = child, .reaped = false};

  // 999999999 is past any pid_max: already gone (ESRCH), which is not an error.
  write(group() + "/cgroup.procs", "999999999\n" + std::to_string(child) + "\n");
  auto killed = cgroup->kill_all();
  ASSERT_TRUE(killed) << killed.error().message();

  // Reaped within 10 s, or the Reaper kills it when the test has failed.
  int status = 0;
  pid_t reaped = 0;
  for (int tries = 0; tries < 1000 && reaped == 0; ++tries) {
    reaped = ::waitpid(child, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(reaped, child) << "the child was not killed";
  reaper.reaped = true;
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(TaskCgroupTest, KillAllReportsAMissingCgroupProcs) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  fs::remove(group() + "/cgroup.procs");
  auto killed = cgroup->kill_all();
  ASSERT_FALSE(killed);
  EXPECT_THAT(killed.error().message(), HasSubstr(group() + "/cgroup.procs"));
}

TEST_F(TaskCgroupTest, OomKilledReadsMemoryEvents) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  const std::string events = group() + "/memory.events";
  write(events, "low 0\nhigh 0\nmax 7\noom 1\noom_kill 0\noom_group_kill 2\n");
  EXPECT_FALSE(cgroup->oom_killed());
  write(events, "low 0\nhigh 0\nmax 7\noom 1\noom_kill 3\noom_group_kill 0\n");
  EXPECT_TRUE(cgroup->oom_killed());
  fs::remove(events);
  EXPECT_FALSE(cgroup->oom_killed());
}

TEST_F(TaskCgroupTest, RemoveDeletesTheDirectoryAndSaysWhyItCannot) {
  auto cgroup = create(1000, 512);
  ASSERT_TRUE(cgroup) << cgroup.error().message();
  auto refused = cgroup->remove();  // the fake's plain files are still there
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message(), HasSubstr(group()));
  drop_files(group());
  auto removed = cgroup->remove();
  ASSERT_TRUE(removed) << removed.error().message();
  EXPECT_FALSE(fs::exists(group()));
}

TEST_F(TaskCgroupTest, TheLastOwnerRemovesTheDirectory) {
  const std::string other = temp_.path() + "/job-2";
  {
    std::optional<TaskCgroup> owner;
    {
      auto cgroup = create(1000, 512);
      ASSERT_TRUE(cgroup) << cgroup.error().message();
      owner.emplace(std::move(*cgroup));
    }  // the moved-from one owns nothing
    EXPECT_TRUE(fs::exists(group()));
    EXPECT_EQ(owner->path(), group());

    make_group(other, kTaskFiles);
    auto second = TaskCgroup::create(temp_.path(), "job-2", 1000, 512);
    ASSERT_TRUE(second) << second.error().message();
    drop_files(group());
    *owner = std::move(*second);  // removes job-1, takes job-2 over
    EXPECT_FALSE(fs::exists(group()));
    EXPECT_EQ(owner->path(), other);
    drop_files(other);
  }
  EXPECT_FALSE(fs::exists(other));
}

class ProbeCgroupsTest : public ::testing::Test {
 protected:
  // The agent's cgroup as the kernel would show it: delegated cpu and memory, the agent in it.
  void make_service_cgroup() {
    make_group(service(), {"cgroup.controllers", "cgroup.procs", "cgroup.subtree_control"});
    write(service() + "/cgroup.controllers", "cpuset cpu io memory pids\n");
    write(service() + "/cgroup.procs", std::to_string(::getpid()) + "\n");
    // What the kernel would make in the children the probe makes.
    make_group(service() + "/agent", {"cgroup.procs"});
    make_group(service() + "/tasks", {"cgroup.subtree_control"});
  }
  [[nodiscard]] std::string service() const {
    return temp_.path() + "/system.slice/tidepool-agent.service";
  }
  static constexpr std::string_view kProcSelfCgroup =
      "4:memory:/system.slice/tidepool-agent.service\n"
      "0::/system.slice/tidepool-agent.service\n";

  TempDir temp_;
};

TEST_F(ProbeCgroupsTest, NoneTurnsLimitsOffWithoutAWarning) {
  const CgroupSetup setup = probe_cgroups("none");
  EXPECT_FALSE(setup.usable);
  EXPECT_EQ(setup.root, "");
  EXPECT_EQ(setup.warning, "");
}

TEST_F(ProbeCgroupsTest, AMissingDirectoryIsNamedInTheWarning) {
  const std::string missing = temp_.path() + "/no-such-cgroup";
  const CgroupSetup setup = probe_cgroups(missing);
  EXPECT_FALSE(setup.usable);
  EXPECT_EQ(setup.root, "");
  EXPECT_THAT(setup.warning, HasSubstr(missing));
  EXPECT_THAT(setup.warning, HasSubstr("No such file or directory"));
}

TEST_F(ProbeCgroupsTest, AGivenDirectoryIsUsedAsItIs) {
  make_group(service(), {"cgroup.controllers", "cgroup.subtree_control"});
  write(service() + "/cgroup.controllers", "cpu memory pids\n");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), "", service());
  EXPECT_TRUE(setup.usable) << setup.warning;
  EXPECT_EQ(setup.root, service());
  EXPECT_EQ(setup.warning, "");
  EXPECT_EQ(read_text(service() + "/cgroup.subtree_control"), "+cpu +memory");
}

TEST_F(ProbeCgroupsTest, AGivenDirectoryWithoutTheControllersIsNotUsed) {
  make_group(service(), {"cgroup.controllers", "cgroup.subtree_control"});
  write(service() + "/cgroup.controllers", "pids\n");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), "", service());
  EXPECT_FALSE(setup.usable);
  EXPECT_THAT(setup.warning, HasSubstr(service()));
  EXPECT_THAT(setup.warning, HasSubstr("cpu and memory"));
}

TEST_F(ProbeCgroupsTest, AGivenDirectoryThatIsNoCgroupIsNotUsed) {
  fs::create_directories(service());
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), "", service());
  EXPECT_FALSE(setup.usable);
  EXPECT_THAT(setup.warning, HasSubstr(service() + " is not a cgroup v2 directory"));
}

TEST_F(ProbeCgroupsTest, AutoMovesTheAgentIntoALeafAndMakesTasksTheRoot) {
  make_service_cgroup();
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), kProcSelfCgroup, "auto");
  ASSERT_TRUE(setup.usable) << setup.warning;
  EXPECT_EQ(setup.root, service() + "/tasks");
  EXPECT_EQ(setup.warning, "");
  EXPECT_EQ(read_text(service() + "/agent/cgroup.procs"), std::to_string(::getpid()));
  EXPECT_EQ(read_text(service() + "/cgroup.subtree_control"), "+cpu +memory");
  EXPECT_EQ(read_text(service() + "/tasks/cgroup.subtree_control"), "+cpu +memory");
}

TEST_F(ProbeCgroupsTest, AutoLeavesAnEmptyCgroupAsItIs) {
  make_service_cgroup();
  write(service() + "/cgroup.procs", "");
  fs::remove_all(service() + "/agent");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), kProcSelfCgroup, "auto");
  ASSERT_TRUE(setup.usable) << setup.warning;
  EXPECT_EQ(setup.root, service() + "/tasks");
  EXPECT_FALSE(fs::exists(service() + "/agent"));
}

TEST_F(ProbeCgroupsTest, AutoWithoutACgroupV2LineSaysSo) {
  make_service_cgroup();
  const CgroupSetup setup =
      probe_cgroups_at(temp_.path(), "4:memory:/system.slice/tidepool-agent.service\n", "auto");
  EXPECT_FALSE(setup.usable);
  EXPECT_THAT(setup.warning, HasSubstr("/proc/self/cgroup"));
  EXPECT_THAT(setup.warning, HasSubstr("without CPU and memory limits"));
}

// As on a read-only /sys/fs/cgroup, the file the probe cannot write is named, with what to do.
TEST_F(ProbeCgroupsTest, AutoNamesWhatItCannotWrite) {
  make_service_cgroup();
  fs::remove(service() + "/cgroup.subtree_control");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), kProcSelfCgroup, "auto");
  EXPECT_FALSE(setup.usable);
  EXPECT_EQ(setup.root, "");
  EXPECT_THAT(setup.warning, HasSubstr(service() + "/cgroup.subtree_control"));
  EXPECT_THAT(setup.warning, HasSubstr("Delegate=yes"));
}

// No controller delegated, but the kernel has cgroup.kill: tasks still get a group each, to be
// killed with it, and the warning says their limits are not enforced.
TEST_F(ProbeCgroupsTest, AutoWithoutControllersKeepsMembershipAndKill) {
  make_service_cgroup();
  write(service() + "/cgroup.controllers", "pids\n");
  make_group(service() + "/tidepool-tasks", {"cgroup.kill", "cgroup.procs"});
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), kProcSelfCgroup, "auto");
  ASSERT_TRUE(setup.usable) << setup.warning;
  EXPECT_FALSE(setup.limits);
  EXPECT_EQ(setup.root, service() + "/tidepool-tasks");
  EXPECT_THAT(setup.warning, HasSubstr("not enforced"));
  EXPECT_THAT(setup.warning, HasSubstr("cpu and memory"));
  // The agent stayed where it was: nothing to enable, no leaf to move to.
  EXPECT_EQ(read_text(service() + "/agent/cgroup.procs"), "");
  // Groups made there get no limit files written.
  auto group = TaskCgroup::create(setup.root, "job-1", 1500, 512, setup.limits);
  ASSERT_TRUE(group) << group.error().message();
  EXPECT_FALSE(fs::exists(setup.root + "/job-1/cpu.max"));
  fs::remove(setup.root + "/job-1");
}

TEST_F(ProbeCgroupsTest, AutoWithoutControllersOrCgroupKillIsNotUsable) {
  make_service_cgroup();
  write(service() + "/cgroup.controllers", "pids\n");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), kProcSelfCgroup, "auto");
  EXPECT_FALSE(setup.usable);
  EXPECT_THAT(setup.warning, HasSubstr("cgroup.kill"));
}

TEST_F(ProbeCgroupsTest, AGivenDirectoryWithCgroupKillButNoControllersIsForKillOnly) {
  make_group(service(), {"cgroup.controllers", "cgroup.kill"});
  write(service() + "/cgroup.controllers", "pids\n");
  const CgroupSetup setup = probe_cgroups_at(temp_.path(), "", service());
  EXPECT_TRUE(setup.usable);
  EXPECT_FALSE(setup.limits);
  EXPECT_EQ(setup.root, service());
}

TEST(FindCgroup2MountTest, PrefersSysFsCgroupElseTheFirstListed) {
  const std::string hybrid =
      "31 1 0:27 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
      "33 31 0:29 / /sys/fs/cgroup/memory rw shared:9 - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw\n";
  std::string root;
  EXPECT_EQ(find_cgroup2_mount(hybrid, &root), "/sys/fs/cgroup/unified");
  EXPECT_EQ(root, "/");
  const std::string unified =
      "25 1 0:22 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
      "26 1 0:22 / /mnt/cg rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(find_cgroup2_mount(unified, &root), "/sys/fs/cgroup");
  EXPECT_EQ(root, "/kubepods/pod1");
  EXPECT_EQ(find_cgroup2_mount("33 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"), "");
}

// The real machine: limits may or may not be possible here, but either way it is explained.
TEST(ProbeCgroupsOnThisMachineTest, AutoIsUsableOrSaysWhyNot) {
  const CgroupSetup setup = probe_cgroups("auto");
  std::cout << "probe_cgroups(\"auto\"): usable=" << setup.usable << " root=\"" << setup.root
            << "\" warning=\"" << setup.warning << "\"\n";
  if (setup.usable) {
    // Without the cpu and memory controllers, the membership and kill only mode says so.
    EXPECT_EQ(setup.warning.empty(), setup.limits) << setup.warning;
    EXPECT_TRUE(fs::is_directory(setup.root)) << setup.root;
  } else {
    EXPECT_NE(setup.warning, "");
    EXPECT_EQ(setup.root, "");
  }
}

}  // namespace
}  // namespace tidepool
