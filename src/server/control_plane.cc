// The control plane: creation from the store, jobs and scheduling. Nodes, tenants, queues and
// tokens are in control_plane_admin.cc.
#include "server/control_plane.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <set>
#include <utility>

#include "core/duration_format.h"
#include "core/feasibility.h"

namespace tidepool {
namespace {

std::unexpected<Refused> not_found(std::int64_t id) {
  return refuse(Refusal::kNotFound, Error{"id", fmt::format("no job {}", id)});
}

}  // namespace

ControlPlane::ControlPlane(ControlPlaneSetup setup, Scheduler scheduler)
    : setup_(std::move(setup)), scheduler_(std::move(scheduler)), telemetry_(setup_.idle_gpu) {
  for (const NodeSpec& spec : setup_.cluster.nodes) {
    node_ids_.emplace(spec.name, NodeId{static_cast<std::uint32_t>(nodes_.size())});
    NodeInfo info;
    info.name = spec.name;
    nodes_.push_back(std::move(info));
  }
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(ControlPlaneSetup setup,
                                                           const Snapshot& snapshot,
                                                           std::int64_t now_ms, Batch& repairs,
                                                           std::shared_ptr<TokenTable> tokens) {
  std::map<std::string, TenantUpdate> overrides;
  for (const KeyedRecord& setting : snapshot.settings) {
    constexpr std::string_view kPrefix = "tenant/";
    if (!setting.key.starts_with(kPrefix)) continue;
    auto value = nlohmann::json::parse(setting.document, nullptr, false);
    auto update =
        value.is_discarded() ? fail("document", "not valid JSON") : tenant_update_from_json(value);
    if (!update) {
      return fail("settings " + setting.key, update.error().message());
    }
    overrides.emplace(setting.key.substr(kPrefix.size()), std::move(*update));
  }
  auto tenants = apply_overrides(setup.tenants, overrides, setup.cluster.models);
  if (!tenants) return std::unexpected(tenants.error());
  if (setup.market) {
    // Rented GPUs are charged by model: the offers' models join the catalog (with no node).
    for (const BurstOfferSpec& offer : setup.market->burst_offers) {
      if (auto model = setup.cluster.models.intern(offer.model); !model) {
        return fail("market burst",
                    fmt::format("offer {}: {}", offer.name, model.error().message()));
      }
    }
    if (setup.market->burst_threshold) {
      for (const BurstProviderSpec& provider : setup.market->burst_providers) {
        if (provider.hook.empty()) {
          return fail("market burst.providers." + provider.name + ".hook",
                      "the server rents capacity by running the provider's hook; give the path of "
                      "an executable (or remove burst.threshold to turn bursting off)");
        }
      }
    }
  }
  auto pool = Pool::create(setup.cluster.models, setup.cluster.topology, setup.cluster.nodes);
  if (!pool) return std::unexpected(pool.error());
  auto book = TenantBook::create(*tenants, setup.cluster.models);
  if (!book) return std::unexpected(book.error());
  auto scheduler = Scheduler::create(std::move(*pool), std::move(*book), setup.scheduler);
  if (!scheduler) return std::unexpected(scheduler.error());
  std::unique_ptr<ControlPlane> plane(new ControlPlane(std::move(setup), std::move(*scheduler)));
  plane->tenant_overrides_ = std::move(overrides);
  plane->last_event_seq_ = snapshot.last_event_seq;
  plane->tokens_ = std::move(tokens);
  plane->tokens_->replace_all(snapshot.tokens);
  for (const KeyedRecord& record : snapshot.nodes) {
    auto it = plane->node_ids_.find(record.key);
    if (it == plane->node_ids_.end()) continue;  // the node left the cluster file
    auto value = nlohmann::json::parse(record.document, nullptr, false);
    if (value.is_discarded() || !value.is_object()) {
      return fail("nodes " + record.key, "stored document is not a JSON object");
    }
    NodeInfo& node = plane->nodes_[it->second.value];
    node.drained = value.value("drained", false);
    node.drain_reason = value.value("drain_reason", "");
    node.drained_ms = value.value("drained_ms", std::int64_t{0});
    node.not_ready = value.value("not_ready", false);
    node.not_ready_ms = value.value("not_ready_ms", std::int64_t{0});
    node.registered_ms = value.value("registered_ms", std::int64_t{0});
    // A server that was down heard nothing: each agent gets a full timeout from now.
    node.last_heartbeat_ms = std::max(value.value("last_heartbeat_ms", std::int64_t{0}), now_ms);
    if (auto reported = value.find("reported"); reported != value.end()) {
      if (auto r = node_registration_from_json(*reported)) node.reported = std::move(*r);
    }
  }
  for (const JobRecord& record : snapshot.jobs) {
    auto job = from_record(record);
    if (!job) return std::unexpected(job.error());
    plane->next_job_id_ = std::max(plane->next_job_id_, job->id + 1);
    if (!job->idempotency_key.empty()) {
      plane->idempotency_[{job->spec.tenant, job->idempotency_key}] = job->id;
    }
    const std::int64_t id = job->id;
    auto [it, inserted] = plane->jobs_.emplace(id, std::move(*job));
    if (is_final(it->second.state)) continue;
    plane->add_live(it->second);
    if (auto restored = plane->restore(plane->scheduler_, it->second, now_ms); !restored) {
      ServerJob& lost = it->second;
      plane->drop_live(id);
      lost.placement.clear();
      lost.move_to(JobState::kFailed, now_ms,
                   "could not be restored after a restart: " + restored.error().message());
      lost.ended_ms = now_ms;
      plane->record_job(repairs, lost, now_ms, "job.failed");
    }
  }
  plane->settle_loaded_dependents(now_ms, repairs);
  for (std::size_t n = 0; n < plane->nodes_.size(); ++n) {
    if (plane->schedulable(plane->nodes_[n])) continue;
    // Every node of the cluster file is the pool's: a refusal is a bug, and no plane is made.
    const NodeId id{static_cast<std::uint32_t>(n)};
    if (auto ok = plane->scheduler_.set_node_schedulable(id, false); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto opened = plane->open_market(snapshot, *tenants, now_ms, repairs); !opened) {
    return std::unexpected(opened.error());
  }
  plane->restore_bursts(now_ms, repairs);
  // What the rebuilt scheduler knows is as of now: running jobs were adopted with their runs so
  // far (attained service shown before the first pass counts them).
  plane->last_pass_ms_ = now_ms;
  plane->seal(repairs);
  return plane;
}

Result<void> ControlPlane::restore(Scheduler& scheduler, const ServerJob& job,
                                   std::int64_t now_ms) const {
  // A job on rented capacity (or waiting for it), held, or waiting for other jobs is outside the
  // pool's scheduler.
  if (job.state == JobState::kPending && outside_scheduler(job)) return {};
  if (job.burst) return {};
  auto core = to_core_job(job, scheduler.book());
  if (!core) return std::unexpected(core.error());
  if (job.state == JobState::kRunning) {
    auto assignments = to_assignments(job);
    if (!assignments) return std::unexpected(assignments.error());
    auto adopted = scheduler.adopt(*core, *assignments,
                                   std::min(to_seconds(job.started_ms), to_seconds(now_ms)),
                                   to_seconds(now_ms));
    if (!adopted) return adopted;
  } else if (auto queued = scheduler.submit(*core, to_seconds(now_ms)); !queued) {
    return queued;
  }
  auto credited = credit_ended_runs(scheduler, job);
  if (credited) return credited;
  // Not restored after all: out of the scheduler again, so that no pass starts (or keeps) a job
  // the caller fails. Taking out a job just added cannot fail unless the scheduler is broken.
  auto out = job.state == JobState::kRunning
                 ? scheduler.finish(core->id, to_seconds(now_ms), std::nullopt)
                 : scheduler.withdraw(core->id, to_seconds(now_ms));
  if (out) out = scheduler.forget(core->id);
  if (!out) {
    return fail(credited.error().field,
                fmt::format("{}; and the scheduler kept the job: {}", credited.error().reason,
                            out.error().message()));
  }
  return credited;
}

bool ControlPlane::in_scheduler(const ServerJob& job) const {
  if (job.state == JobState::kRunning) return !job.burst;
  return job.state == JobState::kPending && !outside_scheduler(job);
}

Result<void> ControlPlane::enqueue(const Job& core, const ServerJob& job, std::int64_t now_ms,
                                   Batch& batch) {
  if (auto queued = scheduler_.submit(core, to_seconds(now_ms)); !queued) return queued;
  auto credited = credit_ended_runs(scheduler_, job);
  // Not queued after all (an implausible service): out again, so that no pass starts it.
  if (!credited) withdraw_pending(job, now_ms, batch);
  return credited;
}

void ControlPlane::internal_error(std::string what, const Error& error, std::int64_t now_ms,
                                  Batch& batch) {
  ++internal_errors_;
  emit(batch, now_ms, "internal.error", {{"what", std::move(what)}, {"reason", error.message()}});
}

Result<void> ControlPlane::credit_ended_runs(Scheduler& scheduler, const ServerJob& job) {
  if (job.attained_gpu_seconds == 0) return {};
  return scheduler.credit_attained(JobId{static_cast<std::uint32_t>(job.id)},
                                   job.attained_gpu_seconds);
}

Result<Scheduler> ControlPlane::rebuild_scheduler(const TenantsSpec& tenants,
                                                  std::int64_t now_ms) const {
  auto pool = Pool::create(setup_.cluster.models, setup_.cluster.topology, setup_.cluster.nodes);
  if (!pool) return std::unexpected(pool.error());
  auto book = TenantBook::create(tenants, setup_.cluster.models);
  if (!book) return std::unexpected(book.error());
  auto scheduler = Scheduler::create(std::move(*pool), std::move(*book), setup_.scheduler);
  if (!scheduler) return std::unexpected(scheduler.error());
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (auto ok = restore(*scheduler, job, now_ms); !ok) {
      return fail(ok.error().field, fmt::format("job {}: {}", id, ok.error().reason));
    }
  }
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    if (schedulable(nodes_[n])) continue;
    // As in create: the same nodes, so a refusal is a bug; the old scheduler is kept.
    const NodeId id{static_cast<std::uint32_t>(n)};
    if (auto ok = scheduler->set_node_schedulable(id, false); !ok)
      return std::unexpected(ok.error());
  }
  return scheduler;
}

Result<Job> ControlPlane::to_core_job(const ServerJob& server_job, const TenantBook& book) const {
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
  auto job = core_job_of(spec, JobId{static_cast<std::uint32_t>(server_job.id)}, *tenant, *queue,
                         to_seconds(server_job.submitted_ms), models);
  if (!job) return job;
  const bool some_node_holds_it = std::ranges::any_of(
      setup_.cluster.nodes,
      [&](const NodeSpec& node) { return fits(node, empty_state(node), job->gang.task); });
  if (!some_node_holds_it) {
    return fail("gpus_per_task", fmt::format("no node of the cluster can ever hold one task ({})",
                                             describe(job->gang.task, models)));
  }
  return job;
}

Result<std::vector<Assignment>> ControlPlane::to_assignments(const ServerJob& job) const {
  std::vector<Assignment> out;
  for (const TaskPlace& place : job.placement) {
    auto it = node_ids_.find(place.node);
    if (it == node_ids_.end()) {
      return fail("placement", fmt::format("node '{}' is no longer in the cluster", place.node));
    }
    GpuSet gpus = 0;
    for (int g : place.gpus) {
      if (g < 0 || g >= setup_.cluster.nodes[it->second.value].gpu_count) {
        return fail("placement", fmt::format("node '{}' has no GPU {}", place.node, g));
      }
      gpus |= GpuSet{1} << g;
    }
    out.push_back(Assignment{it->second, gpus});
  }
  return out;
}

std::vector<TaskPlace> ControlPlane::to_places(const std::vector<Assignment>& assignments) const {
  std::vector<TaskPlace> out;
  out.reserve(assignments.size());
  for (const Assignment& a : assignments) {
    TaskPlace place{setup_.cluster.nodes[a.node.value].name, {}};
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if (gpu_set_contains(a.gpus, g)) place.gpus.push_back(g);
    }
    out.push_back(std::move(place));
  }
  return out;
}

