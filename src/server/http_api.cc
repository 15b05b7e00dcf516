#include "server/http_api.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "api/agent_wire.h"
#include "api/api_bodies.h"
#include "api/job_spec.h"
#include "config/duration_text.h"
#include "core/budget.h"
#include "core/split_text.h"
#include "server/http_route.h"
#include "server/plane_state.h"
#include "server/standby_api.h"
#include "server/web/web_assets.h"

namespace tidepool {

// What a route's handler gets: the caller, the request, the path's captures and the query.
struct HttpApi::Call {
  const Principal& who;
  const HttpRequest& req;
  const std::vector<std::string>& captures;
  const QueryParams& query;

  [[nodiscard]] std::string header(std::string_view name) const {
    return std::string(req.field(name));
  }
};

// What a handler that works on the loop returns: the answer now (the request was refused), or
// the command to run on the loop, whose reply is the answer.
using LoopAnswer = std::variant<Reply, ControlLoop::Command>;

struct HttpApi::Route {
  std::string method;
  std::string pattern;                           // match_path's: "/v1/jobs/{}"
  std::string name;                              // in the metrics: "/v1/jobs/{id}"
  std::function<HttpResponse(const Call&)> run;  // may block; empty: see on_loop or events
  bool open = false;                             // /metrics: no token unless configured
  // A route whose work is one command on the loop: it checks the request and hands the command
  // over without waiting, so it runs on the I/O thread and no thread waits for its round.
  std::function<LoopAnswer(const Call&)> on_loop;
};

int http_status(const Reply& reply) {
  if (reply) return reply->done == Done::kCreated ? 201 : 200;
  switch (reply.error().refusal) {
    case Refusal::kInvalid:
      return 400;
    case Refusal::kForbidden:
      return 403;
    case Refusal::kNotFound:
      return 404;
    case Refusal::kConflict:
      return 409;
    case Refusal::kTooMany:
      return 429;
    case Refusal::kUnavailable:
      return 503;
  }
  return 500;
}

nlohmann::json http_body(const Reply& reply) {
  if (reply) return reply->body;
  const Refused& refused = reply.error();
  if (!refused.body.is_null()) return refused.body;
  nlohmann::json body = {
      {"error", refused.error}, {"field", refused.cause.field}, {"reason", refused.cause.reason}};
  if (refused.retry_after_seconds) body["retry_after_seconds"] = *refused.retry_after_seconds;
  return body;
}

namespace {

using Clock = std::chrono::steady_clock;

// GET /v1/jobs/{id}/logs: the runs listed in X-Tidepool-Log-Runs, the latest.
constexpr std::size_t kMaxListedLogRuns = 500;
// GET /v1/jobs/{id}/logs: bytes per reply by default, and at most.
constexpr std::int64_t kDefaultLogReadBytes = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLogReadBytes = std::int64_t{8} << 20;

// Every reply is serialized here: client text it echoes (a path, a field) may be any bytes.
std::string dump(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse to_response(const Reply& reply) {
  HttpResponse res;
  res.status = http_status(reply);
  res.body = reply ? dump(reply->body) : dump(http_body(reply));  // an answer's body uncopied
  // A refusal that says when to try again says it in the header too (RFC 9110 Retry-After).
  if (!reply && reply.error().retry_after_seconds) {
    res.fields.push_back({"Retry-After", std::to_string(*reply.error().retry_after_seconds)});
  }
  return res;
}

std::unexpected<Refused> bad_request(std::string error, const Error& cause) {
  return refuse(Refusal::kInvalid, std::move(error), cause);
}

// The request's body as JSON: by its Content-Type, or by its first character when it has none
// that says (JSON starts with '{' or '['; anything else is read as YAML).
Result<nlohmann::json> request_body(const HttpRequest& req) {
  if (req.body.empty()) return nlohmann::json(nullptr);
  const std::string_view type = req.field("Content-Type");
  BodyFormat format = BodyFormat::kYaml;
  if (type.starts_with("application/json")) {
    format = BodyFormat::kJson;
  } else if (type.find("yaml") == std::string_view::npos) {
    const auto first = req.body.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (req.body[first] == '{' || req.body[first] == '[')) {
      format = BodyFormat::kJson;
    }
  }
  return parse_body(req.body, format);
}

// Parses the body with `read` (one of api_bodies.h's readers).
template <class Read>
auto read_body(const HttpRequest& req, Read read) -> decltype(read(nlohmann::json{})) {
  auto body = request_body(req);
  if (!body) return std::unexpected(body.error());
  return read(*body);
}

// A job id in a path; nullopt for text that names no job.
std::optional<JobId> path_id(const std::string& text) {
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return job_id_from_wire(id);
}

std::unexpected<Refused> no_such_job(const std::string& text) {
  return refuse(Refusal::kNotFound, Error{"id", fmt::format("no job {}", text)});
}

// The query parameter `name` as a whole number in min..max (`expected` says so in words);
// `fallback` when the request has none, an Error when there is no fallback.
Result<std::int64_t> query_integer(const QueryParams& query, const std::string& name,
                                   std::optional<std::int64_t> fallback, std::int64_t min,
                                   std::int64_t max, std::string_view expected) {
  if (!query.has(name)) {
    if (fallback) return *fallback;
    return fail(name, fmt::format("missing: add ?{}=N, {}", name, expected));
  }
  const std::string text = query.get(name);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return fail(name, fmt::format("'{}' is not {}", text, expected));
  }
  return value;
}

// GET /v1/history's parameters: series=a,b (names; none: all), from and to (Unix seconds, or a
// UTC day YYYY-MM-DD; to by default now, from 6 hours before to), step (a duration, 1s..30d).
Result<HistoryQuery> history_query(const QueryParams& q, Instant now) {
  HistoryQuery query;
  constexpr std::int64_t kMostSeconds = std::int64_t{1} << 40;
  const auto time = [&](const char* key, Instant fallback) -> Result<Instant> {
    if (!q.has(key)) return fallback;
    const std::string text = q.get(key);
    if (text.find('-') != std::string::npos) {
      auto day = parse_utc_date(text, key);
      if (!day) return std::unexpected(day.error());
      return instant_from_unix_seconds(*day);
    }
    auto seconds = query_integer(q, key, std::nullopt, 0, kMostSeconds,
                                 "a Unix time in seconds or a UTC day YYYY-MM-DD");
    if (!seconds) return std::unexpected(seconds.error());
    return instant_from_unix_seconds(*seconds);
  };
  auto to = time("to", now);
  if (!to) return std::unexpected(to.error());
  auto from = time("from", *to - std::chrono::hours(6));
  if (!from) return std::unexpected(from.error());
  if (*to < *from) return fail("to", "must not be before from");
  query.from = *from;
  query.to = *to;
  if (q.has("step")) {
    auto step = parse_duration(q.get("step"), 30 * 86'400);
    if (!step || *step < 1) {
      return fail("step",
                  fmt::format("'{}' is not a duration from 1s to 30d, e.g. 5m", q.get("step")));
    }
    query.step = millis_from_seconds(*step);
  }
  const std::string names = q.get("series");
  for (const std::string_view name : split_text(names, ',')) {
    if (!name.empty()) query.names.emplace_back(name);
  }
  return query;
}

// ?task=N of the log routes: which task's log, task 0 when the request names none.
Result<std::int64_t> query_task(const QueryParams& query) {
  return query_integer(query, "task", 0, 0, std::numeric_limits<int>::max(),
                       "a task number (0 or more)");
}

// `task` if job `id` has it; `access` is log_access's answer, with the job's task count.
Result<int> log_task(JobId id, std::int64_t task, const Answer& access) {
  const auto tasks = access.body.at("tasks").get<std::int64_t>();
  if (task < tasks) return static_cast<int>(task);
  return std::unexpected(no_such_task(id, tasks));
}

// The answer to a refused append (JobLogs::append's Error).
HttpResponse log_refusal(const Error& error, std::int64_t size_now) {
  if (error.field == "offset") {
    nlohmann::json body = http_body(refuse(Refusal::kConflict, error));
    body.update(log_conflict_to_json(LogConflict{.size = size_now}));
    HttpResponse res;
    res.status = 409;
    res.body = dump(body);
    return res;
  }
  if (error.field == "bytes")
    return http_error(413, "payload too large", error.field, error.reason);
  spdlog::error("task log: {}", error.message());
  return http_error(500, "internal error", "logs",
                    "the server cannot store the task's log; see the server log");
}

// Whether `who` may see event `e` (users: their tenant's; agents: their node's).
bool visible_to(const Principal& who, const EventRecord& e) {
  if (who.role == Role::kAdmin) return true;
  auto doc = nlohmann::json::parse(e.document, nullptr, false);
  if (!doc.is_object()) return false;
  if (who.role == Role::kUser) return doc.value("tenant", "") == who.tenant;
  if (doc.value("node", "") == who.node) return true;
  if (auto p = doc.find("placement"); p != doc.end() && p->is_array()) {
    for (const auto& place : *p) {
      if (place.is_object() && place.value("node", "") == who.node) return true;
    }
  }
  return false;
}

Reply events_reply(const std::vector<EventRecord>& events, std::int64_t last_seq) {
  nlohmann::json out = nlohmann::json::array();
  for (const EventRecord& e : events) {
    out.push_back({{"seq", e.seq},
                   {"at_ms", e.at_ms},
                   {"kind", e.kind},
                   {"data", nlohmann::json::parse(e.document, nullptr, false)}});
  }
  return answer({{"events", std::move(out)}, {"last_seq", last_seq}});
}

// The dashboard's pages may run only their own scripts and styles and talk only to this server.
constexpr std::string_view kDashboardPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

// A file of the web dashboard (/ is its index.html, /ui/PATH its file PATH). Open to anyone: the
// files hold no data, the routes that answer it need a token. Each answer is revalidated
// (Cache-Control: no-cache) and costs nothing when unchanged (304 on its ETag).
HttpResponse dashboard_file(const HttpRequest& req) {
  const std::string_view path =
      req.path == "/" ? std::string_view("index.html") : std::string_view(req.path).substr(4);
  const WebAsset* asset = find_web_asset(path);
  if (asset == nullptr) {
    return http_error(404, "not found", "request",
                      fmt::format("the dashboard has no file {}", percent_decode(req.path, false)));
  }
  HttpResponse res;
  res.fields = {{"Cache-Control", "no-cache"},
                {"ETag", std::string(asset->etag)},
                {"Content-Security-Policy", std::string(kDashboardPolicy)},
                {"X-Content-Type-Options", "nosniff"},
                {"X-Frame-Options", "DENY"},
                {"Referrer-Policy", "no-referrer"}};
  res.content_type = asset->content_type;
  if (req.field("If-None-Match") == asset->etag) {
    res.status = 304;
    return res;
  }
  res.body = asset->body;
  return res;
}

bool loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

// What on_head hands to handle.
struct Admitted {
  const HttpApi::Route* route = nullptr;
  Principal who;
  std::vector<std::string> captures;
  Clock::time_point start;
};

}  // namespace

// The parked GET /v1/events requests. Each is answered once: by whoever takes it out of
// `parked` (a recheck that found events, its timer, or stop()).
struct HttpApi::LongPolls {
  struct Poll {
    Principal who;
    std::int64_t since = 0;
    int limit = 0;
    HttpResponder responder;
    Clock::time_point start;
  };

