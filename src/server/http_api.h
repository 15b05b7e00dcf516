// The REST/JSON API v1 over HTTP (cpp-httplib), with optional TLS. Every route authenticates the
// bearer token (except /healthz, /readyz and /metrics), applies the per-token rate limit, parses
// and checks the body, and hands a command to the control loop. Errors are JSON:
// {"error": ..., "field": ..., "reason": ...}.
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
//   GET    /metrics, /healthz, /readyz
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "server/control_loop.h"
#include "server/job_logs.h"
#include "server/rate_limiter.h"
#include "server/server_metrics.h"

namespace httplib {
class Server;
}

namespace tidepool {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8470;       // 0: any free port
  std::string tls_cert;  // both set: HTTPS
  std::string tls_key;
  double rate_per_second = 1000;  // per token; 0: no limit
  double rate_burst = 2000;
  std::size_t max_body_bytes = 1 << 20;
  int threads = 64;
  std::string log_dir;  // the tasks' logs (job_logs.h), created by bind() if missing
};

class HttpApi {
 public:
  HttpApi(ControlLoop& loop, ServerMetrics& metrics, HttpOptions options);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Opens the log folder and binds the listening socket; returns the port (useful with port 0).
  Result<int> bind();
  // Serves until stop(); returns when the server has stopped.
  void serve();
  void stop();

 private:
  void routes();

  ControlLoop& loop_;
  ServerMetrics& metrics_;
  HttpOptions options_;
  RateLimiter limiter_;
  std::unique_ptr<JobLogs> logs_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace tidepool