void ControlPlane::observe_queue_wait(const ServerJob& job, std::int64_t now_ms) {
  // Pending since its submission or its requeue, its last transition.
  const std::int64_t pending_since_ms =
      job.transitions.empty() ? job.submitted_ms : job.transitions.back().at_ms;
  queue_waits_[job.spec.tenant].observe(static_cast<double>(now_ms - pending_since_ms) / 1000.0);
}

void ControlPlane::emit(Batch& batch, std::int64_t now_ms, std::string kind,
                        const nlohmann::json& document) {
  batch.events.push_back(EventRecord{++last_event_seq_, now_ms, std::move(kind), document.dump()});
}

void ControlPlane::stage(Batch& batch, const ServerJob& job) {
  JobRecord named;
  named.id = job.id;
  batch.jobs.push_back(std::move(named));
}

void ControlPlane::seal(Batch& batch) const {
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
    if (record.document.empty()) record = to_record(jobs_.at(record.id));
  }
  batch.jobs = std::move(kept);
}

void ControlPlane::record_job(Batch& batch, const ServerJob& job, std::int64_t now_ms,
                              std::string kind) {
  stage(batch, job);
  nlohmann::json places = nlohmann::json::array();
  for (const TaskPlace& p : job.placement) places.push_back({{"node", p.node}, {"gpus", p.gpus}});
  emit(batch, now_ms, std::move(kind),
       {{"job", job.id},
        {"name", job.spec.name},
        {"tenant", job.spec.tenant},
        {"queue", job.spec.queue},
        {"state", job_state_name(job.state)},
        {"reason", job.transitions.empty() ? "" : job.transitions.back().reason},
        {"placement", std::move(places)}});
}