  explicit LongPolls(ServerMetrics& m) : metrics(m) {}

  ServerMetrics& metrics;  // its parked-polls gauge follows `parked`
  std::mutex mutex;  // guards what follows but recheck_pending (HTTP threads and the loop's wake)
  bool closed = false;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::shared_ptr<Poll>> parked;
  std::map<std::string, int> per_token;
  std::atomic<bool> recheck_pending{false};
  std::uint64_t listener = 0;

  std::shared_ptr<Poll> take(std::uint64_t id) {
    std::lock_guard lock(mutex);
    auto it = parked.find(id);
    if (it == parked.end()) return nullptr;
    auto poll = std::move(it->second);
    parked.erase(it);
    if (--per_token[poll->who.token_id] <= 0) per_token.erase(poll->who.token_id);
    metrics.set_long_polls(parked.size());
    return poll;
  }
};

HttpApi::HttpApi(ControlLoop& loop, ServerMetrics& metrics, HttpOptions options)
    : loop_(loop),
      metrics_(metrics),
      options_(std::move(options)),
      limiter_(options_.rate_per_second, options_.rate_burst),
      metrics_limiter_(options_.metrics_rate_per_second, options_.metrics_rate_burst),
      polls_(std::make_unique<LongPolls>(metrics)) {
  add_routes();
}

HttpApi::~HttpApi() {
  stop();
  if (polls_->listener != 0) loop_.events().remove_listener(polls_->listener);
}

Result<int> HttpApi::bind() {
  if (options_.tls_cert.empty() != options_.tls_key.empty()) {
    return fail(options_.tls_cert.empty() ? "--tls-cert" : "--tls-key",
                "TLS needs both a certificate and its key");
  }
  auto logs = JobLogs::open(options_.log_dir);
  if (!logs) return std::unexpected(logs.error());
  logs_ = std::move(*logs);
  // The task logs of the jobs that retention removed go with them.
  loop_.set_jobs_removed([logs = logs_.get()](const std::vector<std::int64_t>& jobs) {
    for (const std::int64_t job : jobs) {
      if (auto removed = logs->remove(job); !removed) {
        spdlog::warn("retention: the logs of job {} stay: {}", job, removed.error().message());
      }
    }
  });
  HttpServerOptions o;
  o.host = options_.host;
  o.port = options_.port;
  o.tls_cert = options_.tls_cert;
  o.tls_key = options_.tls_key;
  o.worker_threads = options_.threads;
  o.idle_timeout = options_.idle_timeout;
  o.head_timeout = options_.head_timeout;
  o.body_timeout = options_.body_timeout;
  o.max_header_bytes = options_.max_header_bytes;
  o.max_header_count = options_.max_header_count;
  o.max_body_bytes = options_.max_body_bytes;
  o.max_connections = options_.max_connections;
  o.max_connections_per_peer = options_.max_connections_per_peer;
  server_ = std::make_unique<HttpServer>(
      std::move(o),
      HttpHooks{[this](HttpRequest& req) { return on_head(req); },
                [this](HttpRequest& req, const HttpResponder& res) { handle(req, res); }});
  auto port = server_->bind();
  if (!port) {
    if (port.error().field == "tls_cert") return fail("--tls-cert", port.error().reason);
    return port;
  }
  if (polls_->listener == 0) {
    // A publish wakes the parked long polls: one recheck at a time on a worker.
    polls_->listener = loop_.events().add_listener([this] {
      if (polls_->recheck_pending.exchange(true)) return;
      const bool posted = server_->run_on_worker([this] {
        polls_->recheck_pending = false;
        std::vector<std::uint64_t> ids;
        {
          std::lock_guard lock(polls_->mutex);
          for (const auto& [id, poll] : polls_->parked) ids.push_back(id);
        }
        for (std::uint64_t id : ids) recheck_poll(id, false);
      });
      if (!posted) polls_->recheck_pending = false;
    });
  }
  if (!loopback(options_.host) && options_.tls_cert.empty()) {
    spdlog::warn(
        "listening on {} without TLS: bearer tokens cross the network in clear; set "
        "tls: {{cert: ..., key: ...}} in the server's configuration",
        options_.host);
  }
  return port;
}

void HttpApi::serve() {
  if (server_) server_->serve();
}

void HttpApi::set_self_url(std::string url) {
  std::lock_guard lock(self_url_mutex_);
  self_url_ = std::move(url);
}

void HttpApi::stop() {
  std::vector<std::shared_ptr<LongPolls::Poll>> parked;
  {
    std::lock_guard lock(polls_->mutex);
    polls_->closed = true;
    for (auto& [id, poll] : polls_->parked) parked.push_back(std::move(poll));
    polls_->parked.clear();
    polls_->per_token.clear();
    metrics_.set_long_polls(0);
  }
  for (const auto& poll : parked) {
    poll->responder.send(to_response(events_reply({}, poll->since)));
  }
  if (server_) server_->stop();
}

void HttpApi::recheck_poll(std::uint64_t id, bool expired) {
  std::shared_ptr<LongPolls::Poll> poll;
  {
    std::lock_guard lock(polls_->mutex);
    auto it = polls_->parked.find(id);
    if (it == polls_->parked.end()) return;
    poll = it->second;
  }
  std::int64_t last_seq = poll->since;
  auto events = loop_.events().read_after(
      poll->since, poll->limit, [&](const EventRecord& e) { return visible_to(poll->who, e); },
      last_seq);
  if (events && events->empty() && !expired && !loop_.events().closed()) {
    // Nothing for this caller yet; the events looked at need not be looked at again.
    std::lock_guard lock(polls_->mutex);
    poll->since = last_seq;
    return;
  }
  if (!polls_->take(id)) return;  // answered meanwhile
  const Reply reply = events ? events_reply(*events, last_seq)
                             : Reply(refuse(Refusal::kUnavailable, events.error()));
  HttpResponse res = to_response(reply);
  metrics_.count_request("GET", "/v1/events", res.status, seconds_since(poll->start));
  poll->responder.send(std::move(res));
}

HeadVerdict HttpApi::on_head(HttpRequest& req) {
  const auto start = Clock::now();
  if (req.method == "GET" && req.path == "/healthz") {
    HttpResponse res;
    res.body = R"({"status":"ok"})";
    return HeadVerdict::respond(std::move(res));
  }
  if (req.method == "GET" && (req.path == "/" || req.path.starts_with("/ui/"))) {
    HttpResponse res = dashboard_file(req);
    metrics_.count_request(req.method, req.path == "/" ? "/" : "/ui/{path}", res.status,
                           seconds_since(start));
    return HeadVerdict::respond(std::move(res));
  }
  if (req.method == "GET" && req.path == "/v1/leader") {
    std::lock_guard lock(self_url_mutex_);
    return HeadVerdict::respond(leader_response(self_url_, self_url_));
  }
  if (req.method == "GET" && req.path == "/readyz") {
    const bool ready = loop_.ready();
    HttpResponse res;
    res.status = ready ? 200 : 503;
    res.body = ready ? R"({"status":"ready"})" : R"({"status":"not ready"})";
    return HeadVerdict::respond(std::move(res));
  }
  const Route* route = nullptr;
  std::vector<std::string> captures;
  for (const Route& r : routes_) {
    if (r.method != req.method) continue;
    if (auto match = match_path(r.pattern, req.path)) {
      route = &r;
      captures = std::move(*match);
      break;
    }
  }
  if (route == nullptr) {
    return HeadVerdict::respond(
        http_error(404, "not found", "request",
                   fmt::format("no route {} {}; see GET /v1/... in the API reference", req.method,
                               percent_decode(req.path, false))));
  }
  auto answer = [&](HttpResponse res, std::vector<HttpField> fields) {
    metrics_.count_request(req.method, route->name, res.status, seconds_since(start));
    res.fields = std::move(fields);
    return HeadVerdict::respond(std::move(res));
  };
  if (route->open && !metrics_limiter_.allow("peer:" + req.peer, ControlLoop::now())) {
    metrics_.count_rate_limited();
    return answer(http_error(429, "too many requests", "request",
                             fmt::format("{} is over the /metrics limit of {}/s; retry after a "
                                         "second",
                                         req.peer, options_.metrics_rate_per_second)),
                  {{"Retry-After", "1"}});
  }
  Admitted admitted{route, Principal{}, std::move(captures), start};
  if (!route->open || options_.metrics_token_required) {
    const std::string_view header = req.field("Authorization");
    const std::string secret(bearer_secret(header));
    std::optional<Principal> who;
    if (!secret.empty()) who = loop_.tokens()->authenticate(secret);
    if (!who) {
      return answer(http_error(401, "unauthorized", "Authorization",
                               secret.empty() ? "a bearer token is needed: pass --token, set "
                                                "TIDEPOOL_TOKEN or add token: to the config file"
                                              : "unknown or revoked token"),
                    {{"WWW-Authenticate", "Bearer"}});
    }
    if (!limiter_.allow(who->token_id, ControlLoop::now())) {
      metrics_.count_rate_limited();
      return answer(http_error(429, "too many requests", "Authorization",
                               fmt::format("token {} is over its rate limit of {}/s; retry after "
                                           "a second",
                                           who->token_id, options_.rate_per_second)),
                    {{"Retry-After", "1"}});
    }
    admitted.who = std::move(*who);
  }
  const bool on_loop = static_cast<bool>(route->on_loop);
  req.context = std::move(admitted);
  return on_loop ? HeadVerdict::proceed_without_blocking() : HeadVerdict::proceed();
}

void HttpApi::handle(HttpRequest& req, const HttpResponder& responder) {
  const auto& admitted = std::any_cast<const Admitted&>(req.context);
  const QueryParams query(req.query);
  const Call call{admitted.who, req, admitted.captures, query};
  if (admitted.route->on_loop) {
    // Called on the loop thread, possibly after this front end stopped: it holds nothing of it
    // but the metrics, which outlive both. The reply is serialized on the connection's I/O
    // thread, not on the loop, which answers a whole round's requests at once.
    auto answer = [&metrics = metrics_, responder, name = admitted.route->name, method = req.method,
                   start = admitted.start](Reply reply) {
      responder.send_made([&metrics, name, method, start, reply = std::move(reply)] {
        HttpResponse res = to_response(reply);
        metrics.count_request(method, name, res.status, seconds_since(start));
        return res;
      });
    };
    LoopAnswer prepared = admitted.route->on_loop(call);
    if (Reply* now = std::get_if<Reply>(&prepared)) return answer(std::move(*now));
    return loop_.call_async(std::move(std::get<ControlLoop::Command>(prepared)), std::move(answer));
  }
  if (!admitted.route->run) return events(call, responder);
  HttpResponse res = admitted.route->run(call);
  if (!admitted.route->open) {
    metrics_.count_request(req.method, admitted.route->name, res.status,
                           seconds_since(admitted.start));
  }
  responder.send(std::move(res));
}

void HttpApi::events(const Call& call, const HttpResponder& responder) {
  const auto& admitted = std::any_cast<const Admitted&>(call.req.context);
  auto answer = [&](const Reply& reply) {
    HttpResponse res = to_response(reply);
    metrics_.count_request("GET", "/v1/events", res.status, seconds_since(admitted.start));
    responder.send(std::move(res));
  };
  const QueryParams& q = call.query;
  std::int64_t since = 0;
  int limit = 1000;
  Seconds timeout = 30;
  if (q.has("since")) {
    const std::string text = q.get("since");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), since);
    if (ec != std::errc() || end != text.data() + text.size() || since < 0) {
      return answer(
          bad_request("invalid request", Error{"since", "expected an event sequence number >= 0"}));
    }
  }
  if (q.has("since_ms")) {
    if (q.has("since")) {
      return answer(bad_request("invalid request",
                                Error{"since_ms", "give since (a sequence number) or since_ms"}));
    }
    auto at =
        query_integer(q, "since_ms", std::nullopt, 0, std::numeric_limits<std::int64_t>::max(),
                      "milliseconds since the epoch (UTC)");
    if (!at) return answer(bad_request("invalid request", at.error()));
    auto before = loop_.events().seq_before(instant_from_unix_ms(*at));
    if (!before) return answer(refuse(Refusal::kUnavailable, before.error()));
    since = *before;
  }
  if (q.has("limit")) {
    const std::string text = q.get("limit");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size() || limit < 1 || limit > 10000) {
      return answer(bad_request("invalid request", Error{"limit", "expected 1..10000"}));
    }
  }
  if (q.has("timeout")) {
    auto parsed = parse_duration(q.get("timeout"));
    if (!parsed || *parsed > 60) {
      return answer(bad_request("invalid request",
                                Error{"timeout", "expected a duration of at most 60s, e.g. 30s"}));
    }
    timeout = *parsed;
  }
  const Principal& who = call.who;
  std::int64_t last_seq = since;
  auto events = loop_.events().read_after(
      since, limit, [&](const EventRecord& e) { return visible_to(who, e); }, last_seq);
  if (!events) return answer(refuse(Refusal::kUnavailable, events.error()));
  if (!events->empty() || timeout <= 0 || loop_.events().closed()) {
    return answer(events_reply(*events, last_seq));
  }
  // Nothing yet: park the request (no thread waits) until an event or the timeout.
  std::uint64_t id = 0;
  {
    std::lock_guard lock(polls_->mutex);
    int& mine = polls_->per_token[who.token_id];
    if (polls_->closed || mine >= options_.long_polls_per_token ||
        std::cmp_greater_equal(polls_->parked.size(), options_.max_long_polls)) {
      const bool closed = polls_->closed;
      const bool own = !closed && mine >= options_.long_polls_per_token;
      if (mine == 0) polls_->per_token.erase(who.token_id);  // `mine` is gone from here on
      if (closed) return answer(events_reply({}, last_seq));
      return answer(refuse(
          Refusal::kTooMany,
          Error{"timeout",
                own ? fmt::format("token {} already waits on {} event polls; use fewer at once",
                                  who.token_id, options_.long_polls_per_token)
                    : fmt::format("the server holds {} event polls already; retry shortly",
                                  options_.max_long_polls)}));
    }
    ++mine;
    id = polls_->next_id++;
    polls_->parked.emplace(id, std::make_shared<LongPolls::Poll>(LongPolls::Poll{
                                   who, last_seq, limit, responder, admitted.start}));
    metrics_.set_long_polls(polls_->parked.size());
  }
  server_->run_after(std::chrono::seconds(timeout), [this, id] {
    // The last look may read the store: on a worker, or here if none can take it.
    if (!server_->run_on_worker([this, id] { recheck_poll(id, true); })) recheck_poll(id, true);
  });
  // An event published between the read above and the parking.
  recheck_poll(id, false);
}

