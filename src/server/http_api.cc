#include "server/http_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "server/api_bodies.h"
#include "server/job_spec.h"

namespace tidepool {
namespace {

using httplib::Request;
using httplib::Response;
using Handler = std::function<Reply(const Principal&, const Request&)>;
// A handler that writes the response itself (one that is not JSON).
using RawHandler = std::function<void(const Principal&, const Request&, Response&)>;

// GET /v1/jobs/{id}/logs: bytes per reply by default, and at most.
constexpr std::int64_t kDefaultLogReadBytes = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLogReadBytes = std::int64_t{8} << 20;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Reply bad_request(std::string error, const Error& cause) {
  return error_reply(400, std::move(error), cause);
}

// The request's body as JSON: by its Content-Type, or by its first character when it has none
// that says (JSON starts with '{' or '['; anything else is read as YAML).
Result<nlohmann::json> request_body(const Request& req) {
  if (req.body.empty()) return nlohmann::json(nullptr);
  const std::string type = req.get_header_value("Content-Type");
  BodyFormat format = BodyFormat::kYaml;
  if (type.starts_with("application/json")) {
    format = BodyFormat::kJson;
  } else if (type.find("yaml") == std::string::npos) {
    const auto first = req.body.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (req.body[first] == '{' || req.body[first] == '[')) {
      format = BodyFormat::kJson;
    }
  }
  return parse_body(req.body, format);
}

// Parses the body with `read` (one of api_bodies.h's readers).
template <class Read>
auto read_body(const Request& req, Read read) -> decltype(read(nlohmann::json{})) {
  auto body = request_body(req);
  if (!body) return std::unexpected(body.error());
  return read(*body);
}

std::optional<std::int64_t> path_id(const Request& req) {
  const std::string text = req.matches[1];
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

Reply no_such_job(const Request& req) {
  return error_reply(404, "not found",
                     Error{"id", fmt::format("no job {}", std::string(req.matches[1]))});
}

void write(Response& res, const Reply& reply) {
  res.status = reply.status;
  res.set_content(reply.body.dump(), "application/json");
}

// The query parameter `name` as a whole number in min..max (`expected` says so in words);
// `fallback` when the request has none, an Error when there is no fallback.
Result<std::int64_t> query_integer(const Request& req, const std::string& name,
                                   std::optional<std::int64_t> fallback, std::int64_t min,
                                   std::int64_t max, std::string_view expected) {
  if (!req.has_param(name)) {
    if (fallback) return *fallback;
    return fail(name, fmt::format("missing: add ?{}=N, {}", name, expected));
  }
  const std::string text = req.get_param_value(name);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return fail(name, fmt::format("'{}' is not {}", text, expected));
  }
  return value;
}

// `task` if job `id` has it; `access` is log_access's reply, with the job's task count.
Result<int> log_task(std::int64_t id, std::int64_t task, const Reply& access) {
  const auto tasks = access.body.at("tasks").get<std::int64_t>();
  if (task < tasks) return static_cast<int>(task);
  return std::unexpected(no_such_task(id, tasks));
}

// The reply to a refused append (JobLogs::append's Error).
Reply log_refusal(const Error& error, std::int64_t size_now) {
  if (error.field == "offset") {
    Reply reply = error_reply(409, "conflict", error);
    reply.body["size"] = size_now;
    return reply;
  }
  if (error.field == "bytes") return error_reply(413, "payload too large", error);
  spdlog::error("task log: {}", error.message());
  return error_reply(500, "internal error",
                     Error{"logs", "the server cannot store the task's log; see the server log"});
}

std::string status_words(int status) {
  switch (status) {
    case 404:
      return "not found";
    case 405:
      return "method not allowed";
    case 413:
      return "payload too large";
    default:
      return "request failed";
  }
}

}  // namespace

HttpApi::HttpApi(ControlLoop& loop, ServerMetrics& metrics, HttpOptions options)
    : loop_(loop),
      metrics_(metrics),
      options_(std::move(options)),
      limiter_(options_.rate_per_second, options_.rate_burst) {}

HttpApi::~HttpApi() { stop(); }