bool ControlPlane::may_see(const Principal& who, const ServerJob& job) const {
  return may_see_job(who, job.spec.tenant, job.ran_on, job.placement);
}

Outcome<const ServerJob*> ControlPlane::visible_job(const Principal& who, std::int64_t id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !may_see(who, it->second)) return not_found(id);
  return &it->second;
}

Outcome<ServerJob*> ControlPlane::running_job(const Principal& who, std::int64_t id) {
  auto found = visible_job(who, id);
  if (!found) return std::unexpected(found.error());
  if ((*found)->state != JobState::kRunning) {
    return conflict("state",
                    fmt::format("job {} is {}, not running", id, job_state_name((*found)->state)));
  }
  return &jobs_.at(id);
}

Reply ControlPlane::submit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
                           std::int64_t now_ms, Batch& batch) {
  if (who.role == Role::kAgent) return forbidden("role", "agent tokens cannot submit jobs");
  if (who.role == Role::kUser && spec.tenant != who.tenant) {
    return forbidden("tenant", fmt::format("this token acts for tenant '{}' only", who.tenant));
  }
  // The key is stored in the job's JSON document: printable ASCII only, so that it is valid
  // UTF-8 whatever bytes the header carried.
  if (idempotency_key.size() > 255 ||
      !std::ranges::all_of(idempotency_key, [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return refuse(Refusal::kInvalid,
                  Error{"Idempotency-Key", "at most 255 printable ASCII characters"});
  }
  if (!idempotency_key.empty()) {
    if (auto it = idempotency_.find({spec.tenant, idempotency_key}); it != idempotency_.end()) {
      const ServerJob& existing = jobs_.at(it->second);
      // An array's key names its first job, whose spec is the array's as that job got it.
      const bool same = existing.array_job != 0
                            ? existing.spec == array_member(spec, existing.id, existing.array_index)
                            : existing.spec == spec;
      if (!same) {
        return conflict("Idempotency-Key",
                        fmt::format("key already used for job {} with another spec; use a new "
                                    "key for a new job",
                                    existing.id));
      }
      return answer(submitted_view(existing));
    }
  }
  if (!spec.array.empty()) {
    return submit_array(who, spec, idempotency_key, now_ms, batch);
  }
  return admit(who, std::move(spec), idempotency_key, now_ms, batch, 1, {});
}

Reply ControlPlane::admit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
                          std::int64_t now_ms, Batch& batch, std::int64_t admitted,
                          ArrayPlace array) {
  ServerJob job;
  job.array_job = array.job;
  job.array_index = array.index;
  job.id = next_job_id_;
  job.spec = std::move(spec);
  job.idempotency_key = idempotency_key;
  job.submitter_token = who.token_id;
  if (auto token = tokens_ ? tokens_->find(who.token_id) : std::nullopt) {
    job.submitter = token->description;
  }
  job.submitted_ms = now_ms;
  job.move_to(JobState::kPending, now_ms, "submitted");
  auto core = to_core_job(job, scheduler_.book());
  if (!core) return refuse(Refusal::kInvalid, "invalid job", core.error());
  if (auto runnable = check_runnable(job.spec); !runnable) {
    return refuse(Refusal::kInvalid, "invalid job spec", runnable.error());
  }
  // A job that could never run is refused now rather than left to wait forever.
  if (auto ever = check_can_ever_start(*core, scheduler_.pool(),
                                       scheduler_.config().quotas ? &scheduler_.book() : nullptr);
      !ever) {
    return refuse(Refusal::kInvalid, "cannot ever run",
                  Error{spec_field(ever.error().field), ever.error().reason});
  }
  if (auto ok = check_dependencies(who, job.spec); !ok) return std::unexpected(ok.error());
  if (admitted > 0) {
    if (auto ok = check_admission(job.spec.tenant, core->tenant, now_ms, admitted); !ok) {
      return std::unexpected(ok.error());
    }
  }
  // A job that waits for others is queued once they have succeeded (settle_dependents).
  if (unmet_dependencies(job).empty()) {
    if (auto ok = scheduler_.submit(*core, to_seconds(now_ms)); !ok) {
      return refuse(Refusal::kInvalid, "invalid job",
                    Error{spec_field(ok.error().field), ok.error().reason});
    }
  }
  ++next_job_id_;
  if (!idempotency_key.empty()) idempotency_[{job.spec.tenant, idempotency_key}] = job.id;
  add_live(job);
  dirty_ = true;
  record_job(batch, job, now_ms, "job.submitted");
  Reply reply = created(server_job_to_json(job));
  jobs_.emplace(job.id, std::move(job));
  return reply;
}

void ControlPlane::end_job(ServerJob& job, JobState state, std::string reason, std::int64_t now_ms,
                           Batch& batch) {
  const JobId core_id{static_cast<std::uint32_t>(job.id)};
  // A job held, waiting for others or on rented capacity is not the scheduler's to end. One that
  // is must end there: a refusal means the two disagree (a bug), which internal_error shows.
  const bool scheduled = in_scheduler(job);
  if (job.burst) {
    // On rented capacity, outside the scheduler: the rental ends with the job.
    release_burst(job, fmt::format("job {} {}: {}", job.id, job_state_name(state), reason), true,
                  now_ms, batch);
  } else if (job.state == JobState::kRunning) {
    meter_stop(job, now_ms, batch);
    std::optional<Seconds> observed;
    if (state == JobState::kSucceeded) observed = to_seconds(now_ms - job.started_ms);
    if (auto ok = scheduler_.finish(core_id, to_seconds(now_ms), observed); !ok) {
      internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now_ms, batch);
    }
  } else if (scheduled) {
    if (auto ok = scheduler_.withdraw(core_id, to_seconds(now_ms)); !ok) {
      internal_error(fmt::format("job {}: scheduler withdraw", job.id), ok.error(), now_ms, batch);
    }
  }
  if (scheduled) {
    if (auto ok = scheduler_.forget(core_id); !ok) {
      internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now_ms, batch);
    }
  }
  drop_live(job.id);
  job.held.clear();  // an ended job is no longer held
  job.move_to(state, now_ms, std::move(reason));
  job.ended_ms = now_ms;
  dirty_ = true;
  record_job(batch, job, now_ms, fmt::format("job.{}", job_state_name(state)));
  settle_dependents(job, now_ms, batch);
}

