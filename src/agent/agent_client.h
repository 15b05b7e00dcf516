// The agent's side of the server's API: one kept-alive connection (api/http_connection.h) with the
// node's agent token. Every reply, whatever its status, is a value; only a request that got no
// reply is an Error, so the agent can tell "try again later" from "the server said no".
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/http_connection.h"
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
  // `server` is an http:// or https:// URL; fails naming "--server" when it is not one.
  static Result<AgentClient> create(const std::string& server, std::string token,
                                    const std::string& ca_cert);

  Result<AgentReply> get(const std::string& target);
  Result<AgentReply> post(const std::string& target, const nlohmann::json& body);
  Result<AgentReply> post_bytes(const std::string& target, std::string_view bytes);

  [[nodiscard]] const std::string& server() const { return server_; }

 private:
  AgentClient(std::string server, std::string token, std::unique_ptr<HttpConnection> connection)
      : server_(std::move(server)), token_(std::move(token)), connection_(std::move(connection)) {}
  Result<AgentReply> send(HttpRequest request);

  std::string server_;
  std::string token_;
  std::unique_ptr<HttpConnection> connection_;
};

}  // namespace tidepool