Result<int> HttpApi::bind() {
  if (options_.tls_cert.empty() != options_.tls_key.empty()) {
    return fail(options_.tls_cert.empty() ? "--tls-cert" : "--tls-key",
                "TLS needs both a certificate and its key");
  }
  auto logs = JobLogs::open(options_.log_dir);
  if (!logs) return std::unexpected(logs.error());
  logs_ = std::move(*logs);
  if (!options_.tls_cert.empty()) {
    auto tls =
        std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!tls->is_valid()) {
      return fail("--tls-cert", fmt::format("cannot load the TLS certificate '{}' or key '{}'",
                                            options_.tls_cert, options_.tls_key));
    }
    server_ = std::move(tls);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  const int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  // Small JSON answers: without TCP_NODELAY, Nagle's algorithm and delayed ACKs hold each one
  // back for tens of milliseconds.
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(100000);
  server_->set_keep_alive_timeout(30);
  server_->set_read_timeout(30);
  server_->set_write_timeout(30);
  routes();
  int port = 0;
  if (options_.port == 0) {
    port = server_->bind_to_any_port(options_.host);
  } else {
    port = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port <= 0) {
    return fail("listen", fmt::format("cannot listen on {}:{} (in use, or not an address of this "
                                      "machine)",
                                      options_.host, options_.port));
  }
  return port;
}

void HttpApi::serve() {
  if (server_) server_->listen_after_bind();
}

void HttpApi::stop() {
  if (server_) server_->stop();
}