Reply ControlPlane::cancel(const Principal& who, std::int64_t id, std::int64_t now_ms,
                           Batch& batch) {
  if (who.role == Role::kAgent) return forbidden("role", "agent tokens cannot cancel jobs");
  auto visible = visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  ServerJob& job = jobs_.at(id);
  if (is_final(job.state)) {
    return conflict("id", fmt::format("job {} already ended: {}", id, job_state_name(job.state)));
  }
  end_job(job, JobState::kCancelled,
          fmt::format("cancelled by token {} ({})", who.token_id, role_name(who.role)), now_ms,
          batch);
  return answer(server_job_to_json(job));
}

Reply ControlPlane::report_status(const Principal& who, std::int64_t id,
                                  const JobStatusReport& report, std::int64_t now_ms,
                                  Batch& batch) {
  if (who.role == Role::kUser) {
    return forbidden("role", "job status is reported by the agent of the job's node or an admin");
  }
  auto found = running_job(who, id);
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (auto ok = check_agent_report(who, job, report.task, report.run); !ok) {
    return std::unexpected(ok.error());
  }
  if (report.run && *report.run != job.starts) {
    return conflict("run", fmt::format("job {} is in run {}; this report is about run {}", id,
                                       job.starts, *report.run));
  }
  if (report.state == "running") return answer(server_job_to_json(job));
  auto state = parse_job_state(report.state);
  if (!state || (*state != JobState::kSucceeded && *state != JobState::kFailed)) {
    return refuse(Refusal::kInvalid, Error{"state", "a job reports running, succeeded or failed"});
  }
  if (report.task && *report.task >= job.spec.tasks) {
    return refuse(
        Refusal::kInvalid,
        Error{"task", fmt::format("job {} has {} task(s), numbered from 0", id, job.spec.tasks)});
  }
  if (report.task && *state == JobState::kSucceeded) {
    auto at = std::ranges::lower_bound(job.tasks_done, *report.task);
    if (at == job.tasks_done.end() || *at != *report.task) job.tasks_done.insert(at, *report.task);
    if (std::cmp_less(job.tasks_done.size(), job.spec.tasks)) {
      stage(batch, job);
      return answer(server_job_to_json(job));
    }
  }
  job.exit_code = report.exit_code;
  std::string reason = report.message;
  if (reason.empty()) {
    reason = report.exit_code ? fmt::format("exited with code {}", *report.exit_code)
                              : std::string(report.state);
    if (report.task && job.spec.tasks > 1 && *state == JobState::kFailed) {
      reason = fmt::format("task {} {}", *report.task, reason);
    }
  }
  end_job(job, *state, std::move(reason), now_ms, batch);
  return answer(server_job_to_json(job));
}

