#include "server/standby_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "server/http_test_socket.h"

namespace tidepool {
namespace {

using namespace std::chrono_literals;
using test_support::TestSocket;

// A standby on a free port, serving on its own thread until the test ends.
class Standby {
 public:
  explicit Standby(std::string self) : api_(HttpServerOptions{}, std::move(self)) {
    auto port = api_.bind();
    EXPECT_TRUE(port.has_value());
    port_ = port.value_or(0);
    thread_ = std::thread([this] { api_.serve(); });
  }
  ~Standby() {
    api_.stop();
    thread_.join();
  }
  Standby(const Standby&) = delete;
  Standby& operator=(const Standby&) = delete;

  StandbyApi& api() { return api_; }

  TestSocket::Response request(const std::string& method, const std::string& target,
                               const std::string& body = "") {
    TestSocket s(port_);
    EXPECT_TRUE(s.ok());
    s.send(method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    return s.read_response(5s);
  }

 private:
  StandbyApi api_;
  int port_ = 0;
  std::thread thread_;
};

nlohmann::json body_of(const TestSocket::Response& res) {
  return nlohmann::json::parse(res.body, nullptr, false);
}

TEST(StandbyApiTest, IsAliveButNotReadyAndNamesTheLeader) {
  Standby standby("http://b:8470");
  standby.api().set_leader("http://a:8470");
  EXPECT_EQ(standby.request("GET", "/healthz").status, 200);
  const auto ready = standby.request("GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(body_of(ready)["leader"], "http://a:8470");
  const auto leader = standby.request("GET", "/v1/leader");
  ASSERT_EQ(leader.status, 200);
  EXPECT_EQ(body_of(leader)["leader"], "http://a:8470");
  EXPECT_EQ(body_of(leader)["self"], "http://b:8470");
  EXPECT_EQ(body_of(leader)["is_leader"], false);
  const auto metrics = standby.request("GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\ntidepool_leader 0\n"), std::string::npos) << metrics.body;
}

TEST(StandbyApiTest, EveryOtherRequestIsSentToTheLeader) {
  Standby standby("http://b:8470");
  standby.api().set_leader("http://a:8470");
  for (const auto& [method, target] :
       {std::pair{"POST", "/v1/jobs"}, std::pair{"GET", "/v1/jobs?state=running"},
        std::pair{"DELETE", "/v1/jobs/7"}, std::pair{"POST", "/v1/nodes/n1/heartbeat"}}) {
    const auto res = standby.request(method, target, R"({"name": "x"})");
    EXPECT_EQ(res.status, 503) << method << " " << target;
    const nlohmann::json body = body_of(res);
    EXPECT_EQ(body["error"], "not the leader");
    EXPECT_EQ(body["field"], "server");
    EXPECT_EQ(body["leader"], "http://a:8470");
    EXPECT_NE(body["reason"].get<std::string>().find("http://a:8470"), std::string::npos);
    EXPECT_NE(res.head.find("Retry-After: 1"), std::string::npos) << res.head;
  }
}

TEST(StandbyApiTest, TheDashboardIsOpenedOnTheLeader) {
  Standby standby("http://b:8470");
  // No leader yet: nowhere to send it.
  EXPECT_EQ(standby.request("GET", "/").status, 503);
  standby.api().set_leader("http://a:8470");
  for (const std::string target : {"/", "/ui/app.js", "/ui/views/pool.js?x=1"}) {
    const auto res = standby.request("GET", target);
    EXPECT_EQ(res.status, 307) << target;
    EXPECT_NE(res.head.find("Location: http://a:8470" + target + "\r\n"), std::string::npos)
        << res.head;
  }
  // The API is not redirected: clients follow "leader" themselves.
  EXPECT_EQ(standby.request("GET", "/v1/pool").status, 503);
}

TEST(StandbyApiTest, WhileNoServerLeadsTheLeaderIsNull) {
  Standby standby("http://b:8470");
  const auto res = standby.request("GET", "/v1/jobs");
  EXPECT_EQ(res.status, 503);
  EXPECT_TRUE(body_of(res)["leader"].is_null());
  EXPECT_TRUE(body_of(standby.request("GET", "/v1/leader"))["leader"].is_null());
  // Then one is elected.
  standby.api().set_leader("http://c:8470");
  EXPECT_EQ(body_of(standby.request("GET", "/v1/jobs"))["leader"], "http://c:8470");
}

TEST(StandbyApiTest, TheLeadersOwnAnswerSaysItLeads) {
  const nlohmann::json body =
      nlohmann::json::parse(leader_response("http://a:8470", "http://a:8470").body);
  EXPECT_EQ(body["is_leader"], true);
  EXPECT_EQ(body["self"], "http://a:8470");
}

}  // namespace
}  // namespace tidepool
