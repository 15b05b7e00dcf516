// TaskProcess with real processes: /bin/sh, /bin/sleep, /usr/bin/env, /bin/pwd, /bin/ls. Each test
// ends what it starts: a TaskProcess kills its group when destroyed unreaped, and the tests that
// leave a group behind its leader stop it and wait, bounded, until it is gone.
#include "agent/task_process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/test_processes.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

using test_support::eventually;

// Whether the whole group of `task` is gone within the bound; polls, which reaps the leader and
// the members reparented to the test.
bool group_gone(TaskProcess& task) {
  return eventually([&] {
    task.poll();
    return !task.group_alive();
  });
}

// Stops what is left of a task's group when a test ends, failed assertions included: once the
// leader is reaped, the TaskProcess destructor leaves the group's other members alone.
class StopGroupAtEnd {
 public:
  explicit StopGroupAtEnd(TaskProcess& task) : task_(task) {}
  ~StopGroupAtEnd() {
    task_.poll();
    if (!task_.group_alive()) return;
    (void)task_.signal_group(SIGKILL);
    (void)group_gone(task_);
  }
  StopGroupAtEnd(const StopGroupAtEnd&) = delete;
  StopGroupAtEnd& operator=(const StopGroupAtEnd&) = delete;

 private:
  TaskProcess& task_;
};

// Whether no process has the id `pid` any more (ESRCH), within the bound.
bool process_gone(pid_t pid) {
  return eventually([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; });
}

class TaskProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Processes orphaned by a task come back to the test (as they will to the agent), and poll()
    // reaps them; under a PID 1 that reaps nothing they would stay zombies in the group.
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tidepool_task_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    folder_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!folder_.empty()) std::filesystem::remove_all(folder_, ignored);
  }

  // A launch of `command` with no environment, logging to task.log in the test's folder.
  TaskLaunch launch(std::vector<std::string> command) const {
    TaskLaunch task;
    task.command = std::move(command);
    task.log_path = log_path();
    return task;
  }
  std::string log_path() const { return (folder_ / "task.log").string(); }
  std::string log() const { return test_support::read_text(log_path()); }
  bool log_holds(const std::string& text) const {
    return eventually([&] { return log().find(text) != std::string::npos; });
  }

  std::filesystem::path folder_;
};

TEST_F(TaskProcessTest, DeliversExactlyTheGivenEnvironment) {
  ASSERT_EQ(::setenv("TIDEPOOL_AGENT_ONLY", "must not reach the task", 1), 0);
  TaskLaunch env = launch({"/usr/bin/env"});
  env.environment = {{"TIDEPOOL_JOB", "17"}, {"B", "two words"}, {"EMPTY", ""}};
  auto task = TaskProcess::start(env);
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait(), (TaskExit{0, 0, "exited with status 0"}));
  EXPECT_EQ(log(), "TIDEPOOL_JOB=17\nB=two words\nEMPTY=\n");
  ::unsetenv("TIDEPOOL_AGENT_ONLY");
}

TEST_F(TaskProcessTest, AnEmptyEnvironmentIsEmpty) {
  auto task = TaskProcess::start(launch({"/usr/bin/env"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), "");
}

TEST_F(TaskProcessTest, LooksCommandsUpInTheTasksPath) {
  TaskLaunch env = launch({"env"});
  env.environment = {{"PATH", "relative:/nonexistent-tidepool:/usr/bin:/bin"}};
  auto task = TaskProcess::start(env);
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), "PATH=relative:/nonexistent-tidepool:/usr/bin:/bin\n");
}