Reply ControlPlane::report_checkpoint(const Principal& who, std::int64_t id,
                                      const CheckpointReport& report, std::int64_t now_ms,
                                      Batch& batch) {
  // A job being stopped checkpoints after the server took it off its nodes: any job that has not
  // ended may report one.
  auto visible = visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  ServerJob& job = jobs_.at(id);
  if (is_final(job.state)) {
    return conflict("id", fmt::format("job {} already ended: {}", id, job_state_name(job.state)));
  }
  if (auto ok = check_agent_report(who, job, std::nullopt, report.run); !ok) {
    return std::unexpected(ok.error());
  }
  if (report.run && *report.run != job.starts) {
    return conflict("run", fmt::format("job {} is in run {}; this checkpoint is of run {}", id,
                                       job.starts, *report.run));
  }
  job.last_checkpoint_ms = now_ms;
  if (report.step) job.checkpoint_step = report.step;
  if (!report.path.empty()) job.checkpoint_path = report.path;
  stage(batch, job);
  emit(batch, now_ms, "job.checkpointed",
       {{"job", job.id},
        {"tenant", job.spec.tenant},
        {"step", report.step.value_or(-1)},
        {"path", report.path},
        {"note", report.note}});
  return answer(server_job_to_json(job));
}

nlohmann::json ControlPlane::pending_json(const ServerJob& job) const {
  if (job.burst) return burst_pending_json(job);
  if (!job.held.empty()) {
    return {{"kind", "held"}, {"reason", job.held + "; `tidepool release` lets it run"}};
  }
  if (auto unmet = unmet_dependencies(job); !unmet.empty()) return dependency_pending_json(unmet);
  const PendingReason* reason = scheduler_.reason(JobId{static_cast<std::uint32_t>(job.id)});
  const PendingKind kind = reason ? reason->kind : PendingKind::kNotConsidered;
  nlohmann::json out = {
      {"kind", pending_kind_name(kind)},
      {"reason", kind == PendingKind::kNotConsidered
                     ? std::string("submitted; the next scheduling pass considers it")
                     : std::string(reason->message())}};
  if (auto refused = burst_refusals_.find(job.id); refused != burst_refusals_.end()) {
    out["burst"] = "not rented: " + refused->second;
  }
  return out;
}

