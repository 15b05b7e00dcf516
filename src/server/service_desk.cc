#include "server/service_desk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/cost_first.h"

namespace tidepool {

namespace {

const ServiceSpec& spec_of(const ServerJob& service) { return *service.spec.service; }

nlohmann::json figures_json(const ReplicaFigures& f) {
  nlohmann::json out = nlohmann::json::object();
  const auto put = [&out](const char* key, const std::optional<std::int64_t>& value) {
    if (value) out[key] = *value;
  };
  put("requests_waiting_milli", f.requests_waiting_milli);
  put("requests_in_flight_milli", f.requests_in_flight_milli);
  put("requests_per_s_milli", f.requests_per_s_milli);
  put("mean_latency_ms", f.mean_latency_ms);
  put("p95_latency_ms", f.p95_latency_ms);
  put("mean_queue_time_ms", f.mean_queue_time_ms);
  put("mean_concurrency_milli", f.mean_concurrency_milli);
  return out;
}

// The node a one-task replica runs on; empty while it does not run.
std::string node_of(const ServerJob& replica) {
  return replica.placement.empty() ? std::string() : replica.placement.front().node;
}

}  // namespace

std::string ServiceDesk::address_of(const std::string& node) const {
  if (const PlaneNode* placed = nodes_.find(node);
      placed != nullptr && !placed->reported.address.empty()) {
    return placed->reported.address;
  }
  return node;
}

void ServiceDesk::note_failures(const ServerJob& service, Service& kept,
                                const std::vector<JobId>& live, Instant now, Batch& batch) {
  for (JobId id : kept.seen) {
    if (std::ranges::find(live, id) != live.end()) continue;
    const ServerJob& gone = state_.jobs().at(id);
    if (gone.state != JobState::kFailed) continue;
    ++kept.failures;
    kept.failed_at = now;
    const Millis wait = std::min<Millis>(
        kMaxReplicaBackoff, std::chrono::seconds{std::int64_t{1} << std::min(kept.failures, 16)});
    kept.retry_at = now + wait;
    state_.emit(batch, now, "service.backoff",
                {{"job", service.id},
                 {"replica", id},
                 {"failures", kept.failures},
                 {"reason", fmt::format("replica {} failed ({}); {} in a row: the next replica in "
                                        "{} s",
                                        id, gone.message, kept.failures, wait.count() / 1000)}});
  }
  kept.seen = live;
}

void ServiceDesk::adopt(const ServerJob& service) {
  if (!service.spec.service || is_final(service.state)) return;
  services_.try_emplace(service.id, Service{.scaler = Autoscaler(spec_of(service).scaler),
                                            .decision = std::nullopt,
                                            .decided_at = kNotYet,
                                            .model_choice = std::nullopt,
                                            .seen = {},
                                            .failures = 0,
                                            .retry_at = kNotYet,
                                            .failed_at = kNotYet});
}

std::vector<JobId> ServiceDesk::replicas_of(JobId service) const {
  const std::set<JobId>& replicas = state_.live_replicas(service);
  return {replicas.begin(), replicas.end()};
}

ReplicaPhase ServiceDesk::phase_of(const ServerJob& replica, Instant now) const {
  if (replica.state != JobState::kRunning) return ReplicaPhase::kPending;
  if (replica.draining_since != kNotYet) return ReplicaPhase::kDraining;
  if (auto it = figures_.find(replica.id);
      it != figures_.end() && it->second.run == replica.starts) {
    return ReplicaPhase::kReady;
  }
  const auto service = state_.jobs().find(replica.replica_of);
  const Seconds startup = service == state_.jobs().end() ? 0 : spec_of(service->second).scaler.lead;
  return now - replica.started_at >= std::chrono::seconds{startup} ? ReplicaPhase::kReady
                                                                   : ReplicaPhase::kStarting;
}

const ReplicaFigures* ServiceDesk::fresh_figures(const ServerJob& replica, Instant now) const {
  auto it = figures_.find(replica.id);
  if (it == figures_.end() || it->second.run != replica.starts) return nullptr;
  if (now - it->second.at > kFreshFigures) return nullptr;
  return &it->second.figures;
}

std::optional<Observation> ServiceDesk::observe(const ServerJob& service,
                                                const std::vector<JobId>& replicas,
                                                Instant now) const {
  const ScaleMetric metric = spec_of(service).scaler.metric;
  int ready = 0;
  int reporting = 0;
  std::int64_t sum = 0;
  // p95: weighted by the request rate, or the highest.
  double weighted_p95 = 0;
  double weight = 0;
  std::optional<std::int64_t> highest_p95;
  // The load for the queueing model: known when every reporting replica gives it.
  bool load_known = true;
  std::int64_t rate_sum = 0;
  double weighted_service_ms = 0;
  for (JobId id : replicas) {
    const ServerJob& replica = state_.jobs().at(id);
    if (phase_of(replica, now) != ReplicaPhase::kReady) continue;
    ++ready;
    const ReplicaFigures* f = fresh_figures(replica, now);
    if (f == nullptr) continue;
    ++reporting;
    switch (metric) {
      case ScaleMetric::kQueuePerReplica:
        sum += f->requests_waiting_milli.value_or(0);
        break;
      case ScaleMetric::kConcurrencyPerReplica:
        sum += f->requests_in_flight_milli ? *f->requests_in_flight_milli
                                           : f->mean_concurrency_milli.value_or(0);
        break;
      case ScaleMetric::kP95LatencyMs:
        if (f->p95_latency_ms) {
          highest_p95 = std::max(highest_p95.value_or(0), *f->p95_latency_ms);
          if (f->requests_per_s_milli && *f->requests_per_s_milli > 0) {
            weighted_p95 += static_cast<double>(*f->p95_latency_ms) *
                            static_cast<double>(*f->requests_per_s_milli);
            weight += static_cast<double>(*f->requests_per_s_milli);
          }
        }
        if (f->requests_per_s_milli && f->mean_latency_ms) {
          rate_sum += *f->requests_per_s_milli;
          const std::int64_t service_ms =
              std::max<std::int64_t>(0, *f->mean_latency_ms - f->mean_queue_time_ms.value_or(0));
          weighted_service_ms +=
              static_cast<double>(service_ms) * static_cast<double>(*f->requests_per_s_milli);
        } else {
          load_known = false;
        }
        break;
    }
  }
  if (reporting == 0) return std::nullopt;
  Observation o{.at = unix_seconds(now),
                .ready_replicas = ready,
                .value = sum,
                .arrivals_milli_rps = std::nullopt,
                .service_us = std::nullopt};
  if (metric == ScaleMetric::kP95LatencyMs) {
    o.value = weight > 0 ? std::llround(weighted_p95 / weight) : highest_p95.value_or(0);
    if (load_known && rate_sum > 0) {
      o.arrivals_milli_rps = rate_sum;
      o.service_us = std::max<std::int64_t>(
          1, std::llround(weighted_service_ms * 1000.0 / static_cast<double>(rate_sum)));
    }
  }
  return o;
}

void ServiceDesk::tick(Instant now, Batch& batch) {
  if (services_.empty() && figures_.empty()) return;
  // Figures of replicas that ended are of no use any more.
  std::erase_if(figures_, [&](const auto& entry) { return !state_.live().contains(entry.first); });
  for (auto& [id, service] : services_) {
    ServerJob& job = state_.jobs().at(id);
    const ServiceSpec& spec = spec_of(job);
    std::vector<JobId> replicas;
    for (JobId r : replicas_of(id)) {
      ServerJob& replica = state_.jobs().at(r);
      // A draining replica stops once its drain is over, or at once if it no longer runs (its
      // node failed and it was queued again).
      if (replica.draining_since != kNotYet &&
          (replica.state != JobState::kRunning ||
           now - replica.draining_since >= std::chrono::seconds{spec.drain})) {
        jobs_.end_job(replica, JobState::kCancelled,
                      fmt::format("drained: service {} scaled down", id), now, batch);
        figures_.erase(r);
        continue;
      }
      replicas.push_back(r);
    }
    note_failures(job, service, replicas, now, batch);
    if (auto observation = observe(job, replicas, now)) service.scaler.observe(*observation);
    std::vector<ReplicaView> views;
    for (JobId r : replicas) {
      const ServerJob& replica = state_.jobs().at(r);
      views.push_back({.id = r.value,
                       .phase = phase_of(replica, now),
                       .since = unix_seconds(replica.submitted_at)});
      // A replica that started after the last failure and is ready ends the back-off.
      if (views.back().phase == ReplicaPhase::kReady && replica.started_at > service.failed_at) {
        service.failures = 0;
      }
    }
    const int current = live_replicas(views);
    ScaleDecision decision = service.scaler.decide(unix_seconds(now), current);
    // An event when the count wanted changes (not every round that a replica is still missing,
    // as while a failed one's back-off runs).
    const int before = service.decision ? service.decision->wanted : current;
    if (decision.wanted != before) {
      state_.emit(batch, now, "service.scaled",
                  {{"job", id},
                   {"from", current},
                   {"wanted", decision.wanted},
                   {"panic", decision.panic},
                   {"reason", decision.reason}});
    }
    const ReplicaPlan plan = plan_replicas(views, decision.wanted);
    service.decision = std::move(decision);
    service.decided_at = now;
    apply(job, service, std::move(replicas), plan, now, batch);
  }
}

void ServiceDesk::placed(Instant now, Batch& batch) {
  if (services_.empty()) return;
  std::vector<JobId> replicas;
  for (const auto& [service, _] : services_) {
    for (JobId id : state_.live_replicas(service)) {
      const ServerJob& job = state_.jobs().at(id);
      if (job.state == JobState::kRunning && job.replica_port == 0) replicas.push_back(id);
    }
  }
  std::ranges::sort(replicas);
  for (JobId id : replicas) ensure_port(state_.jobs().at(id), now, batch);
}

std::optional<ServiceDesk::ModelChoice> ServiceDesk::choose_model(const ServerJob& service) const {
  const ServiceSpec& spec = spec_of(service);
  if (spec.models.empty()) return std::nullopt;
  const Pool& pool = state_.scheduler().pool();
  auto core = state_.to_core_job(service, state_.scheduler().book());
  if (!core) return ModelChoice{.model = "", .reason = core.error().message()};
  const TaskShape& shape = core->gang.task;
  const std::int64_t milli_gpus =
      std::int64_t{service.spec.gpus_per_task} * task_gpu_milli(service.spec);
  const ServerMarket* market = clerk_.market();
  std::vector<ModelOffer> offers;
  for (const auto& [name, figures] : spec.models) {
    const auto model = pool.models().find(name);
    if (!model || !shape.models.accepts(*model)) continue;
    // Room: the tenant's quota admits one more replica of the model now, and a node holds it.
    const Scheduler& scheduler = state_.scheduler();
    bool room = !scheduler.config().quotas ||
                scheduler.book().admit(core->tenant, *model, milli_gpus).admitted();
    bool placed = false;
    for (int n = 0; n < pool.node_count() && room && !placed; ++n) {
      const NodeId node{static_cast<std::uint32_t>(n)};
      placed = pool.spec(node).model == *model && fits(pool.spec(node), pool.state(node), shape);
    }
    room = room && placed;
    offers.push_back({.model = *model,
                      .name = name,
                      .replica_milli_gpus = std::max<std::int64_t>(milli_gpus, 1),
                      .throughput_milli_rps = figures.throughput_milli_rps,
                      .p95_latency_ms = figures.p95_latency_ms,
                      .price_per_gpu_hour =
                          market != nullptr ? market->desk().meter().price(*model).standard_per_hour
                                            : Micros{kMicrosPerUnit},
                      .has_room = room});
  }
  const std::int64_t target = spec.scaler.metric == ScaleMetric::kP95LatencyMs
                                  ? spec.scaler.target
                                  : std::numeric_limits<std::int64_t>::max();
  std::string refused;
  auto choice = cheapest_model(offers, target, &refused);
  if (!choice) {
    return ModelChoice{.model = "",
                       .reason = "no declared model has room and meets the target (" + refused +
                                 "): any of the service's models"};
  }
  return ModelChoice{.model = pool.models().name(choice->model), .reason = choice->reason};
}

void ServiceDesk::apply(ServerJob& service, Service& kept, std::vector<JobId> replicas,
                        const ReplicaPlan& plan, Instant now, Batch& batch) {
  // After a failed replica, none is added before the back-off's time.
  const int add = kept.failures > 0 && now < kept.retry_at ? 0 : plan.add;
  for (int i = 0; i < add; ++i) {
    std::optional<ModelChoice> choice = choose_model(service);
    auto added = jobs_.submit_replica(
        service, choice && !choice->model.empty() ? choice->model : std::string(), now, batch);
    if (choice) kept.model_choice = std::move(choice);
    if (!added) {
      state_.emit(batch, now, "service.error",
                  {{"job", service.id},
                   {"reason", fmt::format("a new replica was refused: {}: {}",
                                          added.error().cause.field, added.error().cause.reason)}});
      break;
    }
    replicas.push_back((*added)->id);
    kept.seen.push_back((*added)->id);
  }
  const auto end = [&](std::uint32_t id, const char* why) {
    ServerJob& replica = state_.jobs().at(JobId{id});
    jobs_.end_job(replica, JobState::kCancelled,
                  fmt::format("{}: service {} scaled down", why, service.id), now, batch);
    figures_.erase(replica.id);
  };
  for (std::uint32_t id : plan.withdraw) end(id, "withdrawn before it started");
  for (std::uint32_t id : plan.stop) end(id, "stopped before it served");
  for (std::uint32_t id : plan.drain) {
    ServerJob& replica = state_.jobs().at(JobId{id});
    replica.draining_since = now;
    state_.record_job(batch, replica, now, "replica.draining");
  }
}

void ServiceDesk::ensure_port(ServerJob& replica, Instant now, Batch& batch) {
  if (replica.replica_port != 0 || replica.state != JobState::kRunning) return;
  auto service = state_.jobs().find(replica.replica_of);
  if (service == state_.jobs().end() || !service->second.spec.service) return;
  const std::optional<int> first = spec_of(service->second).metrics_port;
  if (!first) return;
  const std::string address = address_of(node_of(replica));
  std::set<int> taken;
  for (JobId id : state_.live()) {
    const ServerJob& other = state_.jobs().at(id);
    if (other.id != replica.id && other.replica_of != JobId{} &&
        other.state == JobState::kRunning && address_of(node_of(other)) == address) {
      taken.insert(other.replica_port);
    }
  }
  int port = *first;
  while (taken.contains(port) && port < 65'535) ++port;
  replica.replica_port = port;
  state_.record_job(batch, replica, now, "replica.port");
}

std::optional<ReplicaAssignment> ServiceDesk::replica_assignment(ServerJob& job, Instant now,
                                                                 Batch& batch) {
  if (job.replica_of == JobId{}) return std::nullopt;
  auto service = state_.jobs().find(job.replica_of);
  if (service == state_.jobs().end() || !service->second.spec.service) return std::nullopt;
  ensure_port(job, now, batch);
  const ServiceSpec& spec = spec_of(service->second);
  ReplicaAssignment out;
  out.service = wire_job_id(job.replica_of);
  out.port = spec.metrics_file.empty() ? job.replica_port : 0;
  out.metrics_file = spec.metrics_file;
  out.metrics_preset = spec.metrics_preset;
  for (const auto& [key, value] : spec.metric_names) out.metric_names.emplace(key, value);
  return out;
}

void ServiceDesk::note_figures(const std::string& node, const std::vector<ReplicaReport>& reports,
                               Instant now) {
  for (const ReplicaReport& report : reports) {
    const auto id = job_id_from_wire(report.job);
    if (!id) continue;
    auto it = state_.jobs().find(*id);
    if (it == state_.jobs().end()) continue;
    const ServerJob& replica = it->second;
    if (replica.replica_of == JobId{} || replica.state != JobState::kRunning ||
        replica.starts != report.run || node_of(replica) != node) {
      continue;
    }
    figures_[*id] = Reported{.run = report.run, .at = now, .figures = report.figures};
  }
}

void ServiceDesk::ended(const ServerJob& service, Instant now, Batch& batch) {
  const std::vector<JobId> replicas = replicas_of(service.id);
  for (JobId r : replicas) {
    jobs_.end_job(state_.jobs().at(r), JobState::kCancelled,
                  fmt::format("its service {} ended: {}", service.id, service.message), now, batch);
    figures_.erase(r);
  }
  services_.erase(service.id);
}

std::optional<Instant> ServiceDesk::next_wakeup(Instant now) const {
  if (services_.empty()) return std::nullopt;
  return now + std::chrono::seconds{1};
}

nlohmann::json ServiceDesk::view(const ServerJob& service, Instant now) const {
  const ServiceSpec& spec = spec_of(service);
  nlohmann::json replicas = nlohmann::json::array();
  nlohmann::json endpoints = nlohmann::json::array();
  for (JobId id : replicas_of(service.id)) {
    const ServerJob& replica = state_.jobs().at(id);
    const ReplicaPhase phase = phase_of(replica, now);
    const std::string node = node_of(replica);
    const ReplicaFigures* figures = fresh_figures(replica, now);
    replicas.push_back(
        {{"job", id},
         {"phase", replica_phase_name(phase)},
         {"node", node},
         {"port", replica.replica_port},
         {"since_ms",
          unix_ms(replica.state == JobState::kRunning ? replica.started_at : replica.submitted_at)},
         {"figures", figures != nullptr ? figures_json(*figures) : nlohmann::json(nullptr)}});
    if (phase == ReplicaPhase::kReady && replica.replica_port > 0) {
      const std::string address = address_of(node);
      endpoints.push_back({{"job", id},
                           {"node", node},
                           {"url", fmt::format("http://{}:{}", address, replica.replica_port)}});
    }
  }
  nlohmann::json decision = nullptr;
  if (auto it = services_.find(service.id); it != services_.end() && it->second.decision) {
    const ScaleDecision& d = *it->second.decision;
    decision = {{"wanted", d.wanted},
                {"panic", d.panic},
                {"reason", d.reason},
                {"at_ms", unix_ms(it->second.decided_at)}};
  }
  nlohmann::json model_choice = nullptr;
  if (auto it = services_.find(service.id); it != services_.end() && it->second.model_choice) {
    model_choice = {{"model", it->second.model_choice->model},
                    {"reason", it->second.model_choice->reason}};
  }
  const AutoscalerSpec& scaler = spec.scaler;
  return {{"service", service.id},
          {"name", service.spec.name},
          {"tenant", service.spec.tenant},
          {"state", job_state_name(service.state)},
          {"min_replicas", scaler.min_replicas},
          {"max_replicas", scaler.max_replicas},
          {"target", {{"metric", scale_metric_name(scaler.metric)}, {"value", scaler.target}}},
          {"spread", spread_level_name(spec.spread.level)},
          {"max_per_node", spec.spread.max_per_node},
          {"wanted", decision.is_null() ? nlohmann::json(nullptr) : decision["wanted"]},
          {"decision", decision},
          {"replicas", std::move(replicas)},
          {"endpoints", std::move(endpoints)},
          {"model_choice", model_choice}};
}

}  // namespace tidepool
