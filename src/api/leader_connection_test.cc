#include "api/leader_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "api/test_http_server.h"

namespace tidepool {
namespace {

using std::chrono::milliseconds;
using test_support::http_reply;
using test_support::ScriptedServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Short waits: a test that goes round the servers takes milliseconds.
LeaderConnectionOptions quick(milliseconds deadline = milliseconds(2000)) {
  return {.http = {.connect_timeout = milliseconds(1000),
                   .io_timeout = milliseconds(2000),
                   .ca_cert = {}},
          .failover_deadline = deadline,
          .first_backoff = milliseconds(10),
          .max_backoff = milliseconds(40)};
}

LeaderConnection connect(std::vector<std::string> servers, LeaderConnectionOptions options) {
  auto connection = LeaderConnection::create(std::move(servers), std::move(options));
  EXPECT_TRUE(connection.has_value()) << connection.error().message();
  return std::move(*connection);
}

std::string refused_url() {
  return "http://127.0.0.1:" + std::to_string(test_support::refusing_port());
}

std::string standby_body(const std::string& leader) {
  return R"({"error": "not the leader", "field": "server", "reason": "this server is a standby; )"
         R"(the leader is at )" +
         (leader.empty() ? "unknown" : leader) + R"(", "leader": )" +
         (leader.empty() ? "null" : "\"" + leader + "\"") + "}";
}

// A standby that names `leader` ("" for none) in every refusal.
ScriptedServer::Script standby(const std::string& leader, int status = 503) {
  return [leader, status](const std::string&, int) {
    return http_reply(status, standby_body(leader));
  };
}

ScriptedServer::Script leader_replies() {
  return [](const std::string&, int n) {
    return http_reply(200, R"({"reply": )" + std::to_string(n) + "}");
  };
}

ScriptedServer::Script no_reply() {
  return [](const std::string&, int) { return std::optional<std::string>(); };
}

HttpRequest get_of(const std::string& target) {
  return {.method = "GET", .target = target, .headers = {}, .body = {}};
}

HttpRequest post_of(const std::string& target, const std::string& key = "") {
  HttpRequest request{.method = "POST", .target = target, .headers = {}, .body = "{}"};
  if (!key.empty()) request.headers.emplace_back("Idempotency-Key", key);
  return request;
}

TEST(NotLeaderReply, ReadsAStandbysRefusalOnly) {
  HttpResponse refusal{.status = 503, .headers = {}, .body = standby_body("http://b:8470")};
  ASSERT_TRUE(not_leader_reply(refusal).has_value());
  EXPECT_EQ(not_leader_reply(refusal)->leader, "http://b:8470");
  refusal.status = 421;
  EXPECT_EQ(not_leader_reply(refusal)->leader, "http://b:8470");
  HttpResponse election{.status = 503, .headers = {}, .body = standby_body("")};
  ASSERT_TRUE(not_leader_reply(election).has_value());
  EXPECT_FALSE(not_leader_reply(election)->leader.has_value());
  for (const auto& other :
       {HttpResponse{.status = 200, .headers = {}, .body = standby_body("http://b:8470")},
        HttpResponse{.status = 503, .headers = {}, .body = R"({"error": "overloaded"})"},
        HttpResponse{.status = 503, .headers = {}, .body = "Service Unavailable"},
        HttpResponse{.status = 503, .headers = {}, .body = R"({"leader": 7})"}}) {
    EXPECT_FALSE(not_leader_reply(other).has_value()) << other.status << " " << other.body;
  }
}

TEST(SafeToResend, GetHeadOrAnIdempotencyKey) {
  EXPECT_TRUE(safe_to_resend(get_of("/v1/jobs")));
  EXPECT_TRUE(safe_to_resend({.method = "HEAD", .target = "/", .headers = {}, .body = {}}));
  EXPECT_FALSE(safe_to_resend(post_of("/v1/jobs")));
  EXPECT_TRUE(safe_to_resend(post_of("/v1/jobs", "k1")));
  HttpRequest lower = post_of("/v1/jobs");
  lower.headers.emplace_back("idempotency-key", "k2");
  EXPECT_TRUE(safe_to_resend(lower));
  EXPECT_FALSE(
      safe_to_resend({.method = "DELETE", .target = "/v1/jobs/1", .headers = {}, .body = {}}));
}

