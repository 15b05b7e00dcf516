#include "api/http_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "api/test_http_server.h"

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

using test_support::ScriptedServer;

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
  HttpConnection connection(
      {.host = "127.0.0.1", .port = test_support::refusing_port(), .tls = false}, {});
  auto reply = connection.send(get("/healthz"));
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().failure, HttpFailure::kConnect);
  EXPECT_THAT(reply.error().detail, HasSubstr("refused"));
  EXPECT_FALSE(reply.error().sent);
}

TEST(HttpConnection, SaysWhenTheRequestWentOutButNoReplyCame) {
  ScriptedServer closing(1, [](const std::string&, int) { return std::optional<std::string>(); });
  HttpConnection connection({.host = "127.0.0.1", .port = closing.port(), .tls = false}, {});
  auto reply = connection.send(get("/v1/jobs"));
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().failure, HttpFailure::kNoReply);
  EXPECT_TRUE(reply.error().sent);
  EXPECT_EQ(closing.requests().size(), 1U);
}

}  // namespace
}  // namespace tidepool
