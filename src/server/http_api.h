// The REST/JSON API v1 over HTTP (http_server.h: Boost.Beast, optional TLS). Every route
// authenticates the bearer token (except /healthz, /readyz and /metrics), applies the per-token
// rate limit, parses and checks the body, and hands a command to the control loop. Errors are
// JSON: {"error": ..., "field": ..., "reason": ...}, valid UTF-8 whatever the client sent.
//
// What a client cannot do (limits in HttpOptions, defaults below):
//   - hold the server with slow or idle connections: a request head has 10 s from its first byte,
//     a kept-alive connection 5 s of silence, a body 30 s; at most 256 connections per client
//     address and 4096 in all (past these the connection is closed at once);
//   - send a head over 16 KiB or with more than 100 fields (431), two Content-Length fields or
//     Content-Length with Transfer-Encoding (400), a body over max_body_bytes however it is
//     framed (413); the token is checked from the head, before any body is read (401);
//   - starve others with long polls: GET /v1/events waits hold no thread (they are parked on a
//     timer and woken by the event feed), at most 64 per token and 1024 in all (429 past that);
//     a route whose work is one command for the control loop checks the request on the I/O
//     thread (bodies up to 64 KiB; larger ones on a worker) and hands the command over, and its
//     answer is sent when the command's round is committed, so no thread waits for the loop;
//     the few handlers that block (task logs, listings, /metrics) run on a pool of `threads`
//     workers; /healthz and /readyz answer on the I/O threads, behind nothing;
//   - scrape /metrics without bound: 5/s per client address (bursts of 20), and with
//     metrics_token_required a token of any role is needed.
// A handler that throws is logged and answered 500; the server goes on.
//
//   POST   /v1/jobs                    submit (JSON or YAML body; Idempotency-Key header)
//   GET    /v1/jobs                    ?tenant= &queue= &state=pending,running &node= &limit=
//   GET    /v1/jobs/{id}               one job, with its transitions and placement
//   DELETE /v1/jobs/{id}               cancel
//   GET    /v1/jobs/{id}/why           why it waits (or where it runs)
//   POST   /v1/jobs/{id}/checkpoint    the job saved a checkpoint
//   POST   /v1/jobs/{id}/status        its agent reports it running, succeeded or failed
//   POST   /v1/jobs/{id}/logs          (agent) ?task=N&offset=O, body: the task's output bytes
//   GET    /v1/jobs/{id}/logs          ?task=N&offset=O&limit=L: the bytes, as text/plain
//   GET    /v1/nodes                   nodes, with who holds their GPUs
//   POST   /v1/nodes/{name}/drain      (admin) no new jobs there; /undrain
//   POST   /v1/nodes/{name}/register   (agent) the node's agent is up; /heartbeat
//   GET    /v1/tenants[/{name}]        quotas and usage; PUT /v1/tenants/{name} (admin)
//   GET    /v1/queues                  pending and running jobs per team queue
//   POST   /v1/tokens                  (admin) create; GET /v1/tokens; DELETE /v1/tokens/{id}
//   GET    /v1/events?since=N          events after N; waits up to &timeout= (default 30s)
//   GET    /v1/admin/backup            (admin) the state as a backup file (store/backup_file.h)
//   GET    /metrics, /healthz, /readyz
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/instant.h"
#include "server/control_loop.h"
#include "server/http_server.h"
#include "server/job_logs.h"
#include "server/rate_limiter.h"
#include "server/reply.h"
#include "server/server_metrics.h"

namespace tidepool {

// The one mapping of the control plane's replies (reply.h) to HTTP. Statuses: done 200, created
// 201; refused kInvalid 400, kForbidden 403, kNotFound 404, kConflict 409, kTooMany 429 (with
// Retry-After when the refusal says when), kUnavailable 503. Bodies: what was done, or the
// refusal's {"error", "field", "reason"} (and "retry_after_seconds"), or the body it carries.
[[nodiscard]] int http_status(const Reply& reply);
[[nodiscard]] nlohmann::json http_body(const Reply& reply);

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8470;       // 0: any free port
  std::string tls_cert;  // both set: HTTPS
  std::string tls_key;
  double rate_per_second = 1000;  // per token; 0: no limit
  double rate_burst = 2000;
  std::size_t max_body_bytes = 1 << 20;
  int threads = 64;     // workers for the handlers that block (logs, listings, /metrics)
  std::string log_dir;  // the tasks' logs (job_logs.h), created by bind() if missing
  // Connection and request limits (see http_server.h).
  Millis idle_timeout{5'000};
  Millis head_timeout{10'000};
  Millis body_timeout{30'000};
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_header_count = 100;
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_peer = 256;
  int long_polls_per_token = 64;  // GET /v1/events waiting at once
  int max_long_polls = 1024;
  bool metrics_token_required = false;  // /metrics needs a token (any role)
  double metrics_rate_per_second = 5;   // per client address
  double metrics_rate_burst = 20;
  // GET /v1/admin/backup: the backup file's text, taken consistently (server/running_backup.h);
  // called on a worker, once per request. Empty: the route answers 503.
  std::function<Result<std::string>()> backup;
};

class HttpApi {
 public:
  HttpApi(ControlLoop& loop, ServerMetrics& metrics, HttpOptions options);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Opens the log folder and binds the listening socket; returns the port (useful with port 0).
  Result<int> bind();
  // Serves until stop(); returns when the server has stopped, at once if stop() came first.
  void serve();
  // From any thread, at any time (before, during or after serve()); answers the long polls.
  void stop();
  // This server's URL as clients reach it, for GET /v1/leader (it leads: it serves the API).
  void set_self_url(std::string url);

  struct Route;
  struct Call;
  struct LongPolls;

 private:
  void add_routes();
  HeadVerdict on_head(HttpRequest& request);
  void handle(HttpRequest& request, const HttpResponder& responder);
  // GET /v1/events: answers now, or parks the request until an event or its timeout.
  void events(const Call& call, const HttpResponder& responder);
  // Answers parked poll `id` if there are events for it now (or, `expired`, in any case).
  void recheck_poll(std::uint64_t id, bool expired);

  ControlLoop& loop_;
  ServerMetrics& metrics_;
  HttpOptions options_;
  RateLimiter limiter_;
  RateLimiter metrics_limiter_;
  std::unique_ptr<JobLogs> logs_;
  std::vector<Route> routes_;
  std::unique_ptr<LongPolls> polls_;
  std::unique_ptr<HttpServer> server_;
  mutable std::mutex self_url_mutex_;  // guards self_url_: set once by the wiring, read by GETs
  std::string self_url_;
};

}  // namespace tidepool
