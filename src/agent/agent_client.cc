#include "agent/agent_client.h"

#include <fmt/format.h>

#include <utility>

namespace tidepool {

std::string AgentReply::error_text() const {
  if (body.is_object() && body.contains("reason")) {
    const std::string field = body.value("field", "");
    const std::string reason = body.value("reason", "");
    return field.empty() ? reason : field + ": " + reason;
  }
  return fmt::format("HTTP status {}", status);
}

Result<AgentClient> AgentClient::create(const std::string& server, std::string token,
                                        const std::string& ca_cert) {
  auto endpoint = parse_http_url(server);
  if (!endpoint) return fail("--server", endpoint.error().reason);
  auto connection = std::make_unique<HttpConnection>(
      std::move(*endpoint), HttpClientOptions{.connect_timeout = std::chrono::milliseconds(3000),
                                              .io_timeout = std::chrono::milliseconds(10000),
                                              .ca_cert = ca_cert});
  return AgentClient(server, std::move(token), std::move(connection));
}

Result<AgentReply> AgentClient::send(HttpRequest request) {
  if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
  auto result = connection_->send(request);
  if (!result) {
    return fail("server", fmt::format("no reply from {} to {} {}: {}", server_, request.method,
                                      request.target, result.error().detail));
  }
  AgentReply reply{result->status, nullptr};
  if (!result->body.empty()) {
    reply.body = nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) reply.body = nullptr;
  }
  return reply;
}

Result<AgentReply> AgentClient::get(const std::string& target) {
  return send({.method = "GET", .target = target, .headers = {}, .body = {}});
}

Result<AgentReply> AgentClient::post(const std::string& target, const nlohmann::json& body) {
  return send({.method = "POST",
               .target = target,
               .headers = {{"Content-Type", "application/json"}},
               .body = body.dump()});
}

Result<AgentReply> AgentClient::post_bytes(const std::string& target, std::string_view bytes) {
  return send({.method = "POST",
               .target = target,
               .headers = {{"Content-Type", "application/octet-stream"}},
               .body = std::string(bytes)});
}

}  // namespace tidepool
