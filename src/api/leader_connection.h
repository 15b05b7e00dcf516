// Speaking to a highly available Tidepool: several `tidepool server` processes share one store and
// one of them leads. A standby answers every API request (all but GET /healthz, /readyz,
// /v1/leader and /metrics) with status 503, or 421, and the JSON body
//
//   {"error": "not the leader", "field": "server",
//    "reason": "this server is a standby; the leader is at URL", "leader": "URL"}
//
// whose "leader" is null while no leader is known (during an election). A LeaderConnection holds
// the servers' URLs (server_list.h) and sends each request to the one believed to lead, one
// kept-alive HttpConnection per server:
//
//   * a failure before anything was sent (refused, unreachable, connect timeout, the TLS
//     handshake) moves to the next URL at once;
//   * a standby's refusal naming the leader sends the request there (a URL not in the list is
//     added, one per request at most);
//   * a refusal without a leader moves to the next URL (the standby did nothing);
//   * a failure after the request may have reached a server (read timeout, no reply, a reply
//     that is not HTTP) moves to the next URL only when the request is safe to send again
//     (safe_to_resend); otherwise that outcome is the answer, and the next request starts at the
//     next URL;
//   * after every URL was tried once, when there are several URLs or a standby refused (it is
//     there, its leader soon), it waits (first_backoff, doubling up to max_backoff) and goes round
//     again until failover_deadline has passed since the request began, and then gives the
//     outcome of the last round (a standby's refusal if one answered in it, else the last
//     failure).
//
// A certificate that is not trusted, unloadable CA certificates and a request that cannot be sent
// as given end the request at once: another server would say the same. One URL that answers
// costs exactly one exchange, as a plain HttpConnection. Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_connection.h"
#include "api/http_response.h"
#include "core/error.h"

namespace tidepool {

// The header that makes a request safe to send again: the server does what it asks once per key.
inline constexpr std::string_view kIdempotencyKeyHeader = "Idempotency-Key";

struct LeaderConnectionOptions {
  HttpClientOptions http;
  // How long one request may go round the servers looking for the leader; a new round starts only
  // before it has passed (an exchange under way is bounded by http's timeouts). Zero: one round.
  std::chrono::milliseconds failover_deadline{15000};
  std::chrono::milliseconds first_backoff{200};  // the wait after the first round without answer
  std::chrono::milliseconds max_backoff{1000};   // the waits double up to this
};

// What a standby's refusal says.
struct NotLeader {
  std::optional<std::string> leader;  // the leader's URL as sent; nullopt: none known
};

// The refusal in `response` when it is a standby's: status 503 or 421 with a JSON object body
// whose "leader" is a string or null. Any other response is nullopt.
std::optional<NotLeader> not_leader_reply(const HttpResponse& response);

// Whether `request` may be sent again after a failure that may have reached a server: a GET or a
// HEAD, or one that carries an Idempotency-Key header.
bool safe_to_resend(const HttpRequest& request);

class LeaderConnection {
 public:
  // A connection to `servers` (normalized URLs, as parse_server_list gives); an Error naming
  // "server" when there is none or one is not a URL.
  static Result<LeaderConnection> create(std::vector<std::string> servers,
                                         LeaderConnectionOptions options);

  ~LeaderConnection();
  LeaderConnection(LeaderConnection&&) noexcept;
  LeaderConnection& operator=(LeaderConnection&&) noexcept;

  // Sends `request` as the file comment says. The reply of a server that answered, whatever its
  // status, is a value: a standby's refusal (not_leader_reply) too, when no leader could be
  // reached; only when no server answered at all is the outcome the HttpError of the last try.
  std::expected<HttpResponse, HttpError> send(const HttpRequest& request);

  // The URL believed to lead: the one that answered last (at first, the first of the list; after
  // a request that no leader answered, the one after the server tried last).
  [[nodiscard]] const std::string& current() const { return servers_[current_]; }
  // The URL the last exchange went to (for messages about a failure).
  [[nodiscard]] const std::string& last_tried() const { return servers_[last_tried_]; }
  // The URLs in order, a leader learned from a refusal included.
  [[nodiscard]] const std::vector<std::string>& servers() const { return servers_; }

 private:
  LeaderConnection(std::vector<std::string> servers, std::vector<HttpEndpoint> endpoints,
                   LeaderConnectionOptions options);
  // The index of `url`, added to the list when it is not in it and `may_add`; nullopt when it is
  // not a server URL or may not be added.
  std::optional<std::size_t> index_of(std::string_view url, bool may_add);
  std::expected<HttpResponse, HttpError> exchange(std::size_t index, const HttpRequest& request);
  // After a request no leader answered, the next one starts at the server after `index`: one
  // that hangs (or keeps failing a request that may not be resent) is not asked first forever.
  void pass_over(std::size_t index);

  std::vector<std::string> servers_;
  std::vector<HttpEndpoint> endpoints_;
  std::vector<std::unique_ptr<HttpConnection>> connections_;  // made at first use
  LeaderConnectionOptions options_;
  std::size_t current_ = 0;
  std::size_t last_tried_ = 0;
};

}  // namespace tidepool
