#include "agent/task_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/test_processes.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TaskFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tidepool_files_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = fs::canonical(pattern).string();
    fs::create_directories(job());
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  [[nodiscard]] std::string job() const { return root_ + "/checkpoints/7"; }
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  std::string root_;
};

TEST_F(TaskFilesTest, ResolveWithinKeepsPathsInTheJobsFolder) {
  write(job() + "/step-1", "1");
  EXPECT_EQ(resolve_within(job() + "/step-1", job()).value(), job() + "/step-1");
  EXPECT_EQ(resolve_within("step-1", job()).value(), job() + "/step-1");
  EXPECT_EQ(resolve_within(job() + "/./sub/../step-1", job()).error().field, "path");  // no sub
  fs::create_directories(job() + "/sub");
  EXPECT_EQ(resolve_within(job() + "/sub/../step-1", job()).value(), job() + "/step-1");
  EXPECT_EQ(resolve_within(job() + "/not-yet", job()).value(), job() + "/not-yet");
  EXPECT_EQ(resolve_within(job(), job()).value(), job());
}

TEST_F(TaskFilesTest, ResolveWithinRefusesEscapes) {
  fs::create_directories(root_ + "/checkpoints/8");
  write(root_ + "/checkpoints/8/theirs", "x");
  fs::create_directory_symlink("/", job() + "/escape");
  fs::create_symlink(root_ + "/checkpoints/8/theirs", job() + "/link");
  for (const std::string& bad : {job() + "/escape/etc/passwd", job() + "/escape", job() + "/link",
                                 job() + "/../8/theirs", std::string("/etc/passwd"), job() + "/..",
                                 std::string("../8/theirs"), job() + "/missing/deeper"}) {
    auto resolved = resolve_within(bad, job());
    ASSERT_FALSE(resolved) << bad << " -> " << *resolved;
    EXPECT_EQ(resolved.error().field, "path");
    EXPECT_THAT(resolved.error().reason, HasSubstr(bad));
  }
  // A folder whose name starts like the job's is not inside it.
  fs::create_directories(job() + "0");
  EXPECT_FALSE(resolve_within(job() + "0", job()));
}

TEST_F(TaskFilesTest, WriteFreshFileReplacesALinkInsteadOfFollowingIt) {
  const std::string target = root_ + "/precious";
  write(target, "keep");
  fs::create_symlink(target, job() + "/preemption-notice");
  ASSERT_TRUE(write_fresh_file(job(), "preemption-notice", "preempted 1\n", -1));
  EXPECT_EQ(test_support::read_text(target), "keep");
  EXPECT_FALSE(fs::is_symlink(job() + "/preemption-notice"));
  EXPECT_EQ(test_support::read_text(job() + "/preemption-notice"), "preempted 1\n");
  struct stat info {};
  ASSERT_EQ(::stat((job() + "/preemption-notice").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600U);
}

TEST_F(TaskFilesTest, ReadRegularFileReadsNoLinkAndNoFifo) {
  write(job() + "/report", "line one\nline two\n");
  std::int64_t size = 0;
  EXPECT_EQ(read_regular_file(job() + "/report", 9, 100, &size), "line two\n");
  EXPECT_EQ(size, 18);
  fs::create_symlink(job() + "/report", job() + "/link");
  EXPECT_EQ(read_regular_file(job() + "/link", 0, 100, &size), "");
  EXPECT_EQ(size, 0);
  ASSERT_EQ(::mkfifo((job() + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_regular_file(job() + "/fifo", 0, 100, &size), "");  // and does not block
}

// A checkpoint folder left by an earlier run under another uid goes to the new one, all of it,
// but the walk never leaves it through a link.
TEST_F(TaskFilesTest, GiveTreeToChangesTheFolderAndNotWhatItsLinksPointAt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: it changes owners";
  fs::create_directories(job() + "/sub/deeper");
  write(job() + "/sub/deeper/step-1", "1");
  const std::string outside = root_ + "/outside";
  fs::create_directories(outside);
  write(outside + "/theirs", "x");
  fs::create_directory_symlink(outside, job() + "/sub/link");
  ASSERT_TRUE(give_tree_to(job(), 61988));
  const auto owner = [](const std::string& path) {
    struct stat info {};
    return ::lstat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_uid) : -1;
  };
  for (const std::string& mine : {job(), job() + "/sub", job() + "/sub/deeper",
                                  job() + "/sub/deeper/step-1", job() + "/sub/link"}) {
    EXPECT_EQ(owner(mine), 61988) << mine;
  }
  EXPECT_EQ(owner(outside), 0);
  EXPECT_EQ(owner(outside + "/theirs"), 0);
}

TEST_F(TaskFilesTest, MakeOwnedDirSetsTheMode) {
  ASSERT_TRUE(make_owned_dir(root_ + "/a/b", 0700));
  struct stat info {};
  ASSERT_EQ(::stat((root_ + "/a/b").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700U);
}

TEST_F(TaskFilesTest, TheLogQuotaRemovesTheOldestFinishedLogsFirst) {
  const std::string logs = root_ + "/logs";
  fs::create_directories(logs + "/1");
  fs::create_directories(logs + "/2");
  int age = 100;
  for (const char* name : {"/1/old.log", "/2/live.log", "/2/newer.log", "/1/newest.log"}) {
    write(logs + name, std::string(100, 'x'));
    const struct timeval times[2] = {{age, 0}, {age, 0}};
    ASSERT_EQ(::utimes((logs + name).c_str(), times), 0);
    age += 100;
  }
  EXPECT_TRUE(enforce_log_quota(logs, {}, 400).empty());
  const auto removed = enforce_log_quota(logs, {logs + "/2/live.log"}, 250);
  EXPECT_EQ(removed, (std::vector<std::string>{logs + "/1/old.log", logs + "/2/newer.log"}));
  EXPECT_TRUE(fs::exists(logs + "/2/live.log"));
  EXPECT_TRUE(fs::exists(logs + "/1/newest.log"));
}

}  // namespace
}  // namespace tidepool
