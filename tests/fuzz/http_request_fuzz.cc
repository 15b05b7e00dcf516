// libFuzzer target: raw bytes as the request stream of one connection to the HTTP server
// (server/http_server.h), in process on 127.0.0.1, with fake hooks that route by the API's
// path matcher and query grammar (server/http_route.h) and echo what they read in JSON. Any
// crash, sanitizer report, hang past the deadlines, or a response that is not HTTP fails.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "server/http_route.h"
#include "server/http_server.h"

namespace {

using namespace std::chrono_literals;
using tidepool::HeadVerdict;
using tidepool::HttpHooks;
using tidepool::HttpRequest;
using tidepool::HttpResponder;
using tidepool::HttpResponse;

HttpHooks fake_hooks() {
  HttpHooks hooks;
  hooks.on_head = [](HttpRequest& req) {
    if (req.path == "/healthz")
      return HeadVerdict::respond(HttpResponse{200, "text/plain", {}, "ok"});
    if (auto m = tidepool::match_path("/v1/jobs/{}", req.path)) {
      return HeadVerdict::respond(
          tidepool::http_error(404, "not found", "id", "no job " + (*m)[0]));
    }
    if (req.field("Authorization").empty() && req.path.starts_with("/private")) {
      return HeadVerdict::respond(tidepool::http_error(401, "unauthorized", "Authorization", ""));
    }
    return HeadVerdict::proceed();
  };
  hooks.handle = [](HttpRequest& req, const HttpResponder& res) {
    const tidepool::QueryParams query(req.query);
    std::string reason = query.get("q") + req.body.substr(0, 64);
    if (auto m = tidepool::match_path("/v1/{}/{}", req.path)) reason += (*m)[0] + (*m)[1];
    res.send(tidepool::http_error(200, req.method, req.target, reason));
  };
  return hooks;
}

struct Fixture {
  tidepool::HttpServer server;
  int port = 0;
  std::thread thread;

  Fixture() : server(options(), fake_hooks()) {
    auto bound = server.bind();
    if (!bound) std::abort();
    port = *bound;
    thread = std::thread([this] { server.serve(); });
  }

  static tidepool::HttpServerOptions options() {
    tidepool::HttpServerOptions o;
    o.port = 0;
    o.io_threads = 1;
    o.worker_threads = 2;
    o.idle_timeout = 500ms;
    o.head_timeout = 1s;
    o.body_timeout = 1s;
    o.max_header_bytes = 2048;
    o.max_header_count = 20;
    o.max_body_bytes = 1024;
    return o;
  }
};

Fixture& fixture() {
  static auto* f = new Fixture();  // never destroyed: the server runs until the process ends
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixture& f = fixture();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(f.port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return 0;
  }
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // Read until the server closes; it must within its deadlines (a few seconds at most).
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  char buffer[16384];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) std::abort();  // the server neither answered nor closed
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  // Close with a reset: no TIME_WAIT left behind by tens of thousands of connections.
  linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
  return 0;
}
