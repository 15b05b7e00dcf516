#include "agent/agent_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <utility>

#include "api/server_list.h"

namespace tidepool {

std::string AgentReply::error_text() const {
  if (body.is_object() && body.contains("reason")) {
    const std::string field = body.value("field", "");
    const std::string reason = body.value("reason", "");
    return field.empty() ? reason : field + ": " + reason;
  }
  return fmt::format("HTTP status {}", status);
}

Result<AgentClient> AgentClient::create(const std::string& servers, const std::string& field,
                                        std::string token, const std::string& ca_cert) {
  auto list = parse_server_list(servers, field);
  if (!list) return std::unexpected(list.error());
  LeaderConnectionOptions options;
  options.http = {.connect_timeout = std::chrono::milliseconds(3000),
                  .io_timeout = std::chrono::milliseconds(10000),
                  .ca_cert = ca_cert};
  options.failover_deadline = std::chrono::milliseconds(0);
  auto connection = LeaderConnection::create(std::move(*list), std::move(options));
  if (!connection) return fail(field, connection.error().reason);
  return AgentClient(std::move(token), std::make_unique<LeaderConnection>(std::move(*connection)));
}

Result<AgentReply> AgentClient::send(HttpRequest request) {
  if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
  auto result = connection_->send(request);
  const std::string& tried = connection_->last_tried();
  const auto servers = [&] {
    const auto& all = connection_->servers();
    return all.size() == 1 ? std::string() : fmt::format(" (of {})", fmt::join(all, ", "));
  };
  if (!result) {
    return fail("server", fmt::format("no reply from {}{} to {} {}: {}", tried, servers(),
                                      request.method, request.target, result.error().detail));
  }
  if (auto refusal = not_leader_reply(*result)) {
    // A standby did not take it: as when no server answers, the agent tries again later.
    return fail("server", fmt::format("no leader took {} {}: {}{} answered {}: {}", request.method,
                                      request.target, tried, servers(), result->status,
                                      refusal->leader ? "the leader it names did not answer"
                                                      : "no leader is known (an election)"));
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
