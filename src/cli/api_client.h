// A small client of the server's REST API (server/http_api.h) for the user commands: one
// keep-alive connection to an http:// or https:// server, or to the leader of several (a highly
// available Tidepool, api/leader_connection.h), the bearer token on every request, and
// every outcome as a value. A reply with a 2xx status is its JSON body; any other becomes an Error
// built from the server's {"error", "field", "reason"} body (so that "error: " + message() reads
// "error: tasks: 0 is out of range 1..100000"); a connection failure says how to point the command
// at the server. Not thread-safe: one client per thread.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_connection.h"
#include "api/leader_connection.h"
#include "cli/client_config.h"
#include "core/error.h"

namespace tidepool {

struct ApiClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{30000};
  // How long a request goes round several servers looking for their leader: a failover of a few
  // seconds passes unnoticed (LeaderConnectionOptions::failover_deadline).
  std::chrono::milliseconds failover_deadline{15000};
};

// A successful reply: its status (200, 201, ...) and JSON body (null when empty).
struct ApiReply {
  int status = 0;
  nlohmann::json body;
};

// Query parameters, in order; empty values are left out.
using QueryParams = std::vector<std::pair<std::string, std::string>>;

// The Error of a reply with a non-2xx `status` and body `body`: the body's field and reason when it
// is the server's JSON error, else the status and the start of the body.
Error api_error(int status, const std::string& body);

// "cannot reach the Tidepool server at URL: WHY; is it running? set --server or TIDEPOOL_SERVER"
Error unreachable_error(const std::string& url, const std::string& why);

// The same for several servers: "cannot reach the Tidepool server at any of URL, URL (last tried
// URL: WHY); is one running? ..."; unreachable_error for one.
Error unreachable_error(const std::vector<std::string>& servers, const std::string& last_tried,
                        const std::string& why);

// Whether `error` came from a request that never reached the server (unreachable, untrusted TLS
// certificate): a command that sends several requests stops at the first such error.
bool is_connection_error(const Error& error);

// `text` percent-encoded for a URL path segment or query value (unreserved characters kept).
std::string url_escape(std::string_view text);

// `path` with `params` appended as a URL-encoded query.
std::string path_with_query(const std::string& path, const QueryParams& params);

// A random UUID (version 4), from the system's random source.
std::string random_uuid();

class ApiClient {
 public:
  ApiClient(const ClientSettings& settings, ApiClientOptions options = {});
  ~ApiClient();
  ApiClient(ApiClient&&) noexcept;
  ApiClient& operator=(ApiClient&&) noexcept;

  // The server that answered last (the leader, of several), for messages; the list as given when
  // it is not valid.
  [[nodiscard]] const std::string& server() const {
    return connection_ != nullptr ? connection_->current() : server_;
  }

  Result<nlohmann::json> get(const std::string& path, const QueryParams& params = {});
  // GET /v1/jobs with `params`, page after page (the server pages its answer): {"jobs": [...]} in
  // id order, the newest `limit` of them (0: all).
  Result<nlohmann::json> get_jobs(const QueryParams& params, std::size_t limit = 0);
  Result<nlohmann::json> post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> patch(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> del(const std::string& path);
  // POSTs `body` as is with `content_type` and extra headers; returns the status with the body.
  Result<ApiReply> post_raw(const std::string& path, const std::string& body,
                            const std::string& content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers);
  // GETs `path` and returns a 2xx reply as it came (status, headers, body), for a body that is
  // not JSON (a task's log); other replies are Errors as for get().
  Result<HttpResponse> get_text(const std::string& path, const QueryParams& params = {});

 private:
  Result<ApiReply> request(HttpRequest request);
  // Sends `request`; a reply with a 2xx status as it came, any other outcome as an Error.
  Result<HttpResponse> exchange(HttpRequest request);

  std::string server_;
  std::string token_;
  Error bad_server_;  // why `server_` is not a list of URLs, when connection_ is null
  std::unique_ptr<LeaderConnection> connection_;
};

}  // namespace tidepool