void HttpApi::routes() {
  httplib::Server& s = *server_;

  // Authenticates, rate-limits and runs `handler`; counts the request.
  auto guarded_raw = [this](std::string route, RawHandler handler) {
    return [this, route = std::move(route), handler = std::move(handler)](const Request& req,
                                                                          Response& res) {
      const auto start = std::chrono::steady_clock::now();
      const std::string secret(bearer_secret(req.get_header_value("Authorization")));
      std::optional<Principal> who;
      if (!secret.empty()) who = loop_.tokens()->authenticate(secret);
      if (!who) {
        res.set_header("WWW-Authenticate", "Bearer");
        write(res,
              error_reply(401, "unauthorized",
                          Error{"Authorization",
                                secret.empty() ? "a bearer token is needed: pass --token, set "
                                                 "TIDEPOOL_TOKEN or add token: to the config file"
                                               : "unknown or revoked token"}));
      } else if (!limiter_.allow(who->token_id, wall_ms())) {
        metrics_.count_rate_limited();
        res.set_header("Retry-After", "1");
        write(res, error_reply(429, "too many requests",
                               Error{"Authorization",
                                     fmt::format("token {} is over its rate limit of {}/s; retry "
                                                 "after a second",
                                                 who->token_id, options_.rate_per_second)}));
      } else {
        handler(*who, req, res);
      }
      metrics_.count_request(
          req.method, route, res.status,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  };
  auto guarded = [guarded_raw](std::string route, Handler handler) {
    return guarded_raw(std::move(route), [handler = std::move(handler)](
                                             const Principal& who, const Request& req,
                                             Response& res) { write(res, handler(who, req)); });
  };
  // Runs a command that changes or reads the control plane on the loop.
  auto on_loop = [this](auto command) { return loop_.call(std::move(command)); };

  s.Get("/healthz", [](const Request&, Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  s.Get("/readyz", [this](const Request&, Response& res) {
    const bool ready = loop_.ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? R"({"status":"ready"})" : R"({"status":"not ready"})",
                    "application/json");
  });
  s.Get("/metrics", [this](const Request&, Response& res) {
    Reply reply = loop_.call([this](ControlPlane& plane, std::int64_t, Batch&) {
      metrics_.set_figures(plane.figures());
      return Reply{};
    });
    if (reply.status != 200) return write(res, reply);
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  });

  // --- jobs ---
  s.Post("/v1/jobs", guarded("/v1/jobs", [on_loop](const Principal& who, const Request& req) {
           auto spec = read_body(req, job_spec_from_json);
           if (!spec) return bad_request("invalid job spec", spec.error());
           return on_loop(
               [who, spec = std::move(*spec), key = req.get_header_value("Idempotency-Key")](
                   ControlPlane& p, std::int64_t now, Batch& b) mutable {
                 return p.submit(who, std::move(spec), key, now, b);
               });
         }));
  s.Get("/v1/jobs", guarded("/v1/jobs", [this](const Principal& who, const Request& req) {
          JobFilter filter{req.get_param_value("tenant"), req.get_param_value("queue"),
                           req.get_param_value("state"), req.get_param_value("node")};
          auto limit = query_integer(req, "limit", static_cast<std::int64_t>(kDefaultJobPage), 1,
                                     static_cast<std::int64_t>(kMaxJobPage),
                                     fmt::format("a page size, 1..{}", kMaxJobPage));
          if (!limit) return bad_request("invalid request", limit.error());
          filter.limit = static_cast<std::size_t>(*limit);
          auto before = query_integer(req, "before", 0, 1, std::numeric_limits<std::int64_t>::max(),
                                      "the cursor of the next page (\"next\" of the last reply)");
          if (!before) return bad_request("invalid request", before.error());
          filter.before = *before;
          // From a snapshot: the listing is filtered and built here, not on the loop.
          auto listing = loop_.job_listing();
          if (!listing) {
            return error_reply(503, "unavailable", Error{"server", "the server is shutting down"});
          }
          return list_jobs(*listing, who, filter);
        }));
  s.Get(R"(/v1/jobs/([^/]+))",
        guarded("/v1/jobs/{id}", [on_loop](const Principal& who, const Request& req) {
          auto id = path_id(req);
          if (!id) return no_such_job(req);
          return on_loop([who, id = *id](ControlPlane& p, std::int64_t, Batch&) {
            return p.get_job(who, id);
          });
        }));
  s.Delete(R"(/v1/jobs/([^/]+))",
           guarded("/v1/jobs/{id}", [on_loop](const Principal& who, const Request& req) {
             auto id = path_id(req);
             if (!id) return no_such_job(req);
             return on_loop([who, id = *id](ControlPlane& p, std::int64_t now, Batch& b) {
               return p.cancel(who, id, now, b);
             });
           }));
  s.Get(R"(/v1/jobs/([^/]+)/why)",
        guarded("/v1/jobs/{id}/why", [on_loop](const Principal& who, const Request& req) {
          auto id = path_id(req);
          if (!id) return no_such_job(req);
          return on_loop([who, id = *id](ControlPlane& p, std::int64_t now, Batch&) {
            return p.why(who, id, now);
          });
        }));
  s.Post(R"(/v1/jobs/([^/]+)/checkpoint)",
         guarded("/v1/jobs/{id}/checkpoint", [on_loop](const Principal& who, const Request& req) {
           auto id = path_id(req);
           if (!id) return no_such_job(req);
           auto report = read_body(req, checkpoint_report_from_json);
           if (!report) return bad_request("invalid request", report.error());
           return on_loop(
               [who, id = *id, report = *report](ControlPlane& p, std::int64_t now, Batch& b) {
                 return p.report_checkpoint(who, id, report, now, b);
               });
         }));
  s.Post(R"(/v1/jobs/([^/]+)/status)",
         guarded("/v1/jobs/{id}/status", [on_loop](const Principal& who, const Request& req) {
           auto id = path_id(req);
           if (!id) return no_such_job(req);
           auto report = read_body(req, job_status_report_from_json);
           if (!report) return bad_request("invalid request", report.error());
           return on_loop(
               [who, id = *id, report = *report](ControlPlane& p, std::int64_t now, Batch& b) {
                 return p.report_status(who, id, report, now, b);
               });
         }));

  // Task logs: access is checked on the loop, the files are read and written here.
  s.Post(R"(/v1/jobs/([^/]+)/logs)",
         guarded("/v1/jobs/{id}/logs", [this, on_loop](const Principal& who, const Request& req) {
           auto id = path_id(req);
           if (!id) return no_such_job(req);
           auto task = query_integer(req, "task", 0, 0, std::numeric_limits<int>::max(),
                                     "a task number (0 or more)");
           if (!task) return bad_request("invalid request", task.error());
           auto offset = query_integer(req, "offset", std::nullopt, 0,
                                       std::numeric_limits<std::int64_t>::max(),
                                       "the byte offset in the log where the body starts");
           if (!offset) return bad_request("invalid request", offset.error());
           std::optional<std::int64_t> run;
           if (req.has_param("run")) {
             auto parsed =
                 query_integer(req, "run", std::nullopt, 1, std::numeric_limits<int>::max(),
                               "the job's run the bytes come from (1 or more)");
             if (!parsed) return bad_request("invalid request", parsed.error());
             run = *parsed;
           }
           // httplib takes a multipart body apart: its bytes are not req.body.
           if (req.is_multipart_form_data()) {
             return error_reply(415, "unsupported media type",
                                Error{"Content-Type",
                                      "send the bytes as the body itself, e.g. "
                                      "application/octet-stream"});
           }
           Reply access = on_loop([who, id = *id, task = static_cast<int>(*task), run](
                                      ControlPlane& p, std::int64_t, Batch&) {
             return p.log_access(who, id, true, task, run);
           });
           if (access.status != 200) return access;
           auto in_job = log_task(*id, *task, access);
           if (!in_job) return bad_request("invalid request", in_job.error());
           auto size = logs_->append(*id, *in_job, *offset, req.body);
           if (!size) {
             auto now = logs_->read(*id, *in_job, 0, 0);
             return log_refusal(size.error(), now ? now->size : 0);
           }
           return Reply{200, {{"job", *id}, {"task", *in_job}, {"size", *size}}};
         }));
  s.Get(R"(/v1/jobs/([^/]+)/logs)",
        guarded_raw("/v1/jobs/{id}/logs", [this, on_loop](const Principal& who, const Request& req,
                                                          Response& res) {
          auto id = path_id(req);
          if (!id) return write(res, no_such_job(req));
          auto task = query_integer(req, "task", 0, 0, std::numeric_limits<int>::max(),
                                    "a task number (0 or more)");
          if (!task) return write(res, bad_request("invalid request", task.error()));
          auto offset = query_integer(req, "offset", 0, 0, std::numeric_limits<std::int64_t>::max(),
                                      "a byte offset (0 or more)");
          if (!offset) return write(res, bad_request("invalid request", offset.error()));
          auto limit = query_integer(req, "limit", kDefaultLogReadBytes, 0, kMaxLogReadBytes,
                                     fmt::format("a byte count, 0..{}", kMaxLogReadBytes));
          if (!limit) return write(res, bad_request("invalid request", limit.error()));
          Reply access = on_loop([who, id = *id](ControlPlane& p, std::int64_t, Batch&) {
            return p.log_access(who, id, false);
          });
          if (access.status != 200) return write(res, access);
          auto in_job = log_task(*id, *task, access);
          if (!in_job) return write(res, bad_request("invalid request", in_job.error()));
          auto chunk = logs_->read(*id, *in_job, *offset, *limit);
          if (!chunk) {
            spdlog::error("task log: {}", chunk.error().message());
            return write(res, error_reply(500, "internal error",
                                          Error{"logs",
                                                "the server cannot read the task's log; "
                                                "see the server log"}));
          }
          res.status = 200;
          res.set_header("X-Tidepool-Log-Size", std::to_string(chunk->size));
          res.set_header("Content-Type", "text/plain; charset=utf-8");
          res.body = std::move(chunk->bytes);
        }));

  // --- nodes ---
  s.Get(
      "/v1/nodes", guarded("/v1/nodes", [on_loop](const Principal& who, const Request&) {
        return on_loop([who](ControlPlane& p, std::int64_t, Batch&) { return p.list_nodes(who); });
      }));
  for (const bool drain : {true, false}) {
    const std::string verb = drain ? "drain" : "undrain";
    s.Post("/v1/nodes/([^/]+)/" + verb,
           guarded("/v1/nodes/{name}/" + verb, [on_loop, drain](const Principal& who,
                                                                const Request& req) {
             auto body = read_body(req, drain_request_from_json);
             if (!body) return bad_request("invalid request", body.error());
             return on_loop([who, drain, node = std::string(req.matches[1]), reason = body->reason](
                                ControlPlane& p, std::int64_t now, Batch& b) {
               return p.set_drained(who, node, drain, reason, now, b);
             });
           }));
  }
  s.Post(R"(/v1/nodes/([^/]+)/register)",
         guarded("/v1/nodes/{name}/register", [on_loop](const Principal& who, const Request& req) {
           auto body = read_body(req, node_registration_from_json);
           if (!body) return bad_request("invalid request", body.error());
           return on_loop([who, node = std::string(req.matches[1]), body = *body](
                              ControlPlane& p, std::int64_t now, Batch& b) {
             return p.register_node(who, node, body, now, b);
           });
         }));
  s.Post(R"(/v1/nodes/([^/]+)/heartbeat)",
         guarded("/v1/nodes/{name}/heartbeat", [on_loop](const Principal& who, const Request& req) {
           auto body = read_body(req, node_heartbeat_from_json);
           if (!body) return bad_request("invalid request", body.error());
           return on_loop([who, node = std::string(req.matches[1]), body = *body](
                              ControlPlane& p, std::int64_t now, Batch& b) {
             return p.heartbeat(who, node, body, now, b);
           });
         }));

  // --- tenants, queues, tokens ---
  s.Get("/v1/tenants", guarded("/v1/tenants", [on_loop](const Principal& who, const Request&) {
          return on_loop(
              [who](ControlPlane& p, std::int64_t, Batch&) { return p.list_tenants(who); });
        }));
  s.Get(R"(/v1/tenants/([^/]+))",
        guarded("/v1/tenants/{name}", [on_loop](const Principal& who, const Request& req) {
          return on_loop(
              [who, name = std::string(req.matches[1])](ControlPlane& p, std::int64_t, Batch&) {
                return p.get_tenant(who, name);
              });
        }));
  s.Put(R"(/v1/tenants/([^/]+))",
        guarded("/v1/tenants/{name}", [on_loop](const Principal& who, const Request& req) {
          auto update = read_body(req, tenant_update_from_json);
          if (!update) return bad_request("invalid tenant", update.error());
          return on_loop([who, name = std::string(req.matches[1]), update = *update](
                             ControlPlane& p, std::int64_t now, Batch& b) {
            return p.put_tenant(who, name, update, now, b);
          });
        }));
  s.Get(
      "/v1/queues", guarded("/v1/queues", [on_loop](const Principal& who, const Request&) {
        return on_loop([who](ControlPlane& p, std::int64_t, Batch&) { return p.list_queues(who); });
      }));
  s.Post("/v1/tokens", guarded("/v1/tokens", [on_loop](const Principal& who, const Request& req) {
           auto request = read_body(req, token_request_from_json);
           if (!request) return bad_request("invalid request", request.error());
           return on_loop([who, request = *request](ControlPlane& p, std::int64_t now, Batch& b) {
             return p.create_token(who, request, now, b);
           });
         }));
  s.Get(
      "/v1/tokens", guarded("/v1/tokens", [on_loop](const Principal& who, const Request&) {
        return on_loop([who](ControlPlane& p, std::int64_t, Batch&) { return p.list_tokens(who); });
      }));
  s.Delete(R"(/v1/tokens/([^/]+))",
           guarded("/v1/tokens/{id}", [on_loop](const Principal& who, const Request& req) {
             return on_loop([who, id = std::string(req.matches[1])](ControlPlane& p,
                                                                    std::int64_t now, Batch& b) {
               return p.revoke_token(who, id, now, b);
             });
           }));

  // --- the internal market ---
  s.Get("/v1/prices", guarded("/v1/prices", [on_loop](const Principal& who, const Request&) {
          return on_loop(
              [who](ControlPlane& p, std::int64_t now, Batch&) { return p.prices(who, now); });
        }));
  s.Get("/v1/bill", guarded("/v1/bill", [on_loop](const Principal& who, const Request& req) {
          BillQuery query;
          query.tenant = req.get_param_value("tenant");
          if (query.tenant.empty()) {
            return bad_request("invalid request",
                               Error{"tenant", "missing: add ?tenant=NAME, the tenant billed"});
          }
          for (auto [key, target] : {std::pair{"from", &query.from}, std::pair{"to", &query.to}}) {
            if (!req.has_param(key)) {
              return bad_request("invalid request",
                                 Error{key, fmt::format("missing: add &{}=YYYY-MM-DD (UTC)", key)});
            }
            auto day = parse_utc_date(req.get_param_value(key), key);
            if (!day) return bad_request("invalid request", day.error());
            *target = *day;
          }
          if (query.to < query.from) {
            return bad_request("invalid request",
                               Error{"to", "must not be before from (both days are included)"});
          }
          query.to += 86'400;  // `to` is included: up to its end
          if (req.has_param("by")) {
            auto by = parse_bill_grouping(req.get_param_value("by"));
            if (!by) return bad_request("invalid request", by.error());
            query.by = *by;
          }
          return on_loop(
              [who, query](ControlPlane& p, std::int64_t, Batch&) { return p.bill(who, query); });
        }));

  // --- events ---
  s.Get(
      "/v1/events", guarded("/v1/events", [this](const Principal& who, const Request& req) {
        std::int64_t since = 0;
        int limit = 1000;
        Seconds timeout = 30;
        if (req.has_param("since")) {
          const std::string text = req.get_param_value("since");
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), since);
          if (ec != std::errc() || end != text.data() + text.size() || since < 0) {
            return bad_request("invalid request",
                               Error{"since", "expected an event sequence number >= 0"});
          }
        }
        if (req.has_param("limit")) {
          const std::string text = req.get_param_value("limit");
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
          if (ec != std::errc() || end != text.data() + text.size() || limit < 1 || limit > 10000) {
            return bad_request("invalid request", Error{"limit", "expected 1..10000"});
          }
        }
        if (req.has_param("timeout")) {
          auto parsed = parse_duration(req.get_param_value("timeout"));
          if (!parsed || *parsed > 60) {
            return bad_request("invalid request",
                               Error{"timeout", "expected a duration of at most 60s, e.g. 30s"});
          }
          timeout = *parsed;
        }
        auto visible = [&who](const EventRecord& e) {
          if (who.role == Role::kAdmin) return true;
          auto doc = nlohmann::json::parse(e.document, nullptr, false);
          if (!doc.is_object()) return false;
          if (who.role == Role::kUser) return doc.value("tenant", "") == who.tenant;
          if (doc.value("node", "") == who.node) return true;
          if (auto p = doc.find("placement"); p != doc.end() && p->is_array()) {
            for (const auto& place : *p) {
              if (place.value("node", "") == who.node) return true;
            }
          }
          return false;
        };
        std::int64_t last_seq = since;
        auto events = loop_.events().wait_after(since, limit, std::chrono::seconds(timeout),
                                                visible, last_seq);
        if (!events) return error_reply(503, "unavailable", events.error());
        nlohmann::json out = nlohmann::json::array();
        for (const EventRecord& e : *events) {
          out.push_back({{"seq", e.seq},
                         {"at_ms", e.at_ms},
                         {"kind", e.kind},
                         {"data", nlohmann::json::parse(e.document, nullptr, false)}});
        }
        return Reply{200, {{"events", std::move(out)}, {"last_seq", last_seq}}};
      }));

  s.set_error_handler([](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    const std::string reason =
        res.status == 413 ? "the request body is over the limit of 1 MiB"
                          : fmt::format("no route {} {}; see GET /v1/... in the API reference",
                                        req.method, req.path);
    res.set_content(
        nlohmann::json{
            {"error", status_words(res.status)}, {"field", "request"}, {"reason", reason}}
            .dump(),
        "application/json");
  });
  s.set_exception_handler([](const Request&, Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(R"({"error":"internal error","field":"","reason":"see the server log"})",
                    "application/json");
  });
}

}  // namespace tidepool
