#include "agent/agent_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "api/test_http_server.h"

namespace tidepool {
namespace {

using test_support::http_reply;
using test_support::ScriptedServer;
using ::testing::HasSubstr;

std::string refused_server() {
  return "http://127.0.0.1:" + std::to_string(test_support::refusing_port());
}

ScriptedServer::Script leader_answers() {
  return [](const std::string&, int) { return http_reply(200, R"({"assignments": []})"); };
}

ScriptedServer::Script standby_of(const std::string& leader) {
  return [leader](const std::string&, int) {
    return http_reply(503, R"({"error": "not the leader", "field": "server", "reason": "this )"
                           R"(server is a standby", "leader": )" +
                               (leader.empty() ? std::string("null") : "\"" + leader + "\"") + "}");
  };
}

TEST(AgentClient, NamesTheSourceOfABadServerUrl) {
  auto client = AgentClient::create("http://a:8470, ftp://b", "$TIDEPOOL_SERVER", "t", "");
  ASSERT_FALSE(client.has_value());
  EXPECT_EQ(client.error().field, "$TIDEPOOL_SERVER");
  EXPECT_THAT(client.error().reason, HasSubstr("'ftp://b'"));
}

TEST(AgentClient, ReportsToTheLeaderAndHandsItsUrlOn) {
  ScriptedServer leader(100, leader_answers());
  ScriptedServer standby(100, standby_of(leader.url()));
  auto client = AgentClient::create(refused_server() + "," + standby.url(), "--server", "t", "");
  ASSERT_TRUE(client.has_value()) << client.error().message();
  auto reply = client->post("/v1/nodes/n1/heartbeat", nlohmann::json::object());
  ASSERT_TRUE(reply.has_value()) << reply.error().message();
  EXPECT_TRUE(reply->ok());
  EXPECT_EQ(client->server(), leader.url());
  ASSERT_EQ(leader.requests().size(), 1U);
  EXPECT_THAT(leader.requests()[0], HasSubstr("POST /v1/nodes/n1/heartbeat"));
  EXPECT_THAT(leader.requests()[0], HasSubstr("Authorization: Bearer t"));
}

TEST(AgentClient, AStandbysRefusalIsNoReplyNotARefusalOfTheNode) {
  // During an election the agent must not take a 503 or 421 for the server's verdict (it would
  // give up a task's exit report or stop registering): it is an Error, tried again later.
  ScriptedServer electing(100, standby_of(""));
  auto client = AgentClient::create(electing.url(), "--server", "t", "");
  ASSERT_TRUE(client.has_value()) << client.error().message();
  auto reply = client->post("/v1/nodes/n1/register", nlohmann::json::object());
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().field, "server");
  EXPECT_THAT(reply.error().reason, HasSubstr("no leader is known"));
  // One try per call: the agent's loops wait, not the client.
  EXPECT_EQ(electing.requests().size(), 1U);
}

TEST(AgentClient, SaysWhichServerGaveNoReply) {
  const std::string down = refused_server();
  auto client = AgentClient::create(down, "--server", "t", "");
  ASSERT_TRUE(client.has_value()) << client.error().message();
  auto reply = client->get("/v1/jobs/1");
  ASSERT_FALSE(reply.has_value());
  EXPECT_THAT(reply.error().reason, HasSubstr("no reply from " + down + " to GET /v1/jobs/1"));
}

}  // namespace
}  // namespace tidepool
