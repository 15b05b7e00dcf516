#include "cli/api_client.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <random>

#include "api/exit_status.h"
#include "api/server_list.h"

namespace tidepool {
namespace {

constexpr std::size_t kBodyExcerpt = 200;

std::string describe(const HttpError& error) {
  switch (error.failure) {
    case HttpFailure::kConnect:
      return "connection refused or host not found (" + error.detail + ")";
    case HttpFailure::kTimeout:
      return "the server did not answer in time";
    case HttpFailure::kNoReply:
      return "no reply (the server closed the connection: " + error.detail + ")";
    case HttpFailure::kBadReply:
      return error.detail;
    case HttpFailure::kTlsHandshake:
      return "the TLS handshake failed (is it an http:// server?): " + error.detail;
    case HttpFailure::kCaCerts:
      return "cannot load the CA certificates " + error.detail;
    case HttpFailure::kUntrusted:
    case HttpFailure::kBadRequest:
      return error.detail;
  }
  return error.detail;
}

}  // namespace

Error api_error(int status, const std::string& body) {
  auto value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_object() && value.contains("reason") && value["reason"].is_string()) {
    std::string field = value.value("field", "");
    std::string reason = value["reason"].get<std::string>();
    if (reason.empty()) reason = value.value("error", fmt::format("HTTP status {}", status));
    return Error{std::move(field), std::move(reason)};
  }
  std::string excerpt = body.substr(0, kBodyExcerpt);
  while (!excerpt.empty() && (excerpt.back() == '\n' || excerpt.back() == '\r')) excerpt.pop_back();
  if (excerpt.empty()) {
    return Error{"", fmt::format("the server answered HTTP status {} without a message", status)};
  }
  return Error{"", fmt::format("the server answered HTTP status {}: {}", status, excerpt)};
}

Error unreachable_error(const std::string& url, const std::string& why) {
  return Error{"", fmt::format("cannot reach the Tidepool server at {}: {}; is it running? set "
                               "--server or TIDEPOOL_SERVER",
                               url, why)};
}

Error unreachable_error(const std::vector<std::string>& servers, const std::string& last_tried,
                        const std::string& why) {
  if (servers.size() == 1) return unreachable_error(servers.front(), why);
  return Error{"", fmt::format("cannot reach the Tidepool server at any of {} (last tried {}: {}); "
                               "is one running? set --server or TIDEPOOL_SERVER",
                               fmt::join(servers, ", "), last_tried, why)};
}

bool is_connection_error(const Error& error) {
  return error.field.empty() && (error.reason.starts_with("cannot reach the Tidepool server") ||
                                 error.reason.starts_with("cannot reach the leader of") ||
                                 error.reason.starts_with("the TLS certificate of the Tidepool"));
}

std::string url_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~' || c == ',') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

std::string path_with_query(const std::string& path, const QueryParams& params) {
  std::string out = path;
  char separator = '?';
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += separator;
    out += url_escape(key) + "=" + url_escape(value);
    separator = '&';
  }
  return out;
}

std::string random_uuid() {
  std::random_device device;
  std::array<std::uint8_t, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    const std::uint32_t word = device();
    for (std::size_t k = 0; k < 4; ++k) bytes[i + k] = static_cast<std::uint8_t>(word >> (8 * k));
  }
  bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", bytes[i]);
  }
  return out;
}

ApiClient::ApiClient(const ClientSettings& settings, ApiClientOptions options)
    : server_(settings.server), token_(settings.token) {
  auto servers = parse_server_list(
      settings.server, settings.server_source.empty() ? "server" : settings.server_source);
  if (!servers) {
    bad_server_ = servers.error();
    return;
  }
  LeaderConnectionOptions leader;
  leader.http = {.connect_timeout = options.connect_timeout,
                 .io_timeout = options.read_timeout,
                 .ca_cert = settings.ca_cert};
  leader.failover_deadline = options.failover_deadline;
  auto connection = LeaderConnection::create(std::move(*servers), std::move(leader));
  if (!connection) {
    bad_server_ = connection.error();
    return;
  }
  connection_ = std::make_unique<LeaderConnection>(std::move(*connection));
}

ApiClient::~ApiClient() = default;
ApiClient::ApiClient(ApiClient&&) noexcept = default;
ApiClient& ApiClient::operator=(ApiClient&&) noexcept = default;

namespace {

Result<nlohmann::json> body_of(Result<ApiReply> reply) {
  if (!reply) return std::unexpected(reply.error());
  return std::move(reply->body);
}

}  // namespace