std::optional<std::int64_t> ControlPlane::attained_gpu_seconds(const ServerJob& job) const {
  if (job.burst || (job.state != JobState::kPending && job.state != JobState::kRunning)) {
    return std::nullopt;
  }
  return scheduler_.attained_gpu_seconds(JobId{static_cast<std::uint32_t>(job.id)},
                                         to_seconds(last_pass_ms_));
}

nlohmann::json ControlPlane::job_view(const ServerJob& job) const {
  nlohmann::json out = server_job_to_json(job);
  if (job.state == JobState::kPending) out["pending"] = pending_json(job);
  if (auto attained = attained_gpu_seconds(job)) out["attained_gpu_seconds"] = *attained;
  return out;
}

Reply ControlPlane::get_job(const Principal& who, std::int64_t id) const {
  auto visible = visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  const ServerJob* found = *visible;
  return answer(job_view(*found));
}

Reply ControlPlane::list_jobs(const Principal& who, const JobFilter& filter) const {
  std::map<std::int64_t, std::shared_ptr<const ListedJob>> cache;
  return tidepool::list_jobs(*update_listing(cache, {}, 0), who, filter);
}

std::shared_ptr<const JobListing> ControlPlane::update_listing(
    std::map<std::int64_t, std::shared_ptr<const ListedJob>>& cache,
    const std::set<std::int64_t>& changed, std::int64_t version) const {
  const auto refresh = [&](const ServerJob& job) {
    cache[job.id] = std::make_shared<const ListedJob>(listed_job(job));
  };
  if (cache.empty()) {
    for (const auto& [id, job] : jobs_) refresh(job);
  } else {
    for (std::int64_t id : changed) {
      if (auto it = jobs_.find(id); it != jobs_.end()) refresh(it->second);
    }
  }
  auto listing = std::make_shared<JobListing>();
  listing->version = version;
  listing->jobs.reserve(cache.size());
  for (const auto& [id, entry] : cache) listing->jobs.push_back(entry);
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state == JobState::kPending) listing->pending.emplace(id, pending_json(job));
    if (auto attained = attained_gpu_seconds(job)) listing->attained.emplace(id, *attained);
  }
  const TenantBook& book = scheduler_.book();
  for (int t = 0; t < book.tenant_count(); ++t) {
    const TenantId tenant{static_cast<std::uint32_t>(t)};
    std::set<std::string>& queues = listing->queues_of_tenant[book.tenant_name(tenant)];
    for (const QueueId q : book.queues_of(tenant)) queues.insert(book.queue_name(q));
  }
  for (const NodeInfo& node : nodes_) listing->nodes.insert(node.name);
  for (const auto& [name, rented] : burst_nodes_) listing->nodes.insert(name);
  return listing;
}

