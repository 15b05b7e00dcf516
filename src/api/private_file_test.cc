#include "api/private_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/temp_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

using test_support::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PrivateFile, WritesTheBytesOwnerOnlyAndLeavesNothingElse) {
  const TempDir dir;
  const std::string path = dir.file("backup.jsonl");
  ::umask(022);
  ASSERT_TRUE(write_private_file_atomically(path, "first\n").has_value());
  EXPECT_EQ(read_text(path), "first\n");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  // A second write replaces the file whole, and takes its mode whatever the old one was.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_TRUE(write_private_file_atomically(path, "second\n").has_value());
  EXPECT_EQ(read_text(path), "second\n");
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(PrivateFile, AFolderThatIsNotThereIsAnErrorNamingThePath) {
  const TempDir dir;
  const std::string path = dir.file("missing/backup.jsonl");
  auto written = write_private_file_atomically(path, "x");
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().field, path);
  EXPECT_THAT(written.error().reason, HasSubstr("No such file or directory"));
}

}  // namespace
}  // namespace tidepool
