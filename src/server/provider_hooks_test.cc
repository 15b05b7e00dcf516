#include "server/provider_hooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A hook script in a fresh folder.
class HookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tidepool-hook-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string hook(const std::string& body) {
    std::string path = dir_ + "/hook";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0700);
    return path;
  }
  HookOutcome run(const std::string& path, const std::string& input = "{}",
                  std::chrono::milliseconds timeout = 10s) {
    return run_hook(path, "up", input, {{"TIDEPOOL_PROVIDER", "cloud"}}, timeout, stop_);
  }

  std::string dir_;
  std::atomic<bool> stop_ = false;
};

TEST_F(HookTest, GetsTheActionTheRequestAndTheEnvironment) {
  const HookOutcome out = run(hook("echo \"$1 $TIDEPOOL_PROVIDER $(cat)\"\n"), R"({"a": 1})");
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(out.output, R"(up cloud {"a": 1})");
}

TEST_F(HookTest, NonZeroExitFailsWithItsOutputAndStatus) {
  const HookOutcome out = run(hook("echo 'no capacity' >&2\nexit 3\n"));
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.output, "no capacity (exited with status 3)");
}

TEST_F(HookTest, ProgramThatCannotRunFails) {
  const HookOutcome out = run(dir_ + "/missing");
  EXPECT_FALSE(out.ok);
  EXPECT_THAT(out.output, HasSubstr("cannot run hook"));
}

TEST_F(HookTest, HookPastItsTimeoutIsStopped) {
  const auto start = std::chrono::steady_clock::now();
  const HookOutcome out = run(hook("echo started\nexec sleep 30\n"), "{}", 300ms);
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.output, "started (timed out after 0 s)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(HookTest, BackgroundProgramsAreNotWaitedForAndLongRequestsAreWritten) {
  // 300 KB: more than a pipe holds. The hook counts it, and leaves a sleeper holding its output.
  const std::string big(300'000, 'x');
  const auto start = std::chrono::steady_clock::now();
  const HookOutcome out = run(hook("wc -c\nsleep 5 &\n"), big);
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(out.output, "300000");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

TEST_F(HookTest, HookThatDoesNotReadItsRequestStillSucceeds) {
  const HookOutcome out = run(hook("exit 0\n"), std::string(300'000, 'x'));
  EXPECT_TRUE(out.ok) << out.output;
}

TEST_F(HookTest, ProviderHooksReportEachCall) {
  std::promise<std::pair<std::int64_t, HookOutcome>> reported;
  auto result = reported.get_future();
  {
    ProviderHooks hooks([&](std::int64_t id, const HookOutcome& outcome) {
      reported.set_value({id, outcome});
    });
    hooks.set_server_url("http://127.0.0.1:8470");
    ProviderCall call;
    call.id = 7;
    call.provider = "cloud";
    call.hook = hook("echo \"$1 $TIDEPOOL_SERVER\"\n");
    call.action = "down";
    hooks.run({call});
    ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  }
  auto [id, outcome] = result.get();
  EXPECT_EQ(id, 7);
  EXPECT_TRUE(outcome.ok);
  EXPECT_EQ(outcome.output, "down http://127.0.0.1:8470");
}

}  // namespace
}  // namespace tidepool
