#include "server/plane_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <utility>

#include "core/feasibility.h"
#include "server/job_listing.h"

namespace tidepool {
namespace {

std::unexpected<Refused> job_not_found(JobId id) {
  return refuse(Refusal::kNotFound, Error{"id", fmt::format("no job {}", id)});
}

}  // namespace

Outcome<void> check_admin(const Principal& who) {
  if (who.role == Role::kAdmin) return {};
  return forbidden(
      "role", fmt::format("an admin token is needed; this one is a {} token", role_name(who.role)));
}

PlaneState::PlaneState(ControlPlaneSetup setup, Scheduler scheduler,
                       std::shared_ptr<TokenTable> tokens)
    : setup_(std::move(setup)), scheduler_(std::move(scheduler)), tokens_(std::move(tokens)) {
  for (const NodeSpec& spec : setup_.cluster.nodes) {
    pool_nodes_.emplace(spec.name, NodeId{static_cast<std::uint32_t>(pool_nodes_.size())});
  }
  if (setup_.prewarm) prewarm_.emplace(setup_.prewarm->planner);
}

// --- jobs ---

void PlaneState::set_live(const ServerJob& job, bool live) {
  if (live) {
    live_.insert(job.id);
    if (job.replica_of != JobId{}) live_replicas_[job.replica_of].insert(job.id);
    // A job restored where it runs.
    if (!job.placement.empty()) note_placed(job);
  } else {
    live_.erase(job.id);
    if (const auto replicas = live_replicas_.find(job.replica_of);
        replicas != live_replicas_.end()) {
      replicas->second.erase(job.id);
      if (replicas->second.empty()) live_replicas_.erase(replicas);
    }
  }
}

const std::set<JobId>& PlaneState::live_replicas(JobId service) const {
  static const std::set<JobId> kNone;
  const auto it = live_replicas_.find(service);
  return it == live_replicas_.end() ? kNone : it->second;
}

bool PlaneState::may_see(const Principal& who, const ServerJob& job) const {
  return may_see_job(who, job.spec.tenant, job.ran_on, job.placement);
}

Outcome<const ServerJob*> PlaneState::visible_job(const Principal& who, JobId id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !may_see(who, it->second)) return job_not_found(id);
  return &it->second;
}

Outcome<ServerJob*> PlaneState::visible_job(const Principal& who, JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !may_see(who, it->second)) return job_not_found(id);
  return &it->second;
}

std::vector<std::vector<const ServerJob*>> PlaneState::running_by_node() const {
  std::vector<std::vector<const ServerJob*>> out(pool_nodes_.size());
  for (JobId job_id : live_) {
    const ServerJob& job = jobs_.at(job_id);
    if (job.state != JobState::kRunning) continue;
    for (const TaskPlace& p : job.placement) {
      auto id = pool_node(p.node);
      if (!id) continue;
      std::vector<const ServerJob*>& here = out[id->value];
      if (here.empty() || here.back() != &job) here.push_back(&job);
    }
  }
  return out;
}

namespace {

// Whether the running job has a task on `node`.
bool runs_on(const ServerJob& job, std::string_view node) {
  return std::ranges::any_of(job.placement, [&](const TaskPlace& p) { return p.node == node; });
}

}  // namespace

std::vector<const ServerJob*> PlaneState::running_on(NodeId node) const {
  std::vector<const ServerJob*> out;
  if (node.value >= placed_on_.size()) return out;
  std::vector<JobId>& placed = placed_on_[node.value];
  const std::string& name = setup_.cluster.nodes[node.value].name;
  // Pruned to the jobs that run there now, each once, in id order (as running_by_node lists them).
  std::ranges::sort(placed);
  placed.erase(std::unique(placed.begin(), placed.end()), placed.end());
  std::erase_if(placed, [&](JobId id) {
    const auto it = jobs_.find(id);
    return it == jobs_.end() || it->second.state != JobState::kRunning || !live_.contains(id) ||
           !runs_on(it->second, name);
  });
  out.reserve(placed.size());
  for (JobId id : placed) out.push_back(&jobs_.at(id));
  return out;
}

void PlaneState::note_placed(const ServerJob& job) {
  for (const TaskPlace& p : job.placement) {
    const auto id = pool_node(p.node);
    if (!id) continue;
    if (placed_on_.size() <= id->value) placed_on_.resize(setup_.cluster.nodes.size());
    std::vector<JobId>& placed = placed_on_[id->value];
    if (!placed.empty() && placed.back() == job.id) continue;  // its tasks before on this node
    placed.push_back(job.id);
    // A node whose agent never asks (simulate_unregistered_nodes) is pruned here now and then.
    if (placed.size() >= 64 && std::has_single_bit(placed.size())) (void)running_on(*id);
  }
}

