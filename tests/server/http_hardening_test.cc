// Hostile clients against the real server process on 127.0.0.1: bytes that are not UTF-8 in the
// path, bodies over the limit however framed, heads too big or too crowded, ambiguous framing,
// tokens in odd spellings, idle and trickling connections, long polls of one token, a second
// server on the same port, and a stop right after the start. Each fails on the cpp-httplib
// front end this one replaced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/http_test_socket.h"
#include "server_process.h"

namespace tidepool::test_support {
namespace {

using namespace std::chrono_literals;
using ::testing::AnyOf;
using ::testing::HasSubstr;

class HttpHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_, write_server_config(dir_));
    ASSERT_TRUE(server_->start()) << server_->log();
    admin_ = server_->admin_token();
  }

  // One request on a fresh connection from `source`; the response (status 0: none in 10 s).
  TestSocket::Response raw(const std::string& bytes, const std::string& source = "127.0.0.1") {
    TestSocket s(server_->port(), source);
    EXPECT_TRUE(s.ok());
    s.send(bytes);
    return s.read_response(10s);
  }
  std::string get(const std::string& path, const std::string& token) {
    return "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  }
  static bool json_error(const TestSocket::Response& res) {
    auto body = nlohmann::json::parse(res.body, nullptr, false);
    return body.is_object() && body.contains("error") && body.contains("reason");
  }
  bool healthy() { return raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").status == 200; }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::string admin_;
};

TEST_F(HttpHardeningTest, BytesThatAreNotUtf8InThePathGetAJsonErrorAndTheServerLives) {
  auto open = raw("GET /%FF HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(open.status, 404);
  EXPECT_TRUE(json_error(open)) << open.body;
  ASSERT_TRUE(healthy()) << server_->log();
  for (const std::string path :
       {"/v1/jobs/%FF", "/v1/jobs/%FF/why", "/v1/tenants/%FF", "/v1/jobs/%FF%FE/logs"}) {
    auto res = raw(get(path, admin_));
    EXPECT_THAT(res.status, AnyOf(400, 404)) << path << ": " << res.body;
    EXPECT_TRUE(json_error(res)) << path << ": " << res.body;
  }
  auto drain = raw("POST /v1/nodes/%FF/drain HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                   admin_ + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_THAT(drain.status, AnyOf(400, 404)) << drain.body;
  EXPECT_TRUE(json_error(drain)) << drain.body;
  EXPECT_TRUE(healthy());
}

TEST_F(HttpHardeningTest, AChunkedBodyWithoutATokenIsRefusedBeforeItIsRead) {
  TestSocket s(server_->port());
  // 64 MiB announced in chunks; only the head and a first piece are sent.
  ASSERT_TRUE(
      s.send("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             "Content-Type: application/json\r\n\r\n4000000\r\n" +
             std::string(8192, ' ')));
  auto res = s.read_response(10s);
  EXPECT_EQ(res.status, 401);
  EXPECT_TRUE(json_error(res));
  EXPECT_TRUE(s.closed_within(10s));
}

TEST_F(HttpHardeningTest, AChunkedBodyOverTheLimitGets413) {
  TestSocket s(server_->port());
  std::string request = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
                        "\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n";
  ASSERT_TRUE(s.send(request));
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";  // 64 KiB
  for (int i = 0; i < 17 && s.send(chunk); ++i) {
  }
  auto res = s.read_response(10s);
  EXPECT_EQ(res.status, 413) << res.head;
  EXPECT_TRUE(json_error(res));
}

TEST_F(HttpHardeningTest, BigAndCrowdedHeadsGet431AndTwoLengths400) {
  auto big =
      raw("GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status, 431);
  EXPECT_TRUE(json_error(big));
  std::string crowded = "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 5000; ++i) crowded += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(raw(crowded + "\r\n").status, 431);
  auto twice = raw("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
                   "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                   "Content-Length: 2\r\n\r\n{}");
  EXPECT_EQ(twice.status, 400);
  EXPECT_TRUE(json_error(twice));
}

TEST_F(HttpHardeningTest, TheSchemeIsCaseInsensitiveAndControlBytesAreRefused) {
  auto lower =
      raw("GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: bearer " + admin_ + "\r\n\r\n");
  EXPECT_EQ(lower.status, 200) << lower.body;
  EXPECT_EQ(raw("GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: BEARER " + admin_ + "\r\n\r\n")
                .status,
            200);
  std::string nul = "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_;
  nul += '\0';
  nul += "junk\r\n\r\n";
  EXPECT_THAT(raw(nul).status, AnyOf(400, 401));
}

TEST_F(HttpHardeningTest, HealthzAnswersWhileAThousandIdleAndTwoHundredSlowConnectionsAreOpen) {
  std::vector<TestSocket> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.emplace_back(server_->port(), "127.0.0." + std::to_string(2 + i % 8));
    ASSERT_TRUE(idle.back().ok()) << i;
  }
  std::vector<TestSocket> slow;
  for (int i = 0; i < 200; ++i) {
    slow.emplace_back(server_->port(), "127.0.0." + std::to_string(2 + i % 8));
    ASSERT_TRUE(slow.back().ok()) << i;
    slow.back().send("GET /v1/jobs HTTP/1.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (TestSocket& s : slow) s.send("X");
      for (int i = 0; i < 10 && !done; ++i) std::this_thread::sleep_for(50ms);
    }
  });
  ApiClient admin(server_->port(), admin_);
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(healthy());
    EXPECT_EQ(admin.get("/v1/jobs").status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s) << "probe " << i;
  }
  done = true;
  trickle.join();
  // The trickled heads are cut off at their deadline (10 s from their first byte).
  EXPECT_TRUE(slow.front().closed_within(20s));
}

TEST_F(HttpHardeningTest, LongPollsOfOneTokenHoldNoThreadAndAreWokenByEvents) {
  ApiClient admin(server_->port(), admin_);
  auto created = admin.post("/v1/tokens", R"({"role": "user", "tenant": "vision"})");
  ASSERT_EQ(created.status, 201);
  const std::string user = created.body["secret"];
  const auto now = admin.get("/v1/events?timeout=0s");
  ASSERT_EQ(now.status, 200) << now.body.dump();
  const std::string since = std::to_string(now.body["last_seq"].get<std::int64_t>());
  // 65 polls of one token: the server parks 64 and refuses whichever comes last. Which one that
  // is depends on the order they arrive in, so the test waits for the one refusal; once it has
  // come, the other 64 are parked.
  std::vector<TestSocket> polls;
  for (int i = 0; i < 65; ++i) {
    polls.emplace_back(server_->port());
    ASSERT_TRUE(polls.back().send(get("/v1/events?timeout=60s&since=" + since, user)));
  }
  std::optional<std::size_t> refused;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < polls.size() && !refused; ++i) {
      auto res = polls[i].read_response(5ms);
      if (res.status == 0) continue;
      ASSERT_EQ(res.status, 429) << res.body;
      EXPECT_THAT(res.body, HasSubstr("already waits on 64 event polls"));
      refused = i;
    }
  }
  ASSERT_TRUE(refused) << "no poll of the 65 was refused";
  // The 64 wait; another caller is served at once.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(admin.get("/v1/jobs").status, 200);
  EXPECT_EQ(admin.get("/v1/tenants").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  // A job of the tenant: each poll is answered with its event.
  auto job = admin.post("/v1/jobs", R"({"name": "a", "tenant": "vision", "queue": "default",
    "gpus_per_task": 1, "gpu_model": ["H100"], "runtime_estimate": "1h", "command": ["true"]})");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  for (std::size_t i = 0; i < polls.size(); ++i) {
    if (i == *refused) continue;
    auto res = polls[i].read_response(20s);
    ASSERT_EQ(res.status, 200);
    auto body = nlohmann::json::parse(res.body);
    ASSERT_FALSE(body["events"].empty()) << res.body;
    EXPECT_EQ(body["events"][0]["kind"], "job.submitted");
  }
}