TEST(LeaderConnection, RefusesAnEmptyList) {
  EXPECT_FALSE(LeaderConnection::create({}, quick()).has_value());
}

TEST(LeaderConnection, MovesOnFromARefusedConnectionAndKeepsTheOneThatAnswered) {
  ScriptedServer leader(/*per_connection=*/100, leader_replies());
  const std::string down = refused_url();
  LeaderConnection connection = connect({down, leader.url()}, quick());
  EXPECT_EQ(connection.current(), down);
  // Nothing was sent to the refused one: a POST without a key moves on too.
  auto first = connection.send(post_of("/v1/jobs"));
  ASSERT_TRUE(first.has_value()) << first.error().detail;
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(connection.current(), leader.url());
  auto second = connection.send(get_of("/v1/jobs"));
  ASSERT_TRUE(second.has_value()) << second.error().detail;
  EXPECT_EQ(second->body, R"({"reply": 2})");
  // The second request went straight to the leader, on the same kept-alive connection.
  EXPECT_EQ(leader.requests().size(), 2U);
  EXPECT_EQ(leader.connections(), 1);
}

TEST(LeaderConnection, FollowsAStandbyToTheLeaderItNames) {
  ScriptedServer leader(100, leader_replies());
  ScriptedServer standby_a(100, standby(leader.url()));
  ScriptedServer standby_b(100, standby(leader.url(), 421));
  // The leader is not in the list: it is learned from the refusal.
  LeaderConnection connection = connect({standby_a.url(), standby_b.url()}, quick());
  auto reply = connection.send(post_of("/v1/jobs/3/cancel"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(connection.current(), leader.url());
  EXPECT_THAT(connection.servers(), ElementsAre(standby_a.url(), standby_b.url(), leader.url()));
  EXPECT_EQ(standby_a.requests().size(), 1U);
  EXPECT_EQ(standby_b.requests().size(), 0U);
  ASSERT_EQ(leader.requests().size(), 1U);
  EXPECT_THAT(leader.requests()[0], HasSubstr("POST /v1/jobs/3/cancel"));
  // From then on the standbys are not asked.
  ASSERT_TRUE(connection.send(get_of("/v1/jobs")).has_value());
  EXPECT_EQ(standby_a.requests().size(), 1U);
  EXPECT_EQ(leader.requests().size(), 2U);
}

TEST(LeaderConnection, FollowsA421Too) {
  ScriptedServer leader(100, leader_replies());
  ScriptedServer standby_b(100, standby(leader.url(), 421));
  LeaderConnection connection = connect({standby_b.url(), leader.url()}, quick());
  auto reply = connection.send(post_of("/v1/jobs"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(connection.current(), leader.url());
  EXPECT_EQ(connection.servers().size(), 2U);
}

TEST(LeaderConnection, WaitsOutAnElectionForARequestSafeToRepeat) {
  // The only server is a standby while the election runs, then it leads.
  ScriptedServer server(100, [](const std::string&, int n) {
    return n <= 2 ? http_reply(503, standby_body("")) : http_reply(200, R"({"ok": true})");
  });
  LeaderConnection connection = connect({server.url()}, quick());
  auto reply = connection.send(get_of("/v1/jobs"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(server.requests().size(), 3U);
}

// A standby did nothing with the request (it answers from the head): during an election even a
// request that is not safe to send twice is sent again, until a leader answers.
TEST(LeaderConnection, ResendsAnyRequestThatAStandbyRefusedDuringAnElection) {
  ScriptedServer server(100, [](const std::string&, int n) {
    return n <= 1 ? http_reply(503, standby_body("")) : http_reply(200, R"({"ok": true})");
  });
  LeaderConnection connection = connect({server.url()}, quick());
  auto reply = connection.send(post_of("/v1/jobs/1/cancel"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(server.requests().size(), 2U);
}

TEST(LeaderConnection, ResendsAfterNoReplyOnlyWithAnIdempotencyKey) {
  ScriptedServer crashing(100, no_reply());
  ScriptedServer leader(100, leader_replies());
  LeaderConnection unkeyed = connect({crashing.url(), leader.url()}, quick());
  auto lost = unkeyed.send(post_of("/v1/jobs"));
  ASSERT_FALSE(lost.has_value());
  EXPECT_EQ(lost.error().failure, HttpFailure::kNoReply);
  EXPECT_TRUE(lost.error().sent);
  EXPECT_EQ(unkeyed.last_tried(), crashing.url());
  EXPECT_EQ(crashing.requests().size(), 1U);
  EXPECT_EQ(leader.requests().size(), 0U);

  LeaderConnection keyed = connect({crashing.url(), leader.url()}, quick());
  auto reply = keyed.send(post_of("/v1/jobs", "f3b0c2"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(crashing.requests().size(), 2U);
  ASSERT_EQ(leader.requests().size(), 1U);
  EXPECT_THAT(leader.requests()[0], HasSubstr("Idempotency-Key: f3b0c2"));
}

TEST(LeaderConnection, TheNextRequestStartsPastAServerThatGaveNoReply) {
  ScriptedServer hung(100, no_reply());
  ScriptedServer leader(100, leader_replies());
  LeaderConnection connection = connect({hung.url(), leader.url()}, quick());
  ASSERT_FALSE(connection.send(post_of("/v1/nodes/n1/heartbeat")).has_value());
  EXPECT_EQ(connection.current(), leader.url());
  // The next heartbeat goes to the other server first, not to the one that failed it.
  auto reply = connection.send(post_of("/v1/nodes/n1/heartbeat"));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(hung.requests().size(), 1U);
  EXPECT_EQ(leader.requests().size(), 1U);
}

TEST(LeaderConnection, GivesUpAtTheDeadlineWhenNothingAnswers) {
  ScriptedServer crashing(100, no_reply());
  const milliseconds deadline(300);
  LeaderConnection connection = connect({refused_url(), crashing.url()}, quick(deadline));
  const auto start = std::chrono::steady_clock::now();
  auto reply = connection.send(get_of("/v1/jobs"));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().failure == HttpFailure::kConnect ||
              reply.error().failure == HttpFailure::kNoReply);
  // It went round several times, waiting in between, and stopped soon after the deadline.
  EXPECT_GE(crashing.requests().size(), 3U);
  EXPECT_LT(crashing.requests().size(), 40U);
  EXPECT_GE(took, deadline);
  EXPECT_LT(took, deadline + milliseconds(1000));
}

TEST(LeaderConnection, StandbysNamingEachOtherEndAtTheDeadline) {
  // Each names a leader that is not there any more; the last refusal is the outcome.
  ScriptedServer a(100, standby("http://127.0.0.1:1"));
  ScriptedServer b(100, standby(a.url()));
  LeaderConnection connection = connect({a.url(), b.url()}, quick(milliseconds(200)));
  const auto start = std::chrono::steady_clock::now();
  auto reply = connection.send(get_of("/v1/jobs"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1500));
  ASSERT_TRUE(reply.has_value()) << reply.error().detail;
  EXPECT_EQ(reply->status, 503);
  // One learned URL at most per request, however many refusals name new ones.
  EXPECT_LE(connection.servers().size(), 3U);
}

TEST(LeaderConnection, OneServerThatIsDownIsSaidAtOnce) {
  LeaderConnection connection = connect({refused_url()}, quick(milliseconds(10000)));
  const auto start = std::chrono::steady_clock::now();
  auto reply = connection.send(get_of("/v1/jobs"));
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().failure, HttpFailure::kConnect);
  EXPECT_FALSE(reply.error().sent);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

}  // namespace
}  // namespace tidepool