Result<HttpResponse> ApiClient::exchange(HttpRequest request) {
  if (connection_ == nullptr) return std::unexpected(bad_server_);
  if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
  auto result = connection_->send(request);
  const std::string& tried = connection_->last_tried();
  if (!result) {
    const HttpError& error = result.error();
    if (error.failure == HttpFailure::kUntrusted) {
      record_failure(ExitStatus::kUnreachable);
      return fail("",
                  fmt::format("the TLS certificate of the Tidepool server at {} is not trusted "
                              "({}); set ca_cert: in the config file or TIDEPOOL_CA_CERT to the "
                              "CA certificate that signed it",
                              tried, error.detail));
    }
    if (error.failure == HttpFailure::kBadRequest) return fail("", error.detail);
    std::string why = describe(error);
    if ((error.failure == HttpFailure::kNoReply || error.failure == HttpFailure::kBadReply) &&
        tried.starts_with("http://")) {
      why += "; if it serves HTTPS, use an https:// URL";
    }
    record_failure(ExitStatus::kUnreachable);
    return std::unexpected(unreachable_error(connection_->servers(), tried, why));
  }
  if (auto refusal = not_leader_reply(*result)) {
    // Only standbys answered within the failover deadline (or one said no leader is known, to a
    // request that is not safe to send twice): no server took the request.
    record_failure(ExitStatus::kUnreachable);
    const Error said = api_error(result->status, result->body);
    return fail("", fmt::format("cannot reach the leader of the Tidepool servers {}: {} said: {}{}",
                                fmt::join(connection_->servers(), ", "), tried, said.reason,
                                refusal->leader ? "" : "; a leader is being elected, try again"));
  }
  if (result->status < 200 || result->status >= 300) {
    record_failure(exit_status_of_http(result->status));
    return std::unexpected(api_error(result->status, result->body));
  }
  return std::move(*result);
}

Result<ApiReply> ApiClient::request(HttpRequest request) {
  auto result = exchange(std::move(request));
  if (!result) return std::unexpected(result.error());
  const HttpResponse& res = *result;
  ApiReply reply{res.status, nullptr};
  if (!res.body.empty()) {
    reply.body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) {
      return fail("", fmt::format("the server at {} answered with something that is not JSON; is "
                                  "it a Tidepool server?",
                                  server()));
    }
  }
  return reply;
}

Result<nlohmann::json> ApiClient::get(const std::string& path, const QueryParams& params) {
  return body_of(request(
      {.method = "GET", .target = path_with_query(path, params), .headers = {}, .body = {}}));
}

Result<nlohmann::json> ApiClient::get_jobs(const QueryParams& params, std::size_t limit) {
  // Pages come newest first: collected backwards, put in id order at the end.
  std::vector<nlohmann::json> pages;
  std::size_t count = 0;
  std::string before;
  while (true) {
    QueryParams page = params;
    if (limit > 0) {
      page.emplace_back("limit", std::to_string(std::min<std::size_t>(limit - count, 5000)));
    }
    if (!before.empty()) page.emplace_back("before", before);
    auto reply = get("/v1/jobs", page);
    if (!reply) return reply;
    const nlohmann::json& jobs = reply->at("jobs");
    count += jobs.size();
    pages.push_back(jobs);
    auto next = reply->find("next");
    if (next == reply->end() || !next->is_string() || jobs.empty() ||
        (limit > 0 && count >= limit)) {
      break;
    }
    before = next->get<std::string>();
  }
  nlohmann::json all = nlohmann::json::array();
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    for (nlohmann::json& job : *page) all.push_back(std::move(job));
  }
  return nlohmann::json{{"jobs", std::move(all)}};
}

Result<nlohmann::json> ApiClient::post(const std::string& path, const nlohmann::json& body) {
  return body_of(request({.method = "POST",
                          .target = path,
                          .headers = {{"Content-Type", "application/json"}},
                          .body = body.dump()}));
}

Result<HttpResponse> ApiClient::get_text(const std::string& path, const QueryParams& params) {
  return exchange(
      {.method = "GET", .target = path_with_query(path, params), .headers = {}, .body = {}});
}

Result<nlohmann::json> ApiClient::patch(const std::string& path, const nlohmann::json& body) {
  return body_of(request({.method = "PATCH",
                          .target = path,
                          .headers = {{"Content-Type", "application/json"}},
                          .body = body.dump()}));
}

Result<nlohmann::json> ApiClient::del(const std::string& path) {
  return body_of(request({.method = "DELETE", .target = path, .headers = {}, .body = {}}));
}

Result<ApiReply> ApiClient::post_raw(
    const std::string& path, const std::string& body, const std::string& content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  HttpRequest raw{.method = "POST", .target = path, .headers = headers, .body = body};
  raw.headers.emplace_back("Content-Type", content_type);
  return request(std::move(raw));
}

}  // namespace tidepool
