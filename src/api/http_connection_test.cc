#include "api/http_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

TEST(HttpUrl, ReadsSchemeHostAndPort) {
  auto plain = parse_http_url("http://127.0.0.1:8470/");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->host, "127.0.0.1");
  EXPECT_EQ(plain->port, 8470);
  EXPECT_FALSE(plain->tls);
  auto tls = parse_http_url("https://pool.example.com");
  ASSERT_TRUE(tls.has_value());
  EXPECT_EQ(tls->host, "pool.example.com");
  EXPECT_EQ(tls->port, 443);
  EXPECT_TRUE(tls->tls);
  auto ipv6 = parse_http_url("http://[::1]:9000");
  ASSERT_TRUE(ipv6.has_value());
  EXPECT_EQ(ipv6->host, "::1");
  EXPECT_EQ(ipv6->port, 9000);
  auto bare = parse_http_url("localhost:1");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->port, 1);
}

TEST(HttpUrl, SaysWhatIsWrong) {
  auto scheme = parse_http_url("ftp://x");
  ASSERT_FALSE(scheme.has_value());
  EXPECT_EQ(scheme.error().field, "server");
  EXPECT_THAT(scheme.error().reason, HasSubstr("not an http:// or https:// URL"));
  for (const char* url : {"http://h:0", "http://h:65536", "http://h:8x", "http://h:"}) {
    auto port = parse_http_url(url);
    ASSERT_FALSE(port.has_value()) << url;
    EXPECT_THAT(port.error().reason, HasSubstr("not a number in 1..65535")) << url;
  }
  EXPECT_FALSE(parse_http_url("http://:80").has_value());
}

// A loopback server that answers every request on a connection with "reply N" (N counting
// requests over all connections) and closes each connection after `per_connection` requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(int per_connection) : per_connection_(per_connection) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(::listen(listener_, 4), 0);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int connections() const { return connections_; }

 private:
  void serve() {
    for (;;) {
      const int peer = ::accept(listener_, nullptr, nullptr);
      if (peer < 0) return;
      ++connections_;
      for (int served = 0; served < per_connection_; ++served) {
        std::string request;
        char buffer[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const ssize_t got = ::recv(peer, buffer, sizeof(buffer), 0);
          if (got <= 0) break;
          request.append(buffer, static_cast<std::size_t>(got));
        }
        if (request.find("\r\n\r\n") == std::string::npos) break;
        const std::string body = "reply " + std::to_string(++requests_);
        const std::string reply =
            "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        ::send(peer, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      ::close(peer);
    }
  }

  int per_connection_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  int requests_ = 0;
  std::thread thread_;
};

HttpRequest get(const std::string& target) {
  return HttpRequest{.method = "GET", .target = target, .headers = {}, .body = {}};
}

TEST(HttpConnection, KeepsTheConnectionAndReconnectsWhenTheServerClosedIt) {
  ScriptedServer server(/*per_connection=*/2);
  HttpConnection connection({.host = "127.0.0.1", .port = server.port(), .tls = false}, {});
  for (int i = 1; i <= 5; ++i) {
    auto reply = connection.send(get("/v1/jobs"));
    ASSERT_TRUE(reply.has_value()) << i << ": " << reply.error().detail;
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, "reply " + std::to_string(i));
  }
  // Two requests per connection: five requests took three connections, none was lost.
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpConnection, RefusesALineBreakInAHeaderBeforeSendingAnything) {
  ScriptedServer server(1);
  HttpConnection connection({.host = "127.0.0.1", .port = server.port(), .tls = false}, {});
  HttpRequest request = get("/v1/jobs");
  request.headers.emplace_back("Authorization", "Bearer x\r\nX-Injected: 1");
  auto reply = connection.send(request);
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().failure, HttpFailure::kBadRequest);
  EXPECT_THAT(reply.error().detail, HasSubstr("Authorization"));
  EXPECT_EQ(server.connections(), 0);
}

TEST(HttpConnection, SaysWhenNothingListens) {
  int port = 0;
  {
    ScriptedServer gone(1);
    port = gone.port();
  }
  HttpConnection connection({.host = "127.0.0.1", .port = port, .tls = false}, {});
  auto reply = connection.send(get("/healthz"));
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().failure, HttpFailure::kConnect);
  EXPECT_THAT(reply.error().detail, HasSubstr("refused"));
}

}  // namespace
}  // namespace tidepool
