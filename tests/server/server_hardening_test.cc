// The server process against a careless operator: one server per database and per port, private
// files, and a stop signal at any moment of its start-up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <random>
#include <string>

#include "server_process.h"

namespace tidepool::test_support {
namespace {

using ::testing::HasSubstr;

// Waits up to `limit` for `pid` to exit; its exit status, or -2 if it still ran (then killed).
int wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  int status = 0;
  const bool exited = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -2;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

TEST(ServerHardening, ASecondServerOnTheSameDatabaseIsRefusedNamingTheFirst) {
  TempDir dir;
  const std::string config = write_server_config(dir);
  ServerProcess first(dir, config);
  ASSERT_TRUE(first.start()) << first.log();
  TempDir other;
  const pid_t second =
      spawn_logged({tidepool_binary(), "server", "--config", config}, other.file("second.log"));
  EXPECT_NE(wait_exit(second, std::chrono::seconds(20)), 0);
  const std::string log = read_text(other.file("second.log"));
  EXPECT_THAT(log, HasSubstr("locked by process"));
  EXPECT_TRUE(first.ready()) << "the first server must keep serving";
}

TEST(ServerHardening, ASecondServerOnTheSamePortIsRefused) {
  TempDir dir;
  ServerProcess first(dir, write_server_config(dir));
  ASSERT_TRUE(first.start()) << first.log();
  TempDir other;
  const pid_t second =
      spawn_logged({tidepool_binary(), "server", "--config", write_server_config(other), "--listen",
                    "127.0.0.1:" + std::to_string(first.port())},
                   other.file("second.log"));
  EXPECT_NE(wait_exit(second, std::chrono::seconds(20)), 0)
      << "a second server bound the same port";
  EXPECT_THAT(read_text(other.file("second.log")), HasSubstr("cannot listen"));
  EXPECT_TRUE(first.ready());
}

TEST(ServerHardening, TheDatabaseTheTokenAndTheLogsArePrivate) {
  TempDir dir;
  ServerProcess server(dir, write_server_config(dir));
  ASSERT_TRUE(server.start()) << server.log();
  ApiClient admin(server.port(), server.admin_token());
  auto submitted = admin.post("/v1/jobs", R"({"name": "x", "tenant": "vision", "gpus_per_task": 1,
    "command": ["true"]})");
  ASSERT_EQ(submitted.status, 201) << submitted.body.dump();
  for (const char* file :
       {"tidepool.db", "tidepool.db-wal", "tidepool.db.admin-token", "tidepool.db.lock"}) {
    EXPECT_EQ(mode_of(dir.file(file)), 0600U) << file;
  }
  EXPECT_EQ(mode_of(dir.file("tidepool.db.logs")), 0700U);
}

// SIGTERM at a random moment of start-up, before and after listening begins: the server always
// exits, within a few seconds. TIDEPOOL_STOP_TRIES sets the number of tries (default 40).
TEST(ServerHardening, AStopSignalAtAnyMomentOfStartUpEndsTheServer) {
  TempDir dir;
  const std::string config = write_server_config(dir);
  const char* tries_text = std::getenv("TIDEPOOL_STOP_TRIES");
  const int tries = tries_text != nullptr ? std::atoi(tries_text) : 40;
  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> delay_us(0, 150'000);
  int slowest_ms = 0;
  for (int t = 0; t < tries; ++t) {
    const pid_t pid =
        spawn_logged({tidepool_binary(), "server", "--config", config}, dir.file("server.log"));
    ::usleep(static_cast<useconds_t>(delay_us(random)));
    ::kill(pid, SIGTERM);
    const auto start = std::chrono::steady_clock::now();
    const int status = wait_exit(pid, std::chrono::seconds(10));
    ASSERT_NE(status, -2) << "try " << t << ": the server did not stop within 10 s\n"
                          << read_text(dir.file("server.log"));
    slowest_ms = std::max<int>(
        slowest_ms, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count()));
  }
  std::cout << tries << " stops, the slowest exit " << slowest_ms << " ms after the signal\n";
}

}  // namespace
}  // namespace tidepool::test_support
