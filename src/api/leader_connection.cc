#include "api/leader_connection.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "api/server_list.h"

namespace tidepool {
namespace {

// The list with the leaders learned from refusals stays this short however often leaders change.
constexpr std::size_t kMaxKnownServers = 2 * kMaxServers;

bool same_name(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace

std::optional<NotLeader> not_leader_reply(const HttpResponse& response) {
  if (response.status != 503 && response.status != 421) return std::nullopt;
  const auto body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return std::nullopt;
  const auto leader = body.find("leader");
  if (leader == body.end()) return std::nullopt;
  if (leader->is_null()) return NotLeader{};
  if (leader->is_string()) return NotLeader{leader->get<std::string>()};
  return std::nullopt;
}

bool safe_to_resend(const HttpRequest& request) {
  if (request.method == "GET" || request.method == "HEAD") return true;
  return std::ranges::any_of(request.headers, [](const auto& header) {
    return same_name(header.first, kIdempotencyKeyHeader) && !header.second.empty();
  });
}

Result<LeaderConnection> LeaderConnection::create(std::vector<std::string> servers,
                                                  LeaderConnectionOptions options) {
  if (servers.empty()) return fail("server", "no server URL is given");
  std::vector<HttpEndpoint> endpoints;
  for (const std::string& url : servers) {
    auto endpoint = parse_http_url(url);
    if (!endpoint) return std::unexpected(endpoint.error());
    endpoints.push_back(std::move(*endpoint));
  }
  return LeaderConnection(std::move(servers), std::move(endpoints), std::move(options));
}

LeaderConnection::LeaderConnection(std::vector<std::string> servers,
                                   std::vector<HttpEndpoint> endpoints,
                                   LeaderConnectionOptions options)
    : servers_(std::move(servers)),
      endpoints_(std::move(endpoints)),
      connections_(servers_.size()),
      options_(std::move(options)) {}

LeaderConnection::~LeaderConnection() = default;
LeaderConnection::LeaderConnection(LeaderConnection&&) noexcept = default;
LeaderConnection& LeaderConnection::operator=(LeaderConnection&&) noexcept = default;

std::optional<std::size_t> LeaderConnection::index_of(std::string_view url, bool may_add) {
  auto normalized = normalize_server_url(url, "leader");
  if (!normalized) return std::nullopt;
  if (auto known = std::ranges::find(servers_, *normalized); known != servers_.end()) {
    return static_cast<std::size_t>(known - servers_.begin());
  }
  if (!may_add || servers_.size() >= kMaxKnownServers) return std::nullopt;
  auto endpoint = parse_http_url(*normalized);
  if (!endpoint) return std::nullopt;
  servers_.push_back(std::move(*normalized));
  endpoints_.push_back(std::move(*endpoint));
  connections_.emplace_back();
  return servers_.size() - 1;
}

std::expected<HttpResponse, HttpError> LeaderConnection::exchange(std::size_t index,
                                                                  const HttpRequest& request) {
  last_tried_ = index;
  if (connections_[index] == nullptr) {
    connections_[index] = std::make_unique<HttpConnection>(endpoints_[index], options_.http);
  }
  return connections_[index]->send(request);
}

void LeaderConnection::pass_over(std::size_t index) { current_ = (index + 1) % servers_.size(); }

std::expected<HttpResponse, HttpError> LeaderConnection::send(const HttpRequest& request) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + options_.failover_deadline;
  const bool resendable = safe_to_resend(request);
  std::chrono::milliseconds backoff =
      std::max(options_.first_backoff, std::chrono::milliseconds(1));
  bool learned = false;  // a leader was added to the list for this request
  bool refused = false;  // a standby answered: the servers are there, electing a leader
  std::optional<HttpResponse> refusal;
  HttpError failure{.failure = HttpFailure::kConnect, .detail = "no server was tried"};
  // Rounds: each tries every server once at most, from the one believed to lead. Each round
  // after the first waits at least a millisecond, so the deadline bounds them.
  for (;;) {
    // What the last round met is the outcome; a refusal says more than a failure beside it.
    refusal.reset();
    std::vector<bool> tried(servers_.size(), false);
    std::optional<std::size_t> next = current_;
    while (next) {
      const std::size_t index = *next;
      tried[index] = true;
      next.reset();
      auto outcome = exchange(index, request);
      if (outcome) {
        const std::optional<NotLeader> said = not_leader_reply(*outcome);
        if (!said) {
          // The leader (or a server of no highly available Tidepool) answered: it is kept.
          current_ = index;
          for (std::size_t other = 0; other < connections_.size(); ++other) {
            if (other != index) connections_[other].reset();
          }
          return outcome;
        }
        refused = true;
        refusal = std::move(*outcome);
        if (said->leader) {
          const std::size_t known = servers_.size();
          const std::optional<std::size_t> leader = index_of(*said->leader, !learned);
          if (leader && *leader >= known) learned = true;
          tried.resize(servers_.size(), false);
          // The standby did nothing: sending the request to the leader it names is safe.
          if (leader && !tried[*leader]) {
            next = leader;
            continue;
          }
        }
        // No leader known (or only one already tried in this round): the standby did nothing
        // (it answers from the request's head, server/standby_api.h), so any request moves on.
      } else {
        failure = outcome.error();
        switch (failure.failure) {
          case HttpFailure::kUntrusted:
          case HttpFailure::kCaCerts:
          case HttpFailure::kBadRequest:
            return std::unexpected(std::move(failure));
          default:
            break;
        }
        if (failure.sent && !resendable) {
          pass_over(index);
          return std::unexpected(std::move(failure));
        }
      }
      for (std::size_t step = 1; step < servers_.size() && !next; ++step) {
        const std::size_t candidate = (index + step) % servers_.size();
        if (!tried[candidate]) next = candidate;
      }
    }
    // One server that does not answer is said at once, as a single server always was.
    if (servers_.size() == 1 && !refused) break;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::max(options_.max_backoff, backoff));
  }
  pass_over(last_tried_);
  if (refusal) return std::move(*refusal);
  return std::unexpected(std::move(failure));
}

}  // namespace tidepool
