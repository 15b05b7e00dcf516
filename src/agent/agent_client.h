// The agent's side of the server's API: one kept-alive connection with the node's agent token, to
// the server, or to the leader of the servers of a highly available Tidepool
// (api/leader_connection.h). Every reply of the leader, whatever its status, is a value; a request
// that got no reply, or that only standbys refused, is an Error, so the agent can tell "try again
// later" (it keeps its tasks running meanwhile) from "the server said no".
//
// Each request goes round the servers once at most (a refused connection moves on at once, a
// standby's refusal naming the leader is followed) and does not wait for an election to end: the
// agent's own loops try again (registration every second, the heartbeat at its interval).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/leader_connection.h"
#include "core/error.h"

namespace tidepool {

struct AgentReply {
  int status = 0;
  nlohmann::json body;  // null when empty or not JSON

  [[nodiscard]] bool ok() const { return status >= 200 && status < 300; }
  // The server's "field: reason" of an error body, or the status.
  [[nodiscard]] std::string error_text() const;
};

class AgentClient {
 public:
  // `servers` is an http:// or https:// URL, or several comma-separated (api/server_list.h); fails
  // naming `field` (the flag or variable it came from) and the bad URL when one is not a URL.
  static Result<AgentClient> create(const std::string& servers, const std::string& field,
                                    std::string token, const std::string& ca_cert);

  Result<AgentReply> get(const std::string& target);
  Result<AgentReply> post(const std::string& target, const nlohmann::json& body);
  Result<AgentReply> post_bytes(const std::string& target, std::string_view bytes);

  // The server that answered last (the leader): what the agent reports to and hands to its tasks.
  [[nodiscard]] const std::string& server() const { return connection_->current(); }

 private:
  AgentClient(std::string token, std::unique_ptr<LeaderConnection> connection)
      : token_(std::move(token)), connection_(std::move(connection)) {}
  Result<AgentReply> send(HttpRequest request);

  std::string token_;
  std::unique_ptr<LeaderConnection> connection_;
};

}  // namespace tidepool