void HttpApi::add_routes() {
  using Handler = std::function<Reply(const Call&)>;
  auto json = [this](std::string method, std::string pattern, std::string name, Handler h) {
    routes_.push_back(Route{std::move(method),
                            std::move(pattern),
                            std::move(name),
                            [h = std::move(h)](const Call& c) { return to_response(h(c)); },
                            false,
                            {}});
  };
  // A route whose work is a command on the loop (the handler returns it, or a refusal).
  using LoopHandler = std::function<LoopAnswer(const Call&)>;
  auto loop_json = [this](std::string method, std::string pattern, std::string name,
                          LoopHandler h) {
    routes_.push_back(
        Route{std::move(method), std::move(pattern), std::move(name), {}, false, std::move(h)});
  };
  auto on_loop = [](ControlLoop::Command command) { return LoopAnswer{std::move(command)}; };

  routes_.push_back(Route{"GET",
                          "/metrics",
                          "/metrics",
                          [this](const Call&) {
                            Reply reply = loop_.call([this](ControlPlane& plane, Instant, Batch&) {
                              metrics_.set_figures(plane.figures());
                              return answer(nullptr);
                            });
                            if (!reply) return to_response(reply);
                            HttpResponse res;
                            res.content_type = "text/plain; version=0.0.4; charset=utf-8";
                            res.body = metrics_.render();
                            return res;
                          },
                          true,
                          {}});

  // --- jobs ---
  loop_json("POST", "/v1/jobs", "/v1/jobs", [on_loop](const Call& c) -> LoopAnswer {
    auto spec = read_body(c.req, job_spec_from_json);
    if (!spec) return bad_request("invalid job spec", spec.error());
    return on_loop([who = c.who, spec = std::move(*spec), key = c.header("Idempotency-Key")](
                       ControlPlane& p, Instant now, Batch& b) mutable {
      return p.submit(who, std::move(spec), key, now, b);
    });
  });
  json("GET", "/v1/jobs", "/v1/jobs", [this](const Call& c) -> Reply {
    const QueryParams& q = c.query;
    JobFilter filter{q.get("tenant"), q.get("queue"), q.get("state"), q.get("node")};
    auto limit = query_integer(q, "limit", static_cast<std::int64_t>(kDefaultJobPage), 1,
                               static_cast<std::int64_t>(kMaxJobPage),
                               fmt::format("a page size, 1..{}", kMaxJobPage));
    if (!limit) return bad_request("invalid request", limit.error());
    filter.limit = static_cast<std::size_t>(*limit);
    auto before = query_integer(q, "before", 0, 1, std::numeric_limits<std::int64_t>::max(),
                                "the cursor of the next page (\"next\" of the last reply)");
    if (!before) return bad_request("invalid request", before.error());
    filter.before = *before;
    for (auto [name, bound] :
         {std::pair{"since_ms", &filter.since}, std::pair{"until_ms", &filter.until}}) {
      auto value = query_integer(q, name, 0, 1, std::numeric_limits<std::int64_t>::max(),
                                 "milliseconds since the epoch (UTC)");
      if (!value) return bad_request("invalid request", value.error());
      if (*value > 0) *bound = instant_from_unix_ms(*value);
    }
    // From a snapshot: the listing is filtered and built here, not on the loop.
    auto listing = loop_.job_listing();
    if (!listing) {
      return refuse(Refusal::kUnavailable, Error{"server", "the server is shutting down"});
    }
    return list_jobs(*listing, c.who, filter);
  });
  loop_json("GET", "/v1/jobs/{}", "/v1/jobs/{id}", [on_loop](const Call& c) -> LoopAnswer {
    auto id = path_id(c.captures[0]);
    if (!id) return no_such_job(c.captures[0]);
    return on_loop(
        [who = c.who, id = *id](ControlPlane& p, Instant, Batch&) { return p.get_job(who, id); });
  });
  loop_json("DELETE", "/v1/jobs/{}", "/v1/jobs/{id}", [on_loop](const Call& c) -> LoopAnswer {
    auto id = path_id(c.captures[0]);
    if (!id) return no_such_job(c.captures[0]);
    return on_loop([who = c.who, id = *id](ControlPlane& p, Instant now, Batch& b) {
      return p.cancel(who, id, now, b);
    });
  });
  loop_json("GET", "/v1/jobs/{}/why", "/v1/jobs/{id}/why", [on_loop](const Call& c) -> LoopAnswer {
    auto id = path_id(c.captures[0]);
    if (!id) return no_such_job(c.captures[0]);
    return on_loop([who = c.who, id = *id](ControlPlane& p, Instant now, Batch&) {
      return p.why(who, id, now);
    });
  });
  loop_json("GET", "/v1/jobs/{}/advice", "/v1/jobs/{id}/advice",
            [on_loop](const Call& c) -> LoopAnswer {
              auto id = path_id(c.captures[0]);
              if (!id) return no_such_job(c.captures[0]);
              return on_loop([who = c.who, id = *id](ControlPlane& p, Instant, Batch&) {
                return p.advise(who, id);
              });
            });
  // scontrol's hold, release and requeue: no body.
  using JobAction = Reply (ControlPlane::*)(const Principal&, JobId, Instant, Batch&);
  for (const auto& verb_action : {std::pair{"hold", JobAction{&ControlPlane::hold}},
                                  std::pair{"release", JobAction{&ControlPlane::release}},
                                  std::pair{"requeue", JobAction{&ControlPlane::requeue_job}}}) {
    const auto& [verb, action_of_verb] = verb_action;
    const JobAction action = action_of_verb;  // a variable the lambdas can capture
    loop_json(
        "POST", fmt::format("/v1/jobs/{{}}/{}", verb), fmt::format("/v1/jobs/{{id}}/{}", verb),
        [on_loop, action](const Call& c) -> LoopAnswer {
          auto id = path_id(c.captures[0]);
          if (!id) return no_such_job(c.captures[0]);
          return on_loop([who = c.who, id = *id, action](ControlPlane& p, Instant now, Batch& b) {
            return (p.*action)(who, id, now, b);
          });
        });
  }
  loop_json("PATCH", "/v1/jobs/{}", "/v1/jobs/{id}", [on_loop](const Call& c) -> LoopAnswer {
    auto id = path_id(c.captures[0]);
    if (!id) return no_such_job(c.captures[0]);
    auto update = read_body(c.req, job_update_from_json);
    if (!update) return bad_request("invalid update", update.error());
    return on_loop([who = c.who, id = *id, update = std::move(*update)](ControlPlane& p,
                                                                        Instant now, Batch& b) {
      return p.update_job(who, id, update, now, b);
    });
  });
  loop_json("POST", "/v1/jobs/{}/checkpoint", "/v1/jobs/{id}/checkpoint",
            [on_loop](const Call& c) -> LoopAnswer {
              auto id = path_id(c.captures[0]);
              if (!id) return no_such_job(c.captures[0]);
              auto report = read_body(c.req, checkpoint_report_from_json);
              if (!report) return bad_request("invalid request", report.error());
              return on_loop([who = c.who, id = *id, report = *report](ControlPlane& p, Instant now,
                                                                       Batch& b) {
                return p.report_checkpoint(who, id, report, now, b);
              });
            });
  loop_json(
      "POST", "/v1/jobs/{}/status", "/v1/jobs/{id}/status", [on_loop](const Call& c) -> LoopAnswer {
        auto id = path_id(c.captures[0]);
        if (!id) return no_such_job(c.captures[0]);
        auto report = read_body(c.req, job_status_report_from_json);
        if (!report) return bad_request("invalid request", report.error());
        return on_loop(
            [who = c.who, id = *id, report = *report](ControlPlane& p, Instant now, Batch& b) {
              return p.report_status(who, id, report, now, b);
            });
      });

  // Task logs: access is checked on the loop, the files are read and written here.
  // (Its refusals of the bytes are the HTTP layer's own: 413, 415, 500.)
  routes_.push_back(Route{
      "POST",
      "/v1/jobs/{}/logs",
      "/v1/jobs/{id}/logs",
      [this](const Call& c) {
        auto id = path_id(c.captures[0]);
        if (!id) return to_response(no_such_job(c.captures[0]));
        auto task = query_task(c.query);
        if (!task) return to_response(bad_request("invalid request", task.error()));
        auto offset = query_integer(c.query, "offset", std::nullopt, 0,
                                    std::numeric_limits<std::int64_t>::max(),
                                    "the byte offset in the log where the body starts");
        if (!offset) return to_response(bad_request("invalid request", offset.error()));
        std::optional<std::int64_t> run;
        if (c.query.has("run")) {
          auto parsed =
              query_integer(c.query, "run", std::nullopt, 1, std::numeric_limits<int>::max(),
                            "the job's run the bytes come from (1 or more)");
          if (!parsed) return to_response(bad_request("invalid request", parsed.error()));
          run = *parsed;
        }
        if (c.req.field("Content-Type").starts_with("multipart/form-data")) {
          return http_error(415, "unsupported media type", "Content-Type",
                            "send the bytes as the body itself, e.g. application/octet-stream");
        }
        Reply access = loop_.call([who = c.who, id = *id, task = static_cast<int>(*task), run](
                                      ControlPlane& p, Instant, Batch&) {
          return p.log_access(who, id, true, task, run);
        });
        if (!access) return to_response(access);
        auto in_job = log_task(*id, *task, *access);
        if (!in_job) return to_response(bad_request("invalid request", in_job.error()));
        auto size = logs_->append(wire_job_id(*id), *in_job, run.value_or(0), *offset, c.req.body);
        if (!size) {
          auto now = logs_->read(wire_job_id(*id), *in_job, run.value_or(0), 0, 0);
          return log_refusal(size.error(), now ? now->size : 0);
        }
        return to_response(answer(log_append_reply_to_json(LogAppendReply{
            .job = wire_job_id(*id), .task = *in_job, .run = run.value_or(0), .size = *size})));
      },
      false,
      {}});
  routes_.push_back(Route{
      "GET",
      "/v1/jobs/{}/logs",
      "/v1/jobs/{id}/logs",
      [this](const Call& c) {
        auto id = path_id(c.captures[0]);
        if (!id) return to_response(no_such_job(c.captures[0]));
        auto task = query_task(c.query);
        if (!task) return to_response(bad_request("invalid request", task.error()));
        auto offset =
            query_integer(c.query, "offset", 0, 0, std::numeric_limits<std::int64_t>::max(),
                          "a byte offset (0 or more)");
        if (!offset) return to_response(bad_request("invalid request", offset.error()));
        auto limit = query_integer(c.query, "limit", kDefaultLogReadBytes, 0, kMaxLogReadBytes,
                                   fmt::format("a byte count, 0..{}", kMaxLogReadBytes));
        if (!limit) return to_response(bad_request("invalid request", limit.error()));
        std::optional<std::int64_t> run;
        if (c.query.has("run")) {
          auto parsed =
              query_integer(c.query, "run", std::nullopt, 0, std::numeric_limits<int>::max(),
                            "a run of the job (1 or more; 0: from before runs had "
                            "their own logs)");
          if (!parsed) return to_response(bad_request("invalid request", parsed.error()));
          run = *parsed;
        }
        Reply access = loop_.call([who = c.who, id = *id](ControlPlane& p, Instant, Batch&) {
          return p.log_access(who, id, false);
        });
        if (!access) return to_response(access);
        auto in_job = log_task(*id, *task, *access);
        if (!in_job) return to_response(bad_request("invalid request", in_job.error()));
        auto runs = logs_->runs(wire_job_id(*id), *in_job);
        auto chunk = !runs ? Result<LogChunk>(std::unexpected(runs.error()))
                     : run ? logs_->read(wire_job_id(*id), *in_job, *run, *offset, *limit)
                           : logs_->read_runs(wire_job_id(*id), *in_job, *offset, *limit);
        if (!chunk) {
          spdlog::error("task log: {}", chunk.error().message());
          return http_error(500, "internal error", "logs",
                            "the server cannot read the task's log; see the server log");
        }
        HttpResponse res;
        res.content_type = "text/plain; charset=utf-8";
        res.fields.push_back({"X-Tidepool-Log-Size", std::to_string(chunk->size)});
        // The runs with a log and their sizes, "1:2048,2:512", so that a reader follows a task
        // from one run to the next: the latest kMaxListedLogRuns, so that the head stays small.
        std::string listed;
        const std::size_t skipped =
            runs->size() > kMaxListedLogRuns ? runs->size() - kMaxListedLogRuns : 0;
        for (std::size_t i = skipped; i < runs->size(); ++i) {
          const RunLog& r = (*runs)[i];
          listed += fmt::format("{}{}:{}", listed.empty() ? "" : ",", r.run, r.size);
        }
        res.fields.push_back({"X-Tidepool-Log-Runs", listed});
        res.body = std::move(chunk->bytes);
        return res;
      },
      false,
      {}});

  // --- nodes ---
  loop_json("GET", "/v1/nodes", "/v1/nodes", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.list_nodes(who); });
  });
  loop_json("GET", "/v1/pool", "/v1/pool", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.pool_map(who); });
  });
  loop_json("GET", "/v1/whoami", "/v1/whoami", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.whoami(who); });
  });
  for (const bool drain : {true, false}) {
    const std::string verb = drain ? "drain" : "undrain";
    loop_json("POST", "/v1/nodes/{}/" + verb, "/v1/nodes/{name}/" + verb,
              [on_loop, drain](const Call& c) -> LoopAnswer {
                auto body = read_body(c.req, drain_request_from_json);
                if (!body) return bad_request("invalid request", body.error());
                return on_loop([who = c.who, drain, node = c.captures[0], reason = body->reason](
                                   ControlPlane& p, Instant now, Batch& b) {
                  return p.set_drained(who, node, drain, reason, now, b);
                });
              });
  }
  loop_json("POST", "/v1/nodes/{}/register", "/v1/nodes/{name}/register",
            [on_loop](const Call& c) -> LoopAnswer {
              auto body = read_body(c.req, node_registration_from_json);
              if (!body) return bad_request("invalid request", body.error());
              return on_loop([who = c.who, node = c.captures[0], body = *body](
                                 ControlPlane& p, Instant now, Batch& b) {
                return p.register_node(who, node, body, now, b);
              });
            });
  loop_json("POST", "/v1/nodes/{}/heartbeat", "/v1/nodes/{name}/heartbeat",
            [on_loop](const Call& c) -> LoopAnswer {
              auto body = read_body(c.req, node_heartbeat_from_json);
              if (!body) return bad_request("invalid request", body.error());
              return on_loop([who = c.who, node = c.captures[0], body = *body](
                                 ControlPlane& p, Instant now, Batch& b) {
                return p.heartbeat(who, node, body, now, b);
              });
            });

  // --- tenants, queues, tokens ---
  loop_json("GET", "/v1/tenants", "/v1/tenants", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.list_tenants(who); });
  });
  loop_json("GET", "/v1/tenants/{}", "/v1/tenants/{name}", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who, name = c.captures[0]](ControlPlane& p, Instant, Batch&) {
      return p.get_tenant(who, name);
    });
  });
  loop_json("PUT", "/v1/tenants/{}", "/v1/tenants/{name}", [on_loop](const Call& c) -> LoopAnswer {
    auto update = read_body(c.req, tenant_update_from_json);
    if (!update) return bad_request("invalid tenant", update.error());
    return on_loop([who = c.who, name = c.captures[0], update = *update](ControlPlane& p,
                                                                         Instant now, Batch& b) {
      return p.put_tenant(who, name, update, now, b);
    });
  });
  loop_json("GET", "/v1/services", "/v1/services", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop(
        [who = c.who](ControlPlane& p, Instant now, Batch&) { return p.list_services(who, now); });
  });
  loop_json("GET", "/v1/services/{}", "/v1/services/{id}", [on_loop](const Call& c) -> LoopAnswer {
    auto id = path_id(c.captures[0]);
    if (!id) return no_such_job(c.captures[0]);
    return on_loop([who = c.who, id = *id](ControlPlane& p, Instant now, Batch&) {
      return p.get_service(who, id, now);
    });
  });
  loop_json("GET", "/v1/queues", "/v1/queues", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.list_queues(who); });
  });
  loop_json("POST", "/v1/tokens", "/v1/tokens", [on_loop](const Call& c) -> LoopAnswer {
    auto request = read_body(c.req, token_request_from_json);
    if (!request) return bad_request("invalid request", request.error());
    return on_loop([who = c.who, request = *request](ControlPlane& p, Instant now, Batch& b) {
      return p.create_token(who, request, now, b);
    });
  });
  loop_json("GET", "/v1/tokens", "/v1/tokens", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who](ControlPlane& p, Instant, Batch&) { return p.list_tokens(who); });
  });
  loop_json("DELETE", "/v1/tokens/{}", "/v1/tokens/{id}", [on_loop](const Call& c) -> LoopAnswer {
    return on_loop([who = c.who, id = c.captures[0]](ControlPlane& p, Instant now, Batch& b) {
      return p.revoke_token(who, id, now, b);
    });
  });

  // --- the internal market ---
  loop_json("GET", "/v1/prices", "/v1/prices", [on_loop](const Call&) -> LoopAnswer {
    return on_loop([](ControlPlane& p, Instant now, Batch&) { return p.prices(now); });
  });
  loop_json("GET", "/v1/history", "/v1/history", [on_loop](const Call& c) -> LoopAnswer {
    auto query = history_query(c.query, ControlLoop::now());
    if (!query) return bad_request("invalid request", query.error());
    return on_loop([who = c.who, query = std::move(*query)](ControlPlane& p, Instant, Batch&) {
      return p.history(who, query);
    });
  });
  loop_json("GET", "/v1/bill", "/v1/bill", [on_loop](const Call& c) -> LoopAnswer {
    const QueryParams& q = c.query;
    BillQuery query;
    query.tenant = q.get("tenant");
    if (query.tenant.empty()) {
      return bad_request("invalid request",
                         Error{"tenant", "missing: add ?tenant=NAME, the tenant billed"});
    }
    for (auto [key, target] : {std::pair{"from", &query.from}, std::pair{"to", &query.to}}) {
      if (!q.has(key)) {
        return bad_request("invalid request",
                           Error{key, fmt::format("missing: add &{}=YYYY-MM-DD (UTC)", key)});
      }
      auto day = parse_utc_date(q.get(key), key);
      if (!day) return bad_request("invalid request", day.error());
      *target = *day;
    }
    if (query.to < query.from) {
      return bad_request("invalid request",
                         Error{"to", "must not be before from (both days are included)"});
    }
    query.to += 86'400;  // `to` is included: up to its end
    if (q.has("by")) {
      auto by = parse_bill_grouping(q.get("by"));
      if (!by) return bad_request("invalid request", by.error());
      query.by = *by;
    }
    return on_loop(
        [who = c.who, query](ControlPlane& p, Instant, Batch&) { return p.bill(who, query); });
  });

  // --- administration ---
  // A backup holds every job's spec and the tokens' hashes: admins only. It may be large and take
  // a while (the snapshot is loaded on the loop), so it runs on a worker.
  routes_.push_back(Route{
      "GET",
      "/v1/admin/backup",
      "/v1/admin/backup",
      [this](const Call& c) {
        if (auto admin = check_admin(c.who); !admin) {
          return to_response(Reply(std::unexpected(admin.error())));
        }
        if (!options_.backup) {
          return to_response(refuse(Refusal::kUnavailable,
                                    Error{"backup", "this server was started without backups"}));
        }
        const auto start = Clock::now();
        auto text = options_.backup();
        if (!text) {
          spdlog::error("backup for token {} failed: {}", c.who.token_id, text.error().message());
          return to_response(refuse(Refusal::kUnavailable, text.error()));
        }
        spdlog::info("backup taken for token {}: {} bytes in {:.2f} s", c.who.token_id,
                     text->size(), seconds_since(start));
        HttpResponse res;
        res.content_type = "application/x-ndjson";
        res.body = std::move(*text);
        return res;
      },
      false,
      {}});

  // --- events: a long poll, answered by events() ---
  routes_.push_back(Route{"GET", "/v1/events", "/v1/events", nullptr, false, {}});
}

}  // namespace tidepool