std::vector<std::int64_t> PlaneState::unmet_dependencies(const ServerJob& job) const {
  std::vector<std::int64_t> unmet;
  for (std::int64_t wire : job.spec.after_ok) {
    const auto id = job_id_from_wire(wire);
    auto it = id ? jobs_.find(*id) : jobs_.end();
    if (it == jobs_.end() || it->second.state != JobState::kSucceeded) unmet.push_back(wire);
  }
  return unmet;
}

bool PlaneState::outside_scheduler(const ServerJob& job) const {
  return job.burst || !job.held.empty() || !unmet_dependencies(job).empty();
}

bool PlaneState::in_scheduler(const ServerJob& job) const {
  if (job.spec.service) return false;  // its replicas are, each a job of its own
  if (job.state == JobState::kRunning) return !job.burst;
  return job.state == JobState::kPending && !outside_scheduler(job);
}

// --- the pool ---

std::optional<NodeId> PlaneState::pool_node(std::string_view name) const {
  auto it = pool_nodes_.find(name);
  if (it == pool_nodes_.end()) return std::nullopt;
  return it->second;
}

Result<Job> PlaneState::to_core_job(const ServerJob& server_job, const TenantBook& book) const {
  const JobSpec& spec = server_job.spec;
  auto tenant = book.find_tenant(spec.tenant);
  if (!tenant) {
    std::vector<std::string> names;
    for (int t = 0; t < book.tenant_count(); ++t) {
      names.push_back(book.tenant_name(TenantId{static_cast<std::uint32_t>(t)}));
    }
    return fail("tenant", fmt::format("unknown tenant '{}'; tenants: {}", spec.tenant,
                                      fmt::join(names, ", ")));
  }
  auto queue = book.find_queue(*tenant, spec.queue);
  if (!queue) {
    std::vector<std::string> names;
    for (int q = 0; q < book.queue_count(); ++q) {
      const QueueId id{static_cast<std::uint32_t>(q)};
      if (book.tenant_of(id) == *tenant) names.push_back(book.queue_name(id));
    }
    return fail("queue", fmt::format("tenant '{}' has no queue '{}'; its queues: {}", spec.tenant,
                                     spec.queue, fmt::join(names, ", ")));
  }
  const GpuModelCatalog& models = scheduler_.pool().models();
  auto job = core_job_of(spec, server_job.id, *tenant, *queue,
                         unix_seconds(server_job.submitted_at), models);
  if (!job) return job;
  if (server_job.replica_of != JobId{}) {
    // A service's replica: placed with the service's spread rule, away from its other replicas.
    auto service = jobs_.find(server_job.replica_of);
    if (service == jobs_.end() || !service->second.spec.service) {
      return fail("replica_of", fmt::format("job {} is not a service", server_job.replica_of));
    }
    job->replica_of = ReplicaOf{.service = server_job.replica_of.value,
                                .spread = service->second.spec.service->spread};
  }
  const bool some_node_holds_it = std::ranges::any_of(
      setup_.cluster.nodes,
      [&](const NodeSpec& node) { return fits(node, empty_state(node), job->gang.task); });
  if (!some_node_holds_it) {
    return fail("gpus_per_task", fmt::format("no node of the cluster can ever hold one task ({})",
                                             describe(job->gang.task, models)));
  }
  return job;
}

Result<std::vector<Assignment>> PlaneState::to_assignments(const ServerJob& job) const {
  std::vector<Assignment> out;
  for (const TaskPlace& place : job.placement) {
    auto id = pool_node(place.node);
    if (!id) {
      return fail("placement", fmt::format("node '{}' is no longer in the cluster", place.node));
    }
    GpuSet gpus = 0;
    for (int g : place.gpus) {
      if (g < 0 || g >= setup_.cluster.nodes[id->value].gpu_count) {
        return fail("placement", fmt::format("node '{}' has no GPU {}", place.node, g));
      }
      gpus |= GpuSet{1} << g;
    }
    if (place.mig_start >= 0 && place.gpus.size() != 1) {
      return fail("placement", fmt::format("a MIG instance on node '{}' takes one GPU, got {}",
                                           place.node, place.gpus.size()));
    }
    out.push_back(Assignment{*id, gpus, place.mig_start});
  }
  return out;
}

