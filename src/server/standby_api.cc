#include "server/standby_api.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace tidepool {
namespace {

nlohmann::json leader_json(const std::optional<std::string>& leader) {
  return leader ? nlohmann::json(*leader) : nlohmann::json(nullptr);
}

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse res;
  res.status = status;
  res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return res;
}

}  // namespace

HttpResponse leader_response(const std::optional<std::string>& leader, const std::string& self) {
  return json_response(200, {{"leader", leader_json(leader)},
                             {"self", self},
                             {"is_leader", leader.has_value() && *leader == self}});
}

HttpResponse not_the_leader_response(const std::optional<std::string>& leader) {
  const std::string reason =
      leader ? fmt::format("this server is a standby; the leader is at {}", *leader)
             : std::string(
                   "this server is a standby and no server leads yet (an election is "
                   "under way); retry in a second");
  HttpResponse res = json_response(503, {{"error", "not the leader"},
                                         {"field", "server"},
                                         {"reason", reason},
                                         {"leader", leader_json(leader)}});
  res.fields.push_back({"Retry-After", "1"});
  return res;
}

StandbyApi::StandbyApi(HttpServerOptions options, std::string self) : self_(std::move(self)) {
  server_ = std::make_unique<HttpServer>(
      std::move(options),
      HttpHooks{.on_head = [this](HttpRequest& request) { return on_head(request); },
                // Never reached: on_head answers every request.
                .handle =
                    [](HttpRequest&, const HttpResponder& responder) {
                      responder.send(not_the_leader_response(std::nullopt));
                    }});
}

StandbyApi::~StandbyApi() { stop(); }

Result<int> StandbyApi::bind() { return server_->bind(); }

void StandbyApi::serve() { server_->serve(); }

void StandbyApi::stop() { server_->stop(); }

void StandbyApi::set_self(std::string self) {
  std::lock_guard lock(mutex_);
  self_ = std::move(self);
}

void StandbyApi::set_leader(std::optional<std::string> leader) {
  std::lock_guard lock(mutex_);
  leader_ = std::move(leader);
}

HeadVerdict StandbyApi::on_head(const HttpRequest& request) const {
  std::optional<std::string> leader;
  std::string self;
  {
    std::lock_guard lock(mutex_);
    leader = leader_;
    self = self_;
  }
  if (request.method == "GET" && request.path == "/healthz") {
    return HeadVerdict::respond(json_response(200, {{"status", "ok"}}));
  }
  if (request.method == "GET" && request.path == "/readyz") {
    return HeadVerdict::respond(
        json_response(503, {{"status", "standby"}, {"leader", leader_json(leader)}}));
  }
  if (request.method == "GET" && request.path == "/metrics") {
    HttpResponse res;
    res.content_type = "text/plain; version=0.0.4";
    res.body =
        "# HELP tidepool_leader 1 while this server leads the pool (a standby answers 0)\n"
        "# TYPE tidepool_leader gauge\ntidepool_leader 0\n";
    return HeadVerdict::respond(std::move(res));
  }
  if (request.method == "GET" && request.path == "/v1/leader") {
    return HeadVerdict::respond(leader_response(leader, self));
  }
  // A browser opening the web dashboard here is sent to the leader's: the pages talk to the
  // server they came from.
  if (request.method == "GET" && leader &&
      (request.path == "/" || request.path.starts_with("/ui/"))) {
    HttpResponse res = json_response(307, {{"leader", *leader}});
    res.fields = {{"Location", *leader + request.target}};
    return HeadVerdict::respond(std::move(res));
  }
  return HeadVerdict::respond(not_the_leader_response(leader));
}

}  // namespace tidepool
