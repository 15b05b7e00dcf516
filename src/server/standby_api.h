// What a standby server answers while another server leads (several servers on one etcd store,
// etcd_election.h): it is alive but not ready, names the leader, and sends every API request
// there, so that clients and agents given several servers' URLs find the one that leads.
//
//   GET /healthz    200 {"status": "ok"}
//   GET /readyz     503 {"status": "standby", "leader": URL-or-null}
//   GET /v1/leader  200 {"leader": URL-or-null, "self": URL, "is_leader": false}
//   GET /metrics    200 tidepool_leader 0 (Prometheus' text format)
//   GET / and /ui/* 307 to the same path on the leader (the web dashboard), while one leads
//   anything else   503 {"error": "not the leader", "field": "server", "reason": "...",
//                        "leader": URL-or-null}, with Retry-After: 1
//
// "leader" is null while no server leads (an election is under way). The standby reads no body
// and holds no state: it answers from the head, on the I/O threads.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.h"
#include "server/http_server.h"

namespace tidepool {

// The answer of GET /v1/leader on a server whose own URL is `self`.
[[nodiscard]] HttpResponse leader_response(const std::optional<std::string>& leader,
                                           const std::string& self);

// The answer of a standby to a request it does not serve (see above).
[[nodiscard]] HttpResponse not_the_leader_response(const std::optional<std::string>& leader);

class StandbyApi {
 public:
  // `self`: this server's URL, as clients reach it.
  StandbyApi(HttpServerOptions options, std::string self);
  ~StandbyApi();
  StandbyApi(const StandbyApi&) = delete;
  StandbyApi& operator=(const StandbyApi&) = delete;

  // Binds the listening socket (see HttpServer::bind); the port.
  Result<int> bind();
  // Serves until stop(), on the calling thread.
  void serve();
  void stop();

  // The leader the answers name from now on (none: an election is under way). Any thread.
  void set_leader(std::optional<std::string> leader);
  // This server's own URL, once known (after bind() with port 0). Any thread.
  void set_self(std::string self);

 private:
  HeadVerdict on_head(const HttpRequest& request) const;

  mutable std::mutex mutex_;  // guards self_ and leader_: set by the wiring, read by I/O threads
  std::string self_;
  std::optional<std::string> leader_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace tidepool
