#include "cli/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "api/test_http_server.h"

namespace tidepool {
namespace {

using std::chrono::milliseconds;
using test_support::http_reply;
using test_support::ScriptedServer;
using ::testing::HasSubstr;

ClientSettings settings_for(const std::string& servers) {
  return ClientSettings{.server = servers,
                        .server_source = "--server",
                        .token = "tp_test",
                        .token_source = "--token",
                        .ca_cert = ""};
}

ApiClientOptions quick() {
  return ApiClientOptions{.connect_timeout = milliseconds(1000),
                          .read_timeout = milliseconds(2000),
                          .failover_deadline = milliseconds(150)};
}

std::string refused() {
  return "http://127.0.0.1:" + std::to_string(test_support::refusing_port());
}

TEST(ApiClientServers, AnswersFromTheLeaderAndNamesIt) {
  ScriptedServer leader(100,
                        [](const std::string&, int) { return http_reply(200, R"({"jobs": []})"); });
  ScriptedServer standby(100, [&leader](const std::string&, int) {
    return http_reply(503, R"({"error": "not the leader", "field": "server", "reason": "this )"
                           R"(server is a standby; the leader is at )" +
                               leader.url() + R"(", "leader": ")" + leader.url() + "\"}");
  });
  ApiClient client(settings_for(refused() + "," + standby.url()), quick());
  auto jobs = client.get("/v1/jobs");
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message();
  EXPECT_EQ(client.server(), leader.url());
  ASSERT_EQ(leader.requests().size(), 1U);
  EXPECT_THAT(leader.requests()[0], HasSubstr("Authorization: Bearer tp_test"));
}

TEST(ApiClientServers, NamesEveryServerWhenNoneAnswers) {
  const std::string a = refused();
  const std::string b = refused();
  ApiClient client(settings_for(a + ", " + b), quick());
  auto jobs = client.get("/v1/jobs");
  ASSERT_FALSE(jobs.has_value());
  EXPECT_TRUE(is_connection_error(jobs.error()));
  EXPECT_THAT(jobs.error().reason,
              HasSubstr("cannot reach the Tidepool server at any of " + a + ", " + b));
  EXPECT_THAT(jobs.error().reason, HasSubstr("connection refused"));
}

TEST(ApiClientServers, OneServerIsNamedAsBefore) {
  const std::string a = refused();
  ApiClient client(settings_for(a), quick());
  auto jobs = client.get("/v1/jobs");
  ASSERT_FALSE(jobs.has_value());
  EXPECT_THAT(jobs.error().reason, HasSubstr("cannot reach the Tidepool server at " + a + ": "));
}

TEST(ApiClientServers, AnElectionThatOutlastsTheDeadlineIsSaid) {
  ScriptedServer electing(100, [](const std::string&, int) {
    return http_reply(503, R"({"error": "not the leader", "field": "server", "reason": "this )"
                           R"(server is a standby; no leader is known", "leader": null})");
  });
  ApiClient client(settings_for(electing.url()), quick());
  auto cancelled = client.post("/v1/jobs/4/cancel", nlohmann::json::object());
  ASSERT_FALSE(cancelled.has_value());
  EXPECT_TRUE(is_connection_error(cancelled.error()));
  EXPECT_THAT(cancelled.error().reason,
              HasSubstr("cannot reach the leader of the Tidepool servers"));
  EXPECT_THAT(cancelled.error().reason, HasSubstr("a leader is being elected"));
  // The standby did nothing with it: even a POST without an idempotency key is sent again, round
  // after round, until the deadline.
  EXPECT_GE(electing.requests().size(), 2U);
}

TEST(ApiClientServers, ABadUrlOfTheListIsNamed) {
  ApiClient client(settings_for("http://a:8470,http://b:port"), quick());
  auto jobs = client.get("/v1/jobs");
  ASSERT_FALSE(jobs.has_value());
  EXPECT_EQ(jobs.error().field, "--server");
  EXPECT_THAT(jobs.error().reason, HasSubstr("'http://b:port'"));
}

}  // namespace
}  // namespace tidepool
