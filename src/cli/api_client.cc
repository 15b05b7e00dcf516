#include "cli/api_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <random>

namespace tidepool {
namespace {

constexpr std::size_t kBodyExcerpt = 200;

std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "connection refused or host not found";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "no reply (the server closed the connection or did not answer in time)";
    case httplib::Error::SSLConnection:
      return "the TLS handshake failed (is it an http:// server?)";
    case httplib::Error::SSLLoadingCerts:
      return "cannot load the CA certificates";
    default:
      return httplib::to_string(error);
  }
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

bool is_connection_error(const Error& error) {
  return error.field.empty() && (error.reason.starts_with("cannot reach the Tidepool server") ||
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

namespace {

// A client of "http[s]://host[:port][/]", built from host and port: httplib's own URL parsing
// compiles a std::regex, which costs a short-lived command more than all of its HTTP.
std::unique_ptr<httplib::ClientImpl> make_client(const std::string& url) {
  const bool tls = url.starts_with("https://");
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  std::string host = rest;
  int port = tls ? 443 : 80;
  const auto colon = rest.rfind(':');
  const auto bracket = rest.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = rest.substr(0, colon);
    const std::string digits = rest.substr(colon + 1);
    std::from_chars(digits.data(), digits.data() + digits.size(), port);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (tls) return std::make_unique<httplib::SSLClient>(host, port);
  return std::make_unique<httplib::ClientImpl>(host, port);
}

}  // namespace

ApiClient::ApiClient(const ClientSettings& settings, ApiClientOptions options)
    : server_(settings.server), token_(settings.token), client_(make_client(settings.server)) {
  client_->set_connection_timeout(options.connect_timeout);
  client_->set_read_timeout(options.read_timeout);
  client_->set_write_timeout(options.read_timeout);
  client_->set_keep_alive(true);
  client_->set_tcp_nodelay(true);
  if (!token_.empty()) client_->set_bearer_token_auth(token_);
  if (!settings.ca_cert.empty()) client_->set_ca_cert_path(settings.ca_cert);
}

ApiClient::~ApiClient() = default;
ApiClient::ApiClient(ApiClient&&) noexcept = default;
ApiClient& ApiClient::operator=(ApiClient&&) noexcept = default;

namespace {

Result<ApiReply> to_reply(const std::string& server, const httplib::Result& result) {
  if (!result) {
    if (result.error() == httplib::Error::SSLServerVerification) {
      return fail("",
                  fmt::format("the TLS certificate of the Tidepool server at {} is not trusted; "
                              "set ca_cert: in the config file or TIDEPOOL_CA_CERT to the CA "
                              "certificate that signed it",
                              server));
    }
    std::string why = describe(result.error());
    if (result.error() == httplib::Error::Read && server.starts_with("http://")) {
      why += "; if it serves HTTPS, use an https:// URL";
    }
    return std::unexpected(unreachable_error(server, why));
  }
  const httplib::Response& res = *result;
  if (res.status < 200 || res.status >= 300)
    return std::unexpected(api_error(res.status, res.body));
  ApiReply reply{res.status, nullptr};
  if (!res.body.empty()) {
    reply.body = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) {
      return fail("", fmt::format("the server at {} answered with something that is not JSON; is "
                                  "it a Tidepool server?",
                                  server));
    }
  }
  return reply;
}

Result<nlohmann::json> body_of(Result<ApiReply> reply) {
  if (!reply) return std::unexpected(reply.error());
  return std::move(reply->body);
}

}  // namespace

Result<nlohmann::json> ApiClient::get(const std::string& path, const QueryParams& params) {
  return body_of(to_reply(server_, client_->Get(path_with_query(path, params))));
}

Result<nlohmann::json> ApiClient::post(const std::string& path, const nlohmann::json& body) {
  return body_of(to_reply(server_, client_->Post(path, body.dump(), "application/json")));
}

Result<nlohmann::json> ApiClient::del(const std::string& path) {
  return body_of(to_reply(server_, client_->Delete(path)));
}

Result<ApiReply> ApiClient::post_raw(
    const std::string& path, const std::string& body, const std::string& content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Headers extra;
  for (const auto& [key, value] : headers) extra.emplace(key, value);
  return to_reply(server_, client_->Post(path, extra, body, content_type));
}

}  // namespace tidepool