TEST_F(HttpHardeningTest, MetricsAreRateLimitedPerPeer) {
  int limited = 0;
  for (int i = 0; i < 60 && limited == 0; ++i) {
    if (raw("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status == 429) ++limited;
  }
  EXPECT_GT(limited, 0);
  // Another address has its own allowance.
  EXPECT_EQ(raw("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "127.0.0.3").status, 200);
}

TEST(HttpHardening, MetricsMayRequireAToken) {
  TempDir dir;
  ServerProcess server(dir, write_server_config(dir, "metrics_token_required: true\n"));
  ASSERT_TRUE(server.start()) << server.log();
  EXPECT_EQ(ApiClient(server.port(), "").get("/metrics").status, 401);
  ApiClient admin(server.port(), server.admin_token());
  EXPECT_EQ(admin.get("/metrics").status, 200);
}

TEST(HttpHardening, ASecondServerOnTheSamePortFailsToStart) {
  TempDir first_dir;
  ServerProcess first(first_dir, write_server_config(first_dir));
  ASSERT_TRUE(first.start()) << first.log();
  TempDir second_dir;
  const std::string log = second_dir.file("second.log");
  pid_t second =
      spawn_logged({tidepool_binary(), "server", "--config", write_server_config(second_dir),
                    "--listen", "127.0.0.1:" + std::to_string(first.port())},
                   log);
  int status = 0;
  const bool exited =
      eventually([&] { return ::waitpid(second, &status, WNOHANG) == second; }, 20s);
  if (!exited) signal_and_reap(second, SIGKILL);
  ASSERT_TRUE(exited) << "the second server is still running";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_THAT(read_text(log), HasSubstr("in use"));
}

TEST(HttpHardening, AStopRightAfterTheStartEndsTheServer) {
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    const std::string port_file = dir.file("port");
    pid_t pid = spawn_logged({tidepool_binary(), "server", "--config", write_server_config(dir),
                              "--port-file", port_file},
                             dir.file("server.log"));
    ASSERT_TRUE(eventually([&] { return !read_text(port_file).empty(); }, 20s));
    ::kill(pid, SIGTERM);
    int status = 0;
    const bool exited = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 15s);
    if (!exited) signal_and_reap(pid, SIGKILL);
    ASSERT_TRUE(exited) << "round " << round << ": the server hangs after SIGTERM";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(dir.file("server.log"));
  }
}

}  // namespace
}  // namespace tidepool::test_support