TEST_F(TaskProcessTest, UsesTheDefaultPathWhenTheTaskHasNone) {
  auto task = TaskProcess::start(launch({"sh", "-c", "exit 0"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait(), (TaskExit{0, 0, "exited with status 0"}));
}

TEST_F(TaskProcessTest, ACommandOutsideTheTasksPathIsNotFound) {
  TaskLaunch env = launch({"env"});  // in the agent's PATH, not in the task's
  env.environment = {{"PATH", "/nonexistent-tidepool"}};
  auto task = TaskProcess::start(env);
  ASSERT_FALSE(task.has_value());
  EXPECT_EQ(task.error().field, "command");
  EXPECT_THAT(task.error().reason, HasSubstr("env: not found"));
  EXPECT_THAT(task.error().reason, HasSubstr("/nonexistent-tidepool"));
}

TEST_F(TaskProcessTest, AMissingProgramIsNotFound) {
  auto task = TaskProcess::start(launch({"/nonexistent-tidepool/program", "--flag"}));
  ASSERT_FALSE(task.has_value());
  EXPECT_EQ(task.error().field, "command");
  EXPECT_EQ(task.error().reason, "/nonexistent-tidepool/program: not found");
}

TEST_F(TaskProcessTest, AProgramThatIsNotExecutableIsDenied) {
  const auto script = folder_ / "script";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(
      script, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  auto by_path = TaskProcess::start(launch({script.string()}));
  ASSERT_FALSE(by_path.has_value());
  EXPECT_EQ(by_path.error().field, "command");
  EXPECT_EQ(by_path.error().reason, script.string() + ": permission denied");

  TaskLaunch searched = launch({"script"});
  searched.environment = {{"PATH", folder_.string()}};
  auto by_name = TaskProcess::start(searched);
  ASSERT_FALSE(by_name.has_value());
  EXPECT_EQ(by_name.error().field, "command");
  EXPECT_THAT(by_name.error().reason, HasSubstr("script: permission denied"));
}

TEST_F(TaskProcessTest, RejectsAnEmptyCommandAndBadVariableNames) {
  auto empty = TaskProcess::start(launch({}));
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().field, "command");
  EXPECT_THAT(empty.error().reason, HasSubstr("is empty"));

  TaskLaunch bad_name = launch({"/usr/bin/env"});
  bad_name.environment = {{"A=B", "c"}};
  auto bad = TaskProcess::start(bad_name);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "environment");
  EXPECT_THAT(bad.error().reason, HasSubstr("\"A=B\""));
}

TEST_F(TaskProcessTest, StartsInTheWorkingDir) {
  TaskLaunch pwd = launch({"/bin/pwd"});
  pwd.working_dir = folder_.string();
  auto task = TaskProcess::start(pwd);
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), std::filesystem::canonical(folder_).string() + "\n");
}

TEST_F(TaskProcessTest, RunsARelativeProgramFromTheWorkingDir) {
  const auto script = folder_ / "run.sh";
  std::ofstream(script) << "#!/bin/sh\necho ran here\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  TaskLaunch relative = launch({"./run.sh"});
  relative.working_dir = folder_.string();
  auto task = TaskProcess::start(relative);
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), "ran here\n");
}

TEST_F(TaskProcessTest, RejectsAMissingWorkingDir) {
  TaskLaunch missing = launch({"/bin/pwd"});
  missing.working_dir = (folder_ / "missing").string();
  auto task = TaskProcess::start(missing);
  ASSERT_FALSE(task.has_value());
  EXPECT_EQ(task.error().field, "working_dir");
  EXPECT_EQ(task.error().reason, missing.working_dir + ": does not exist");

  std::ofstream(folder_ / "file") << "not a folder\n";
  TaskLaunch file = launch({"/bin/pwd"});
  file.working_dir = (folder_ / "file").string();
  auto not_folder = TaskProcess::start(file);
  ASSERT_FALSE(not_folder.has_value());
  EXPECT_EQ(not_folder.error().field, "working_dir");
  EXPECT_THAT(not_folder.error().reason, HasSubstr("is not a folder"));
}

TEST_F(TaskProcessTest, RejectsALogItCannotWrite) {
  TaskLaunch missing_folder = launch({"/usr/bin/env"});
  missing_folder.log_path = (folder_ / "missing" / "task.log").string();
  auto missing = TaskProcess::start(missing_folder);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().field, "log_path");
  EXPECT_THAT(missing.error().reason, HasSubstr("No such file or directory"));
  EXPECT_FALSE(std::filesystem::exists(folder_ / "missing"));  // folders are not created

  TaskLaunch a_folder = launch({"/usr/bin/env"});
  a_folder.log_path = folder_.string();
  auto folder = TaskProcess::start(a_folder);
  ASSERT_FALSE(folder.has_value());
  EXPECT_EQ(folder.error().field, "log_path");
  EXPECT_THAT(folder.error().reason, HasSubstr("Is a directory"));

  TaskLaunch no_log = launch({"/usr/bin/env"});
  no_log.log_path.clear();
  auto none = TaskProcess::start(no_log);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().field, "log_path");
}

