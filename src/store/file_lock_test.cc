#include "store/file_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tidepool {
namespace {

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tidepool-lock-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/db.lock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string path_;
};

TEST_F(FileLockTest, ASecondHolderIsRefusedWithThePidOfTheFirst) {
  auto first = FileLock::acquire(path_);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto second = FileLock::acquire(path_);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().field, path_);
  EXPECT_NE(second.error().reason.find("locked by process " + std::to_string(getpid())),
            std::string::npos)
      << second.error().reason;
}

TEST_F(FileLockTest, AnotherProcessIsRefusedAndTheLockGoesWithItsHolder) {
  {
    auto held = FileLock::acquire(path_);
    ASSERT_TRUE(held.has_value()) << held.error().message();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(FileLock::acquire(path_).has_value() ? 1 : 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child got the lock";
  }
  auto again = FileLock::acquire(path_);
  EXPECT_TRUE(again.has_value()) << again.error().message();
}

}  // namespace
}  // namespace tidepool