Reply ControlPlane::why(const Principal& who, std::int64_t id, std::int64_t now_ms) const {
  auto visible = visible_job(who, id);
  if (!visible) return std::unexpected(visible.error());
  const ServerJob* found = *visible;
  const ServerJob& job = *found;
  nlohmann::json out = {{"id", id}, {"state", job_state_name(job.state)}};
  if (job.state == JobState::kPending) {
    const JobId core_id{static_cast<std::uint32_t>(id)};
    const nlohmann::json pending = pending_json(job);
    out["kind"] = pending["kind"];
    out["reason"] = pending["reason"];
    nlohmann::json waited = nlohmann::json::object();
    if (const PendingSeconds* closed = scheduler_.pending_seconds(core_id)) {
      PendingSeconds seconds = *closed;
      // The current reason's time so far.
      const PendingReason* current = scheduler_.reason(core_id);
      if (auto since = scheduler_.reason_since(core_id); since && current) {
        seconds[static_cast<std::size_t>(current->kind)] +=
            std::max<Seconds>(0, to_seconds(now_ms) - *since);
      }
      for (int k = 0; k < kPendingKinds; ++k) {
        if (seconds[k] > 0) waited[pending_kind_name(static_cast<PendingKind>(k))] = seconds[k];
      }
    }
    out["waited_seconds"] = std::move(waited);
    out["pending_seconds"] = to_seconds(now_ms - job.transitions.back().at_ms);
    if (auto place = scheduler_.lane_place(core_id, to_seconds(now_ms)); place && !job.burst) {
      // Only the jobs ahead that the caller may see are named (one lane may hold several
      // tenants' jobs under a pool-wide order).
      nlohmann::json ahead = nlohmann::json::array();
      int hidden = 0;
      for (JobId other : place->ahead) {
        auto it = jobs_.find(other.value);
        if (it != jobs_.end() && may_see(who, it->second)) {
          ahead.push_back(other.value);
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
    }
  } else if (job.state == JobState::kRunning) {
    std::vector<std::string> nodes;
    for (const TaskPlace& p : job.placement) {
      if (nodes.empty() || nodes.back() != p.node) nodes.push_back(p.node);
    }
    out["reason"] = fmt::format("running since {} s on {}", to_seconds(now_ms - job.started_ms),
                                fmt::join(nodes, ", "));
  } else {
    out["reason"] = job.message;
  }
  return answer(std::move(out));
}

void ControlPlane::schedule(std::int64_t now_ms, Batch& batch) {
  meter_advance(now_ms, batch);
  std::vector<std::int64_t> overdue;
  for (std::int64_t id : timed_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state == JobState::kRunning && job.spec.max_runtime &&
        now_ms - job.started_ms >= *job.spec.max_runtime * 1000) {
      overdue.push_back(id);
    }
  }
  for (std::int64_t id : overdue) {
    ServerJob& job = jobs_.at(id);
    end_job(job, JobState::kFailed,
            fmt::format("stopped: ran past its max_runtime of {}",
                        format_duration(*job.spec.max_runtime)),
            now_ms, batch);
  }
  stop_over_cost(now_ms, batch);
  check_liveness(now_ms, batch);
  check_bursts(now_ms, batch);
  dirty_ = false;
  last_pass_ms_ = now_ms;
  PassResult pass = scheduler_.pass(to_seconds(now_ms));
  for (const PreemptedJob& p : pass.preempted) {
    ServerJob& job = jobs_.at(p.job.value);
    std::string reason = fmt::format("preempted ({})", preemption_cause_name(p.cause));
    if (p.beneficiary) reason += fmt::format(" for job {}", p.beneficiary->value);
    meter_stop(job, now_ms, batch);
    job.attained_gpu_seconds = scheduler_.attained_gpu_seconds(p.job, to_seconds(now_ms))
                                   .value_or(job.attained_gpu_seconds);
    job.move_to(JobState::kPreempted, now_ms, reason);
    stop_run(job, "preemption", now_ms);
    ++job.preemptions;
    record_job(batch, job, now_ms, "job.preempted");
    job.move_to(JobState::kPending, now_ms, "requeued after preemption");
  }
  for (const StartedJob& s : pass.started) {
    ServerJob& job = jobs_.at(s.job.value);
    observe_queue_wait(job, now_ms);
    job.placement = to_places(s.assignments);
    job.started_ms = now_ms;
    job.tasks_done.clear();
    job.note_ran_on();
    ++job.starts;
    std::string how = s.admission == StartAdmission::kBorrowing ? "borrowing idle capacity"
                      : s.admission == StartAdmission::kWindow  ? "in its class's window"
                                                                : "within its quota";
    if (s.backfilled) how += ", backfilled";
    job.move_to(JobState::kRunning, now_ms,
                fmt::format("placed on {} node(s) ({})", s.span.nodes, how));
    meter_start(job, s.assignments, now_ms, batch);
    record_job(batch, job, now_ms, "job.started");
  }
  // Preempted jobs that did not start again in this pass are pending: store that state.
  for (const PreemptedJob& p : pass.preempted) {
    const ServerJob& job = jobs_.at(p.job.value);
    if (job.state == JobState::kPending) stage(batch, job);
  }
  burst_waiting(now_ms, batch);
  post_ledger(now_ms, batch);
  jobs_wakeup_ms_ = jobs_wakeup(now_ms);
}

std::optional<std::int64_t> ControlPlane::jobs_wakeup(std::int64_t now_ms) const {
  std::optional<std::int64_t> next;
  const auto sooner = [&](std::int64_t at) {
    if (!next || at < *next) next = at;
  };
  // A waiting job reaches the burst threshold.
  const auto policy = market_ ? market_->burst_policy() : std::nullopt;
  const bool bursting = policy && !market_->burst_offers().empty();
  for (std::int64_t id : timed_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state == JobState::kRunning) sooner(job.started_ms + *job.spec.max_runtime * 1000);
  }
  if (!bursting) return next;
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state == JobState::kPending && !job.burst) {
      const std::int64_t at = job.transitions.back().at_ms + policy->threshold * 1000;
      if (at > now_ms) sooner(at);
    }
  }
  return next;
}

