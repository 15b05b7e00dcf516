// The generic HTTP server in process, on 127.0.0.1 and a free port, with fake hooks: limits,
// refusals before the body, deadlines, connection caps, stop at any time.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server/http_test_socket.h"

namespace tidepool {
namespace {

using namespace std::chrono_literals;
using test_support::TestSocket;

// Answers /inline on the I/O thread, refuses /refuse without reading the body (401), throws on
// /throw, and otherwise echoes the body's size from a worker.
HttpHooks fake_hooks(std::atomic<int>* handled = nullptr) {
  HttpHooks hooks;
  hooks.on_head = [](HttpRequest& req) {
    if (req.path == "/inline")
      return HeadVerdict::respond(HttpResponse{200, "text/plain", {}, "hi"});
    if (req.path == "/refuse") return HeadVerdict::respond(http_error(401, "unauthorized", "", ""));
    if (req.path == "/throw-head") throw std::runtime_error("head hook failed");
    return HeadVerdict::proceed();
  };
  hooks.handle = [handled](HttpRequest& req, const HttpResponder& res) {
    if (handled != nullptr) ++*handled;
    if (req.path == "/throw") throw std::runtime_error("handler failed");
    if (req.path == "/drop") return;  // no answer: the responder answers 500
    res.send(HttpResponse{
        200, "application/json", {}, nlohmann::json{{"bytes", req.body.size()}}.dump()});
  };
  return hooks;
}

class Served {
 public:
  explicit Served(HttpServerOptions options, HttpHooks hooks = fake_hooks())
      : server_(std::move(options), std::move(hooks)) {
    auto port = server_.bind();
    if (!port) throw std::runtime_error(port.error().message());
    port_ = *port;
    thread_ = std::thread([this] { server_.serve(); });
  }
  ~Served() {
    server_.stop();
    thread_.join();
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  [[nodiscard]] int port() const { return port_; }
  HttpServer& server() { return server_; }

 private:
  HttpServer server_;
  int port_ = 0;
  std::thread thread_;
};

HttpServerOptions small_options() {
  HttpServerOptions o;
  o.port = 0;
  o.worker_threads = 2;
  o.max_body_bytes = 1024;
  return o;
}

TestSocket::Response request(int port, const std::string& bytes) {
  TestSocket s(port);
  EXPECT_TRUE(s.ok());
  s.send(bytes);
  return s.read_response(5s);
}

TEST(HttpServer, AnswersFromTheHeadHookAndFromAWorker) {
  Served served(small_options());
  EXPECT_EQ(request(served.port(), "GET /inline HTTP/1.1\r\nHost: x\r\n\r\n").body, "hi");
  auto echoed =
      request(served.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(echoed.status, 200);
  EXPECT_EQ(nlohmann::json::parse(echoed.body)["bytes"], 5);
}

TEST(HttpServer, KeepsAConnectionAliveAcrossRequests) {
  Served served(small_options());
  TestSocket s(served.port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(s.read_response(5s).status, 200);
  }
}

TEST(HttpServer, ChunkedBodiesAreReadAndLimited) {
  Served served(small_options());
  auto ok = request(served.port(),
                    "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok.body)["bytes"], 5);
  // 600 + 600 bytes: over the 1024-byte limit once the second chunk is announced.
  const std::string chunk(600, 'x');
  auto big = request(served.port(),
                     "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" +
                         chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(nlohmann::json::parse(big.body)["error"], "payload too large");
  auto declared =
      request(served.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
  EXPECT_EQ(declared.status, 413);
}

TEST(HttpServer, RefusesFromTheHeadWithoutReadingTheBody) {
  std::atomic<int> handled{0};
  Served served(small_options(), fake_hooks(&handled));
  TestSocket s(served.port());
  // A chunked body announced as 64 MiB in all; only its first chunk is sent.
  ASSERT_TRUE(
      s.send("POST /refuse HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "100000\r\n" +
             std::string(4096, 'x')));
  auto res = s.read_response(5s);
  EXPECT_EQ(res.status, 401);
  EXPECT_NE(res.head.find("Connection: close"), std::string::npos) << res.head;
  EXPECT_TRUE(s.closed_within(5s));
  EXPECT_EQ(handled, 0);
}

TEST(HttpServer, BigOrCrowdedHeadsGet431) {
  Served served(small_options());
  auto big = request(served.port(), "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                        std::string(64 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status, 431);
  EXPECT_TRUE(nlohmann::json::parse(big.body).is_object());
  std::string many = "GET /echo HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  auto crowded = request(served.port(), many + "\r\n");
  EXPECT_EQ(crowded.status, 431);
}

TEST(HttpServer, AmbiguousBodyFramingGets400) {
  Served served(small_options());
  EXPECT_EQ(request(served.port(),
                    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n"
                    "\r\nabc")
                .status,
            400);
  EXPECT_EQ(request(served.port(),
                    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n"
                    "\r\nabcde")
                .status,
            400);
  EXPECT_EQ(request(served.port(),
                    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
                .status,
            400);
  EXPECT_EQ(request(served.port(), "NOT HTTP AT ALL\r\n\r\n").status, 400);
}

TEST(HttpServer, AHookThatThrowsGets500AndTheServerGoesOn) {
  Served served(small_options());
  EXPECT_EQ(request(served.port(), "GET /throw HTTP/1.1\r\nHost: x\r\n\r\n").status, 500);
  EXPECT_EQ(request(served.port(), "GET /throw-head HTTP/1.1\r\nHost: x\r\n\r\n").status, 500);
  EXPECT_EQ(request(served.port(), "GET /drop HTTP/1.1\r\nHost: x\r\n\r\n").status, 500);
  EXPECT_EQ(request(served.port(), "GET /inline HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
}

TEST(HttpServer, ErrorBodiesAreValidUtf8WhateverTheText) {
  const HttpResponse res = http_error(404, "not found", "id", "no job \xff\xfe");
  const auto body = nlohmann::json::parse(res.body);  // throws on invalid UTF-8
  EXPECT_EQ(body["reason"], "no job \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(HttpServer, ConnectionsOverThePeerCapAreClosedAtOnce) {
  HttpServerOptions o = small_options();
  o.max_connections_per_peer = 4;
  Served served(o);
  std::vector<TestSocket> held;
  for (int i = 0; i < 4; ++i) {
    held.emplace_back(served.port());
    // Each is answered, so it is counted before the next connects.
    ASSERT_TRUE(held.back().send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(held.back().read_response(5s).status, 200);
  }
  TestSocket over(served.port());
  over.send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(over.closed_within(5s));
  EXPECT_EQ(over.read_response(100ms).status, 0);
  // Another address is another peer.
  TestSocket other(served.port(), "127.0.0.2");
  ASSERT_TRUE(other.send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(other.read_response(5s).status, 200);
}

TEST(HttpServer, ConnectionsOverTheOverallCapAreClosedAtOnce) {
  HttpServerOptions o = small_options();
  o.max_connections = 3;
  Served served(o);
  std::vector<TestSocket> held;
  for (int i = 0; i < 3; ++i) {
    held.emplace_back(served.port(), "127.0.0." + std::to_string(2 + i));
    ASSERT_TRUE(held.back().send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_EQ(held.back().read_response(5s).status, 200);
  }
  TestSocket over(served.port(), "127.0.0.9");
  EXPECT_TRUE(over.closed_within(5s));
}

TEST(HttpServer, ATrickledHeadIsCutOffAtItsDeadline) {
  HttpServerOptions o = small_options();
  o.head_timeout = 1s;
  Served served(o);
  TestSocket s(served.port());
  const std::string head = "GET /inline HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 'a');
  const auto start = std::chrono::steady_clock::now();
  bool cut = false;
  // One byte every 50 ms would take 10 s; the deadline is 1 s after the first byte.
  for (char c : head) {
    if (!s.send(std::string_view(&c, 1)) || s.closed_within(50ms)) {
      cut = true;
      break;
    }
  }
  EXPECT_TRUE(cut || s.closed_within(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
}

TEST(HttpServer, AnIdleConnectionIsClosedAfterTheIdleLimit) {
  HttpServerOptions o = small_options();
  o.idle_timeout = 300ms;
  Served served(o);
  TestSocket s(served.port());
  EXPECT_TRUE(s.closed_within(10s));
}

TEST(HttpServer, StopBeforeServeMakesServeReturnAtOnce) {
  HttpServer server(small_options(), fake_hooks());
  ASSERT_TRUE(server.bind());
  server.stop();
  auto served = std::async(std::launch::async, [&] { server.serve(); });
  EXPECT_EQ(served.wait_for(5s), std::future_status::ready);
}

TEST(HttpServer, StopRightAfterServeBeginsReturnsPromptly) {
  for (int i = 0; i < 20; ++i) {
    HttpServer server(small_options(), fake_hooks());
    ASSERT_TRUE(server.bind());
    auto served = std::async(std::launch::async, [&] { server.serve(); });
    server.stop();
    ASSERT_EQ(served.wait_for(5s), std::future_status::ready) << "round " << i;
  }
}

TEST(HttpServer, StopReturnsPromptlyWithSlowClientsConnected) {
  HttpServerOptions o = small_options();
  auto server = std::make_unique<HttpServer>(o, fake_hooks());
  auto port = server->bind();
  ASSERT_TRUE(port);
  auto served = std::async(std::launch::async, [&] { server->serve(); });
  std::vector<TestSocket> slow;
  for (int i = 0; i < 20; ++i) {
    slow.emplace_back(*port);
    slow.back().send("GET /echo HTTP/1.1\r\nHost: x\r\nX-Part: ");
  }
  TestSocket probe(*port);
  ASSERT_TRUE(probe.send("GET /inline HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(probe.read_response(5s).status, 200);
  server->stop();
  EXPECT_EQ(served.wait_for(5s), std::future_status::ready);
  served.wait();
  EXPECT_TRUE(slow.front().closed_within(5s));
}

TEST(HttpServer, ASecondServerOnTheSamePortFailsToBind) {
  HttpServer first(small_options(), fake_hooks());
  auto port = first.bind();
  ASSERT_TRUE(port);
  HttpServerOptions o = small_options();
  o.port = *port;
  HttpServer second(o, fake_hooks());
  auto again = second.bind();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().field, "listen");
  EXPECT_NE(again.error().reason.find("in use"), std::string::npos) << again.error().reason;
}

TEST(HttpServer, AnswersExpect100ContinueBeforeTheBody) {
  Served served(small_options());
  TestSocket s(served.port());
  ASSERT_TRUE(
      s.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
             "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(s.read_response(5s).status, 100);
  ASSERT_TRUE(s.send("abcd"));
  auto res = s.read_response(5s);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(nlohmann::json::parse(res.body)["bytes"], 4);
}

// An HTTP/1.0 request knows no interim answer: the expectation is ignored, the body read, and the
// one answer is HTTP/1.1, as every answer of the server.
TEST(HttpServer, IgnoresExpect100ContinueFromAnHttp10Client) {
  Served served(small_options());
  TestSocket s(served.port());
  ASSERT_TRUE(
      s.send("POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc"));
  auto res = s.read_response(5s);
  EXPECT_TRUE(res.head.starts_with("HTTP/1.1 200 ")) << res.head;
  EXPECT_EQ(nlohmann::json::parse(res.body)["bytes"], 3);
}

// A handler that does not block runs on the I/O thread: it answers while every worker is held;
// a body over max_inline_body_bytes still goes to a worker.
TEST(HttpServer, HandlersThatDoNotBlockRunOnTheIoThreadWhenTheirBodyIsSmall) {
  std::promise<void> worker_held;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> worker_busy{false};
  // The threads that answer later, joined before the server stops: a thread still running when
  // the test program exits can deadlock the leak checker of the sanitizer builds.
  std::mutex answerers_mutex;
  std::vector<std::thread> answerers;
  HttpHooks hooks;
  hooks.on_head = [](HttpRequest& req) {
    return req.path == "/later" ? HeadVerdict::proceed_without_blocking() : HeadVerdict::proceed();
  };
  hooks.handle = [&](HttpRequest& req, const HttpResponder& res) {
    if (req.path == "/block") {
      worker_busy = true;
      worker_held.set_value();
      released.wait();
      worker_busy = false;
      res.send(HttpResponse{200, "text/plain", {}, "released"});
      return;
    }
    // Answered later, from another thread, as a loop command would be.
    const bool busy = worker_busy;
    std::lock_guard lock(answerers_mutex);
    answerers.emplace_back([res, busy] {
      res.send(HttpResponse{
          200, "application/json", {}, nlohmann::json{{"ran_while_worker_busy", busy}}.dump()});
    });
  };
  HttpServerOptions options = small_options();
  options.worker_threads = 1;
  options.max_inline_body_bytes = 8;
  Served served(options, hooks);
  // However the test ends (a failed ASSERT returns early), before the server stops the worker is
  // released (it would wait forever) and the answering threads are joined.
  struct Releaser {
    std::promise<void>& release;
    std::mutex& mutex;
    std::vector<std::thread>& threads;
    bool done = false;
    void now() {
      if (!done) release.set_value();
      done = true;
    }
    ~Releaser() {
      now();
      std::lock_guard lock(mutex);
      for (std::thread& t : threads) t.join();
    }
  } releaser{release, answerers_mutex, answerers};

  TestSocket blocker(served.port());
  ASSERT_TRUE(blocker.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  worker_held.get_future().wait();

  auto small =
      request(served.port(), "POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(small.status, 200);
  EXPECT_EQ(nlohmann::json::parse(small.body)["ran_while_worker_busy"], true);

  TestSocket big(served.port());
  ASSERT_TRUE(
      big.send("POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n0123456789abcdef"));
  releaser.now();
  EXPECT_EQ(blocker.read_response(5s).body, "released");
  auto queued = big.read_response(5s);
  ASSERT_EQ(queued.status, 200);
  EXPECT_EQ(nlohmann::json::parse(queued.body)["ran_while_worker_busy"], false);
}

}  // namespace
}  // namespace tidepool