TEST_F(TaskProcessTest, AppendsStdoutAndStderrToTheLogAcrossRuns) {
  const mode_t previous_umask = ::umask(022);
  auto first = TaskProcess::start(launch({"/bin/sh", "-c", "echo one; echo err one >&2"}));
  ::umask(previous_umask);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(first->wait().exit_code, 0);
  struct stat info {};
  ASSERT_EQ(::stat(log_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644U);

  auto second = TaskProcess::start(launch({"/bin/sh", "-c", "echo two"}));
  ASSERT_TRUE(second.has_value()) << second.error().message();
  EXPECT_EQ(second->wait().exit_code, 0);
  EXPECT_EQ(log(), "one\nerr one\ntwo\n");
}

TEST_F(TaskProcessTest, ReadsStdinFromDevNull) {
  auto task = TaskProcess::start(launch({"/bin/sh", "-c", "cat; echo end"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), "end\n");
}

TEST_F(TaskProcessTest, ReportsExitCodes) {
  auto three = TaskProcess::start(launch({"/bin/sh", "-c", "exit 3"}));
  ASSERT_TRUE(three.has_value()) << three.error().message();
  std::optional<TaskExit> exit;
  ASSERT_TRUE(eventually([&] { return (exit = three->poll()).has_value(); }));
  EXPECT_EQ(*exit, (TaskExit{3, 0, "exited with status 3"}));
  EXPECT_EQ(three->poll(), exit);  // remembered
  EXPECT_EQ(three->wait(), *exit);

  auto zero = TaskProcess::start(launch({"/bin/sh", "-c", "exit 0"}));
  ASSERT_TRUE(zero.has_value()) << zero.error().message();
  EXPECT_EQ(zero->wait(), (TaskExit{0, 0, "exited with status 0"}));
}

TEST_F(TaskProcessTest, ReportsTheSignalThatKilledIt) {
  auto task = TaskProcess::start(launch({"/bin/sleep", "30"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->poll(), std::nullopt);
  EXPECT_TRUE(task->group_alive());
  ASSERT_TRUE(task->signal_group(SIGKILL).has_value());
  EXPECT_EQ(task->wait(), (TaskExit{-1, SIGKILL, "killed by signal 9 (SIGKILL)"}));
  EXPECT_FALSE(task->group_alive());
  // The group is gone: signalling it again is no error.
  EXPECT_TRUE(task->signal_group(SIGTERM).has_value());
}

TEST_F(TaskProcessTest, DescribesWaitStatuses) {
  EXPECT_EQ(task_exit_from_wait_status(3 << 8), (TaskExit{3, 0, "exited with status 3"}));
  EXPECT_EQ(task_exit_from_wait_status(SIGSEGV | 0x80),
            (TaskExit{-1, SIGSEGV, "killed by signal 11 (SIGSEGV), core dumped"}));
  EXPECT_EQ(task_exit_from_wait_status(SIGRTMIN + 2).reason,
            "killed by signal " + std::to_string(SIGRTMIN + 2) + " (SIGRTMIN+2)");
}

TEST_F(TaskProcessTest, RejectsWhatIsNotASignal) {
  auto task = TaskProcess::start(launch({"/bin/sleep", "30"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  auto sent = task->signal_group(12345);
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().field, "signal");
  EXPECT_EQ(sent.error().reason, "12345 is not a signal");
}  // the destructor kills the sleep

TEST_F(TaskProcessTest, StartsWithDefaultSignalsWhateverTheAgentIgnoresOrBlocks) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous_term {};
  struct sigaction previous_usr1 {};
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &previous_term), 0);
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &previous_usr1), 0);
  sigset_t blocked;
  sigset_t previous_mask;
  ::sigemptyset(&blocked);
  ::sigaddset(&blocked, SIGUSR2);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &blocked, &previous_mask), 0);

  auto status =
      TaskProcess::start(launch({"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}));
  auto sleeper = TaskProcess::start(launch({"/bin/sleep", "30"}));

  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
  ::sigaction(SIGUSR1, &previous_usr1, nullptr);

  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(status->wait().exit_code, 0);
  // Nothing blocked; no standard signal (1..31) ignored. glibc's posix_spawn leaves its own two
  // internal signals (32 and 33) ignored, whatever the parent had.
  const std::string text = log();
  EXPECT_THAT(text, StartsWith("SigBlk:\t0000000000000000\nSigIgn:\t"));
  const auto ignored_at = text.find("SigIgn:\t");
  ASSERT_NE(ignored_at, std::string::npos);
  const unsigned long long ignored = std::stoull(text.substr(ignored_at + 8), nullptr, 16);
  EXPECT_EQ(ignored & 0x7fffffffULL, 0U) << text;
  ASSERT_TRUE(sleeper.has_value()) << sleeper.error().message();
  ASSERT_TRUE(sleeper->signal_group(SIGTERM).has_value());
  EXPECT_EQ(sleeper->wait(), (TaskExit{-1, SIGTERM, "killed by signal 15 (SIGTERM)"}));
}

TEST_F(TaskProcessTest, LeaksNoFileDescriptorIntoTheTask) {
  // One the agent might have opened without O_CLOEXEC (a library, say): kept out all the same.
  const int stray = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(stray, 0);
  auto task = TaskProcess::start(launch({"/bin/ls", "/proc/self/fd"}));
  ::close(stray);
  ASSERT_TRUE(task.has_value()) << task.error().message();
  EXPECT_EQ(task->wait().exit_code, 0);
  EXPECT_EQ(log(), "0\n1\n2\n3\n");  // 3: the folder ls reads
}

TEST_F(TaskProcessTest, SignalGroupReachesGrandchildrenTheLeaderLeft) {
  auto task = TaskProcess::start(launch({"/bin/sh", "-c", "sleep 30 & echo started; wait"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  const StopGroupAtEnd stop(*task);
  ASSERT_TRUE(log_holds("started\n"));

  // The leader alone: its sleep stays, in the group.
  ASSERT_EQ(::kill(task->pid(), SIGKILL), 0);
  EXPECT_EQ(task->wait().signal, SIGKILL);
  std::this_thread::sleep_for(100ms);
  task->poll();
  EXPECT_TRUE(task->group_alive());

  ASSERT_TRUE(task->signal_group(SIGTERM).has_value());
  EXPECT_TRUE(group_gone(*task));
  EXPECT_FALSE(task->group_alive());  // remembered
  EXPECT_TRUE(task->signal_group(SIGKILL).has_value());
}

TEST_F(TaskProcessTest, SignalGroupStopsLeaderAndGrandchildTogether) {
  auto task = TaskProcess::start(launch({"/bin/sh", "-c", "sleep 30 & echo started; wait"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  const StopGroupAtEnd stop(*task);
  ASSERT_TRUE(log_holds("started\n"));
  ASSERT_TRUE(task->signal_group(SIGKILL).has_value());
  EXPECT_TRUE(group_gone(*task));
  EXPECT_EQ(task->poll(), (TaskExit{-1, SIGKILL, "killed by signal 9 (SIGKILL)"}));
}

TEST_F(TaskProcessTest, ATaskThatTrapsTermRunsUntilKill) {
  auto task = TaskProcess::start(launch(
      {"/bin/sh", "-c", "trap 'echo caught TERM' TERM; echo ready; while :; do sleep 0.1; done"}));
  ASSERT_TRUE(task.has_value()) << task.error().message();
  const StopGroupAtEnd stop(*task);
  ASSERT_TRUE(log_holds("ready\n"));

  ASSERT_TRUE(task->signal_group(SIGTERM).has_value());
  ASSERT_TRUE(log_holds("caught TERM\n"));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(task->poll(), std::nullopt);
  EXPECT_TRUE(task->group_alive());

  ASSERT_TRUE(task->signal_group(SIGKILL).has_value());
  EXPECT_EQ(task->wait(), (TaskExit{-1, SIGKILL, "killed by signal 9 (SIGKILL)"}));
  EXPECT_TRUE(group_gone(*task));
}

TEST_F(TaskProcessTest, DestroyingAnUnreapedTaskKillsAndReapsIt) {
  pid_t pid = -1;
  {
    auto task = TaskProcess::start(launch({"/bin/sleep", "30"}));
    ASSERT_TRUE(task.has_value()) << task.error().message();
    pid = task->pid();
    ASSERT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_TRUE(process_gone(pid));
  const pid_t reaped = ::waitpid(pid, nullptr, WNOHANG);
  const int error = errno;
  EXPECT_EQ(reaped, -1);  // no zombie left to reap
  EXPECT_EQ(error, ECHILD);
}

TEST_F(TaskProcessTest, DestroyingAnUnreapedTaskKillsItsWholeGroup) {
  pid_t pgid = -1;
  {
    auto task = TaskProcess::start(launch({"/bin/sh", "-c", "sleep 30 & echo started; wait"}));
    ASSERT_TRUE(task.has_value()) << task.error().message();
    pgid = task->pid();
    ASSERT_TRUE(log_holds("started\n"));
  }
  // The sleep, killed, comes back to the test as a zombie (the test is a subreaper): reap it.
  EXPECT_TRUE(eventually([&] {
    while (::waitpid(-pgid, nullptr, WNOHANG) > 0) {
    }
    return ::kill(-pgid, 0) != 0 && errno == ESRCH;
  }));
}

TEST_F(TaskProcessTest, MovesOwnership) {
  auto started = TaskProcess::start(launch({"/bin/sleep", "30"}));
  ASSERT_TRUE(started.has_value()) << started.error().message();
  TaskProcess task = std::move(*started);
  EXPECT_EQ(started->pid(), -1);
  EXPECT_FALSE(started->group_alive());
  EXPECT_TRUE(task.group_alive());

  auto other = TaskProcess::start(launch({"/bin/sleep", "30"}));
  ASSERT_TRUE(other.has_value()) << other.error().message();
  const pid_t replaced = other->pid();
  *other = std::move(task);  // ends the process `other` owned
  EXPECT_TRUE(process_gone(replaced));
  EXPECT_TRUE(other->group_alive());
  ASSERT_TRUE(other->signal_group(SIGKILL).has_value());
  EXPECT_EQ(other->wait().signal, SIGKILL);
}

}  // namespace
}  // namespace tidepool