void ControlPlane::add_live(const ServerJob& job) {
  live_.insert(job.id);
  if (job.state == JobState::kPending) note_dependencies(job);
  note_parked(job);
  if (job.spec.max_runtime) timed_.insert(job.id);
}

void ControlPlane::drop_live(std::int64_t id) {
  live_.erase(id);
  timed_.erase(id);
  parked_.erase(id);
}

std::optional<std::int64_t> ControlPlane::next_wakeup_ms(std::int64_t now_ms) const {
  std::optional<std::int64_t> next = jobs_wakeup_ms_;
  const auto sooner = [&](std::int64_t at) {
    if (!next || at < *next) next = at;
  };
  if (auto wake = scheduler_.next_wakeup(to_seconds(now_ms))) sooner(*wake * 1000);
  for (const NodeInfo& node : nodes_) {
    if (node.registered_ms == 0 || node.not_ready) continue;
    sooner(node.last_heartbeat_ms + setup_.heartbeat_timeout_ms + 1);
  }
  for (const auto& [name, rented] : burst_nodes_) {
    if (rented.registered_ms != 0) {
      sooner(rented.last_heartbeat_ms + setup_.heartbeat_timeout_ms + 1);
    }
  }
  if (market_) sooner(market_->next_post() * 1000);
  return next;
}

}  // namespace tidepool
