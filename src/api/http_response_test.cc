#include "api/http_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// The response parsed from `wire` fed one byte at a time, as reads may split it anywhere: every
// proper prefix needs more bytes, and the whole is complete.
HttpResponse parse_bytewise(const std::string& wire, bool closed_after = false) {
  for (std::size_t size = 0; size < wire.size(); ++size) {
    auto partial = parse_http_response(std::string_view(wire).substr(0, size), false);
    EXPECT_TRUE(partial.has_value()) << size << ": " << partial.error().reason;
    if (partial) {
      EXPECT_FALSE(partial->has_value()) << "complete after " << size << " bytes";
    }
  }
  auto whole = parse_http_response(wire, closed_after);
  EXPECT_TRUE(whole.has_value() && whole->has_value());
  if (!whole || !*whole) return {};
  EXPECT_EQ((*whole)->consumed, wire.size());
  return (*whole)->response;
}

TEST(HttpResponse, ReadsABodyOfContentLength) {
  const HttpResponse response = parse_bytewise(
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\ncontent-length: 9\r\n\r\n"
      "{\"id\": 7}");
  EXPECT_EQ(response.status, 201);
  EXPECT_EQ(response.body, "{\"id\": 7}");
  EXPECT_TRUE(response.keep_alive);
  ASSERT_NE(response.header("CONTENT-TYPE"), nullptr);
  EXPECT_EQ(*response.header("content-type"), "application/json");
  EXPECT_EQ(response.header("Retry-After"), nullptr);
}

TEST(HttpResponse, ReadsAChunkedBodyWithExtensionsAndTrailers) {
  const HttpResponse response = parse_bytewise(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n");
  EXPECT_EQ(response.body, "Wikipedia in\r\n\r\nchunks.");
}

TEST(HttpResponse, ABodyWithoutLengthEndsWithTheConnection) {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end";
  auto open = parse_http_response(wire, false);
  ASSERT_TRUE(open.has_value());
  EXPECT_FALSE(open->has_value());
  auto closed = parse_http_response(wire, true);
  ASSERT_TRUE(closed.has_value() && closed->has_value());
  EXPECT_EQ((*closed)->response.body, "until the end");
  EXPECT_FALSE((*closed)->response.keep_alive);
}

TEST(HttpResponse, KnowsWhenTheServerClosesTheConnection) {
  EXPECT_FALSE(parse_bytewise("HTTP/1.1 429 Too Many Requests\r\nConnection: Keep-Alive, close\r\n"
                              "Content-Length: 0\r\n\r\n")
                   .keep_alive);
  EXPECT_FALSE(parse_bytewise("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse_bytewise("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n"
                             "\r\n")
                  .keep_alive);
}

TEST(HttpResponse, SkipsInterimRepliesAndReadsNoBodyAfter204) {
  const std::string wire =
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
  auto parsed = parse_http_response(wire + "HTTP/1.1", false);
  ASSERT_TRUE(parsed.has_value() && parsed->has_value());
  EXPECT_EQ((*parsed)->response.status, 204);
  EXPECT_EQ((*parsed)->response.body, "");
  EXPECT_EQ((*parsed)->consumed, wire.size());
}

TEST(HttpResponse, RefusesWhatIsNotHttp) {
  auto tls_alert =
      parse_http_response(std::string("\x15\x03\x01\x00\x02\x02\x46\r\n\r\n", 11), false);
  ASSERT_FALSE(tls_alert.has_value());
  EXPECT_THAT(tls_alert.error().reason, HasSubstr("not HTTP/1.x"));
  auto no_code = parse_http_response("HTTP/1.1 2x0 OK\r\n\r\n", false);
  ASSERT_FALSE(no_code.has_value());
  EXPECT_THAT(no_code.error().reason, HasSubstr("no valid status code"));
  auto folded = parse_http_response("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", false);
  ASSERT_FALSE(folded.has_value());
  EXPECT_THAT(folded.error().reason, HasSubstr("malformed header line"));
  auto length = parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false);
  ASSERT_FALSE(length.has_value());
  EXPECT_THAT(length.error().reason, HasSubstr("bad Content-Length"));
  auto two = parse_http_response(
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", false);
  ASSERT_FALSE(two.has_value());
  EXPECT_THAT(two.error().reason, HasSubstr("two different Content-Length"));
  auto chunk =
      parse_http_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false);
  ASSERT_FALSE(chunk.has_value());
  EXPECT_THAT(chunk.error().reason, HasSubstr("bad chunk size"));
}

TEST(HttpResponse, RefusesOversizedRepliesBeforeBufferingThem) {
  auto header = parse_http_response(
      "HTTP/1.1 200 OK\r\nX: " + std::string(kMaxResponseHeaderBytes, 'a'), false);
  ASSERT_FALSE(header.has_value());
  EXPECT_THAT(header.error().reason, HasSubstr("header is larger than 64 KiB"));
  auto body = parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: " +
                                      std::to_string(kMaxResponseBodyBytes + 1) + "\r\n\r\n",
                                  false);
  ASSERT_FALSE(body.has_value());
  EXPECT_THAT(body.error().reason, HasSubstr("larger than 256 MiB"));
  auto chunk = parse_http_response(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", false);
  ASSERT_FALSE(chunk.has_value());
  EXPECT_THAT(chunk.error().reason, HasSubstr("larger than 256 MiB"));
}

TEST(HttpResponse, ACutReplyIsAnErrorOnceTheConnectionCloses) {
  auto nothing = parse_http_response("", true);
  ASSERT_FALSE(nothing.has_value());
  EXPECT_THAT(nothing.error().reason, HasSubstr("without a reply"));
  auto cut = parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true);
  ASSERT_FALSE(cut.has_value());
  EXPECT_THAT(cut.error().reason, HasSubstr("in the middle of its reply"));
  auto cut_chunk =
      parse_http_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", true);
  ASSERT_FALSE(cut_chunk.has_value());
  EXPECT_THAT(cut_chunk.error().reason, HasSubstr("in the middle of its reply"));
}

}  // namespace
}  // namespace tidepool
