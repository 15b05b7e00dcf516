// The views of jobs: one job, why it waits, what a submission answers, and the listings' snapshots.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "core/gpu_peak_flops.h"
#include "server/plane_views.h"

namespace tidepool {

double PlaneViews::peak_flops_per_s(const ServerJob& job) const {
  const std::vector<TaskPlace>& places = job.placement.empty() ? job.last_placement : job.placement;
  const ClusterSpec& cluster = state_.setup().cluster;
  const double share = static_cast<double>(task_gpu_milli(job.spec)) / 1000.0;
  double peak = 0;
  for (const TaskPlace& place : places) {
    const PlaneNode* node = nodes_.find(place.node);
    if (node == nullptr) return 0;
    const std::string& model = node->kind == NodeKind::kCluster
                                   ? cluster.models.name(cluster.nodes[node->id.value].model)
                                   : node->reported.gpu_model;
    const auto entry = find_gpu_peak_flops(model);
    if (!entry) return 0;  // a model without a known peak: no MFU rather than a wrong one
    peak +=
        static_cast<double>(entry->flops_per_s) * static_cast<double>(place.gpus.size()) * share;
  }
  return peak;
}

nlohmann::json PlaneViews::step_summary(const ServerJob& job) const {
  const int ranks = job.spec.tasks * std::max(1, job.spec.gpus_per_task);
  return step_summary_json(job.steps, ranks, job.spec.model_flops_per_step, peak_flops_per_s(job));
}

nlohmann::json PlaneViews::job(const ServerJob& job) const {
  nlohmann::json out = server_job_to_json(job);
  if (job.state == JobState::kPending) out["pending"] = pending(job);
  if (auto attained = state_.attained_gpu_seconds(job)) out["attained_gpu_seconds"] = *attained;
  if (!job.steps.empty()) out["step_summary"] = step_summary(job);
  return out;
}

nlohmann::json PlaneViews::pending(const ServerJob& job) const {
  if (job.burst) return burst_pending(job);
  if (!job.held.empty()) {
    return {{"kind", "held"}, {"reason", job.held + "; `tidepool release` lets it run"}};
  }
  if (auto unmet = state_.unmet_dependencies(job); !unmet.empty()) {
    return dependency_pending(unmet);
  }
  const PendingReason* reason = state_.scheduler().reason(job.id);
  const PendingKind kind = reason ? reason->kind : PendingKind::kNotConsidered;
  nlohmann::json out = {
      {"kind", pending_kind_name(kind)},
      {"reason", kind == PendingKind::kNotConsidered
                     ? std::string("submitted; the next scheduling pass considers it")
                     : std::string(reason->message())}};
  if (auto refused = bursts_.refusals().find(job.id); refused != bursts_.refusals().end()) {
    out["burst"] = "not rented: " + refused->second;
  }
  return out;
}

nlohmann::json PlaneViews::dependency_pending(const std::vector<std::int64_t>& unmet) const {
  std::vector<std::string> named;
  for (std::int64_t id : unmet) {
    const auto job_id = job_id_from_wire(id);
    auto it = job_id ? state_.jobs().find(*job_id) : state_.jobs().end();
    named.push_back(
        fmt::format("job {} ({})", id,
                    it == state_.jobs().end() ? "unknown" : job_state_name(it->second.state)));
  }
  return {{"kind", "dependency"},
          {"reason", fmt::format("runs after {} succeed{} (after_ok)", fmt::join(named, ", "),
                                 named.size() == 1 ? "s" : "")},
          {"after", unmet}};
}

nlohmann::json PlaneViews::burst_pending(const ServerJob& job) const {
  const BurstRun& run = *job.burst;
  int up = 0;
  for (const std::string& node : run.nodes) {
    const PlaneNode* rented = nodes_.find(node);
    if (rented != nullptr && rented->kind == NodeKind::kRented && rented->registered_at != kNotYet)
      ++up;
  }
  return {{"kind", "burst"},
          {"reason", fmt::format("waiting for rented capacity: offer {} from provider {}, {} of {} "
                                 "node(s) registered",
                                 run.offer, run.provider, up, run.nodes.size())}};
}

nlohmann::json PlaneViews::submitted(const ServerJob& job) const {
  nlohmann::json out = server_job_to_json(job);
  if (job.array_job == job.id) {
    // The array's jobs have ids in a row from its first.
    nlohmann::json ids = nlohmann::json::array();
    const auto& jobs = state_.jobs();
    for (auto it = jobs.find(job.id); it != jobs.end() && it->second.array_job == job.id; ++it) {
      ids.push_back(it->first);
    }
    out["array"] = {{"job", job.id}, {"jobs", std::move(ids)}};
  }
  return out;
}

nlohmann::json PlaneViews::why(const Principal& who, const ServerJob& job, Instant now) const {
  const Scheduler& scheduler = state_.scheduler();
  nlohmann::json out = {{"id", job.id}, {"state", job_state_name(job.state)}};
  if (job.state == JobState::kPending) {
    const JobId core_id = job.id;
    const nlohmann::json reason = pending(job);
    out["kind"] = reason["kind"];
    out["reason"] = reason["reason"];
    nlohmann::json waited = nlohmann::json::object();
    if (const PendingSeconds* closed = scheduler.pending_seconds(core_id)) {
      PendingSeconds seconds = *closed;
      // The current reason's time so far.
      const PendingReason* current = scheduler.reason(core_id);
      if (auto since = scheduler.reason_since(core_id); since && current) {
        seconds[static_cast<std::size_t>(current->kind)] +=
            std::max<Seconds>(0, unix_seconds(now) - *since);
      }
      for (int k = 0; k < kPendingKinds; ++k) {
        if (seconds[k] > 0) waited[pending_kind_name(static_cast<PendingKind>(k))] = seconds[k];
      }
    }
    out["waited_seconds"] = std::move(waited);
    out["pending_seconds"] = whole_seconds(now - job.transitions.back().at);
    if (auto place = scheduler.lane_place(core_id, unix_seconds(now)); place && !job.burst) {
      // Only the jobs ahead that the caller may see are named (one lane may hold several
      // tenants' jobs under a pool-wide order).
      nlohmann::json ahead = nlohmann::json::array();
      int hidden = 0;
      for (JobId other : place->ahead) {
        auto it = state_.jobs().find(other);
        if (it != state_.jobs().end() && state_.may_see(who, it->second)) {
          ahead.push_back(other);
        } else {
          ++hidden;
        }
      }
      out["lane"] = {{"position", place->position},
                     {"pending", place->lane_size},
                     {"order", place->order},
                     {"promoted", place->promoted},
                     {"attained_gpu_seconds", place->attained_gpu_seconds},
                     {"rank", place->rank},
                     {"ahead", std::move(ahead)},
                     {"ahead_hidden", hidden}};
      if (auto start = scheduler.estimated_start(core_id, unix_seconds(now))) {
        out["estimated_start_ms"] = *start * 1000;
      }
    }
  } else if (job.state == JobState::kRunning) {
    std::vector<std::string> nodes;
    for (const TaskPlace& p : job.placement) {
      if (nodes.empty() || nodes.back() != p.node) nodes.push_back(p.node);
    }
    out["reason"] = fmt::format("running since {} s on {}", whole_seconds(now - job.started_at),
                                fmt::join(nodes, ", "));
  } else {
    out["reason"] = job.message;
  }
  return out;
}

std::shared_ptr<const JobListing> PlaneViews::listing(
    std::map<JobId, std::shared_ptr<const ListedJob>>& cache, const std::set<JobId>& changed,
    std::int64_t version) const {
  const auto& jobs = state_.jobs();
  const auto refresh = [&](const ServerJob& job) {
    cache[job.id] = std::make_shared<const ListedJob>(listed_job(job));
  };
  if (cache.empty()) {
    for (const auto& [id, job] : jobs) refresh(job);
  } else {
    for (JobId id : changed) {
      if (auto it = jobs.find(id); it != jobs.end()) {
        refresh(it->second);
      } else {
        cache.erase(id);  // removed (retention)
      }
    }
  }
  auto listing = std::make_shared<JobListing>();
  listing->version = version;
  listing->jobs.reserve(cache.size());
  for (const auto& [id, entry] : cache) listing->jobs.push_back(entry);
  for (JobId id : state_.live()) {
    const ServerJob& job = jobs.at(id);
    if (job.state == JobState::kPending) listing->pending.emplace(id, pending(job));
    if (auto attained = state_.attained_gpu_seconds(job)) listing->attained.emplace(id, *attained);
  }
  const TenantBook& book = state_.scheduler().book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    std::set<std::string>& queues = listing->queues_of_tenant[book.tenant_name(tenant)];
    for (const QueueId q : book.queues_of(tenant)) queues.insert(book.queue_name(q));
  }
  for (std::size_t n = 0; n < nodes_.pool_size(); ++n) {
    listing->nodes.insert(nodes_.pool_node(NodeId{static_cast<std::uint32_t>(n)}).name);
  }
  for (const PlaneNode* rented : nodes_.rented()) listing->nodes.insert(rented->name);
  return listing;
}

}  // namespace tidepool