std::vector<TaskPlace> PlaneState::to_places(const std::vector<Assignment>& assignments) const {
  std::vector<TaskPlace> out;
  out.reserve(assignments.size());
  for (const Assignment& a : assignments) {
    TaskPlace place{setup_.cluster.nodes[a.node.value].name, {}, a.mig_start};
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if (gpu_set_contains(a.gpus, g)) place.gpus.push_back(g);
    }
    out.push_back(std::move(place));
  }
  return out;
}

void PlaneState::withdraw_pending(const ServerJob& job, Instant now, Batch& batch) {
  // Called for a job the scheduler queues: a refusal is a bug, shown and not hidden.
  const JobId core_id = job.id;
  if (auto ok = scheduler_.withdraw(core_id, unix_seconds(now)); !ok) {
    internal_error(fmt::format("job {}: scheduler withdraw", job.id), ok.error(), now, batch);
  }
  if (auto ok = scheduler_.forget(core_id); !ok) {
    internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now, batch);
  }
  forget_prewarm(core_id);
}

std::optional<std::int64_t> PlaneState::attained_gpu_seconds(const ServerJob& job) const {
  if (job.burst || (job.state != JobState::kPending && job.state != JobState::kRunning)) {
    return std::nullopt;
  }
  return scheduler_.attained_gpu_seconds(job.id, unix_seconds(last_pass_));
}

void PlaneState::passed(Instant now) {
  dirty_ = false;
  last_pass_ = now;
}

// --- tokens ---

void PlaneState::store_token(const TokenRecord& token, Batch& batch) {
  tokens_->put(token);
  batch.tokens.push_back(token);
}

void PlaneState::revoke_tokens(const std::vector<std::string>& ids, Batch& batch) {
  for (const std::string& id : ids) {
    if (auto token = tokens_->find(id); token && !token->revoked) {
      token->revoked = true;
      store_token(*token, batch);
    }
  }
}

// --- what a command changed ---

void PlaneState::emit(Batch& batch, Instant now, std::string kind, const nlohmann::json& document) {
  batch.events.push_back(
      EventRecord{++last_event_seq_, unix_ms(now), std::move(kind), document.dump()});
}

void PlaneState::stage(Batch& batch, const ServerJob& job) {
  JobRecord named;
  named.id = wire_job_id(job.id);
  batch.jobs.push_back(std::move(named));
}

void PlaneState::record_job(Batch& batch, const ServerJob& job, Instant now, std::string kind) {
  stage(batch, job);
  nlohmann::json places = nlohmann::json::array();
  for (const TaskPlace& p : job.placement) places.push_back({{"node", p.node}, {"gpus", p.gpus}});
  emit(batch, now, std::move(kind),
       {{"job", job.id},
        {"name", job.spec.name},
        {"tenant", job.spec.tenant},
        {"queue", job.spec.queue},
        {"state", job_state_name(job.state)},
        {"reason", job.transitions.empty() ? "" : job.transitions.back().reason},
        {"placement", std::move(places)}});
}

void PlaneState::seal(Batch& batch) const {
  if (batch.jobs.empty()) return;
  // The last record of each job wins, in the order of their last changes.
  std::set<std::int64_t> seen;
  std::vector<JobRecord> kept;
  kept.reserve(batch.jobs.size());
  for (auto it = batch.jobs.rbegin(); it != batch.jobs.rend(); ++it) {
    if (seen.insert(it->id).second) kept.push_back(std::move(*it));
  }
  std::ranges::reverse(kept);
  for (JobRecord& record : kept) {
    // Named by stage(): one of the plane's jobs.
    const auto id = job_id_from_wire(record.id);
    if (record.document.empty() && id) record = to_record(jobs_.at(*id));
  }
  batch.jobs = std::move(kept);
}

void PlaneState::internal_error(std::string what, const Error& error, Instant now, Batch& batch) {
  ++internal_errors_;
  emit(batch, now, "internal.error", {{"what", std::move(what)}, {"reason", error.message()}});
}

// --- figures ---

void PlaneState::observe_queue_wait(const ServerJob& job, Instant now) {
  // Pending since its submission or its requeue, its last transition.
  const Instant pending_since =
      job.transitions.empty() ? job.submitted_at : job.transitions.back().at;
  queue_waits_[job.spec.tenant].observe(std::chrono::duration<double>(now - pending_since).count());
}

}  // namespace tidepool
