// The control plane: creation from the store, the commands handed to its parts, and the
// scheduling pass. Tenants, queues and tokens are in control_plane_admin.cc.
#include "server/control_plane.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace tidepool {

ControlPlane::ControlPlane(ControlPlaneSetup setup, Scheduler scheduler,
                           std::shared_ptr<TokenTable> tokens)
    : state_(std::move(setup), std::move(scheduler), std::move(tokens)) {}

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(ControlPlaneSetup setup,
                                                           const Snapshot& snapshot, Instant now,
                                                           Batch& repairs,
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
  for (const NodeSpec& node : setup.cluster.nodes) {
    if (node.mig_on_demand != 0) {
      return fail("cluster node " + node.name + " mig",
                  "on_demand is the simulator's: the server runs MIG tasks on the instances the "
                  "agents find, so the cluster file lists each partitioned GPU's instances "
                  "(mig: {all: [3g.40gb, 3g.40gb]})");
    }
  }
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
  if (setup.prewarm) {
    if (auto ok = validate(setup.prewarm->planner); !ok) {
      return fail("prewarm." + ok.error().field, ok.error().reason);
    }
  }
  auto scheduler = Scheduler::create(std::move(*pool), std::move(*book), setup.scheduler);
  if (!scheduler) return std::unexpected(scheduler.error());
  tokens->replace_all(snapshot.tokens);
  std::unique_ptr<ControlPlane> plane(
      new ControlPlane(std::move(setup), std::move(*scheduler), std::move(tokens)));
  plane->tenant_overrides_ = std::move(overrides);
  plane->state_.set_last_event_seq(snapshot.last_event_seq);
  if (auto restored = plane->nodes_.restore(snapshot.nodes, now); !restored) {
    return std::unexpected(restored.error());
  }
  for (const JobRecord& record : snapshot.jobs) {
    auto job = from_record(record);
    if (!job) return std::unexpected(job.error());
    plane->jobs_.load(std::move(*job), now, repairs);
  }
  for (const auto& [id, job] : plane->state_.jobs()) plane->services_.adopt(job);
  plane->jobs_.settle_loaded_dependents(now, repairs);
  plane->jobs_.load_next_id(snapshot.settings);
  plane->history_.load(snapshot.settings, now);
  // Every node of the cluster file is the pool's: a refusal is a bug, and no plane is made.
  if (auto cordoned = plane->nodes_.cordon(plane->state_.scheduler()); !cordoned) {
    return std::unexpected(cordoned.error());
  }
  if (auto opened = plane->clerk_.open(snapshot, *tenants, now, repairs); !opened) {
    return std::unexpected(opened.error());
  }
  for (const LostRental& lost : plane->bursts_.restore(now, repairs)) {
    plane->jobs_.requeue_from_burst(lost, now, repairs);
  }
  // What the rebuilt scheduler knows is as of now: running jobs were adopted with their runs so
  // far (attained service shown before the first pass counts them).
  plane->state_.passed(now);
  plane->state_.mark_dirty();  // and the first round runs a pass
  plane->state_.seal(repairs);
  return plane;
}

// --- jobs ---

Reply ControlPlane::submit(const Principal& who, JobSpec spec, const std::string& idempotency_key,
                           Instant now, Batch& batch) {
  auto submitted = jobs_.submit(who, std::move(spec), idempotency_key, now, batch);
  if (!submitted) return std::unexpected(submitted.error());
  if (submitted->created) services_.adopt(*submitted->job);
  nlohmann::json body = views_.submitted(*submitted->job);
  return submitted->created ? created(std::move(body)) : answer(std::move(body));
}

Reply ControlPlane::cancel(const Principal& who, JobId id, Instant now, Batch& batch) {
  auto job = jobs_.cancel(who, id, now, batch);
  if (!job) return std::unexpected(job.error());
  if (services_.is_service(id)) services_.ended(**job, now, batch);
  return answer(server_job_to_json(**job));
}

Reply ControlPlane::report_status(const Principal& who, JobId id, const JobStatusReport& report,
                                  Instant now, Batch& batch) {
  auto job = jobs_.report_status(who, id, report, now, batch);
  if (!job) return std::unexpected(job.error());
  return answer(server_job_to_json(**job));
}

Reply ControlPlane::report_checkpoint(const Principal& who, JobId id,
                                      const CheckpointReport& report, Instant now, Batch& batch) {
  auto job = jobs_.report_checkpoint(who, id, report, now, batch);
  if (!job) return std::unexpected(job.error());
  return answer(server_job_to_json(**job));
}

Reply ControlPlane::hold(const Principal& who, JobId id, Instant now, Batch& batch) {
  auto job = jobs_.hold(who, id, now, batch);
  if (!job) return std::unexpected(job.error());
  return answer(views_.job(**job));
}

Reply ControlPlane::release(const Principal& who, JobId id, Instant now, Batch& batch) {
  auto job = jobs_.release(who, id, now, batch);
  if (!job) return std::unexpected(job.error());
  if ((*job)->state == JobState::kPending) return answer(views_.job(**job));
  // It could not be queued again, and failed: a conflict, answered with the job.
  auto failed = conflict("state", (*job)->message);
  failed.error().body = views_.job(**job);
  return failed;
}

Reply ControlPlane::requeue_job(const Principal& who, JobId id, Instant now, Batch& batch) {
  auto job = jobs_.requeue(who, id, now, batch);
  if (!job) return std::unexpected(job.error());
  return answer(views_.job(**job));
}

Reply ControlPlane::update_job(const Principal& who, JobId id, const JobUpdate& update, Instant now,
                               Batch& batch) {
  auto job = jobs_.update(who, id, update, now, batch);
  if (!job) return std::unexpected(job.error());
  return answer(views_.job(**job));
}

Reply ControlPlane::get_job(const Principal& who, JobId id) const {
  auto job = state_.visible_job(who, id);
  if (!job) return std::unexpected(job.error());
  nlohmann::json body = views_.job(**job);
  // A service: its replicas and the autoscaler's last decision, as of the last pass.
  if (services_.is_service(id)) body["service_status"] = services_.view(**job, state_.last_pass());
  return answer(std::move(body));
}

Reply ControlPlane::list_services(const Principal& who, Instant now) const {
  nlohmann::json services = nlohmann::json::array();
  for (const auto& [id, job] : state_.jobs()) {
    if (services_.is_service(id) && state_.may_see(who, job)) {
      services.push_back(services_.view(job, now));
    }
  }
  return answer({{"services", std::move(services)}});
}

Reply ControlPlane::get_service(const Principal& who, JobId id, Instant now) const {
  auto job = state_.visible_job(who, id);
  if (!job) return std::unexpected(job.error());
  if (!(*job)->spec.service) {
    return refuse(Refusal::kNotFound,
                  Error{"id", fmt::format("job {} is not a service (kind: job)", id)});
  }
  if (!services_.is_service(id)) {
    return refuse(Refusal::kNotFound, Error{"id", fmt::format("service {} has ended: {}", id,
                                                              job_state_name((*job)->state))});
  }
  return answer(services_.view(**job, now));
}

Reply ControlPlane::list_jobs(const Principal& who, const JobFilter& filter) const {
  std::map<JobId, std::shared_ptr<const ListedJob>> cache;
  return tidepool::list_jobs(*views_.listing(cache, {}, 0), who, filter);
}

std::shared_ptr<const JobListing> ControlPlane::update_listing(
    std::map<JobId, std::shared_ptr<const ListedJob>>& cache, const std::set<JobId>& changed,
    std::int64_t version) const {
  return views_.listing(cache, changed, version);
}

void ControlPlane::note_steps(const ServerJob& job, Instant now, Batch& batch) {
  const auto since = steps_unstored_since_.try_emplace(job.id, now).first;
  if (now - since->second < state_.setup().steps_stored_every) return;
  state_.stage(batch, job);
  steps_unstored_since_.erase(since);
}

bool ControlPlane::remove_finished(Instant now, std::size_t most, Batch& batch) {
  std::erase_if(steps_unstored_since_, [&](const auto& entry) {
    const auto job = state_.jobs().find(entry.first);
    return job == state_.jobs().end() || job->second.state != JobState::kRunning;
  });
  const Instant before = now - std::chrono::days{state_.setup().finished_jobs_kept_days};
  return jobs_.remove_finished(before, most, batch);
}

Reply ControlPlane::why(const Principal& who, JobId id, Instant now) const {
  auto job = state_.visible_job(who, id);
  if (!job) return std::unexpected(job.error());
  return answer(views_.why(who, **job, now));
}

Reply ControlPlane::advise(const Principal& who, JobId id) const {
  auto job = state_.visible_job(who, id);
  if (!job) return std::unexpected(job.error());
  return answer(views_.advice(**job));
}

Reply ControlPlane::log_access(const Principal& who, JobId id, bool write, std::optional<int> task,
                               std::optional<std::int64_t> run) const {
  auto job = jobs_.log_access(who, id, write, task, run);
  if (!job) return std::unexpected(job.error());
  return answer({{"job", id}, {"tasks", (*job)->spec.tasks}});
}

// --- nodes ---

Reply ControlPlane::list_nodes(const Principal& who) const { return answer(views_.nodes(who)); }

Reply ControlPlane::pool_map(const Principal& who) const { return answer(views_.pool_map(who)); }

Reply ControlPlane::whoami(const Principal& who) const {
  nlohmann::json out = {{"token", who.token_id},
                        {"role", role_name(who.role)},
                        {"market", clerk_.market() != nullptr}};
  if (who.role == Role::kUser) out["tenant"] = who.tenant;
  if (who.role == Role::kAgent) out["node"] = who.node;
  return answer(std::move(out));
}

Reply ControlPlane::set_drained(const Principal& who, const std::string& node, bool drained,
                                const std::string& reason, Instant now, Batch& batch) {
  auto id = nodes_.set_drained(who, node, drained, reason, now, batch);
  if (!id) return std::unexpected(id.error());
  return answer(views_.node(node));
}

Reply ControlPlane::register_node(const Principal& who, const std::string& node,
                                  const NodeRegistration& registration, Instant now, Batch& batch) {
  if (auto ok = NodeTable::check_agent(who, node, "register it"); !ok) {
    return std::unexpected(ok.error());
  }
  if (nodes_.is_rented(node)) {
    if (auto ok = bursts_.register_node(node, registration, now, batch); !ok) {
      return std::unexpected(ok.error());
    }
    return answer(views_.node(node));
  }
  if (auto id = nodes_.register_node(node, registration, now, batch); !id) {
    return std::unexpected(id.error());
  }
  nlohmann::json out = views_.node(node);
  out["heartbeat_timeout_ms"] = state_.setup().heartbeat_timeout.count();
  return answer(std::move(out));
}

Reply ControlPlane::heartbeat(const Principal& who, const std::string& node,
                              const NodeHeartbeat& heartbeat, Instant now, Batch& batch) {
  if (auto ok = NodeTable::check_agent(who, node, "send its heartbeat"); !ok) {
    return std::unexpected(ok.error());
  }
  auto heard = nodes_.heard_from(node, now, batch);
  if (!heard) return std::unexpected(heard.error());
  // The running jobs with a task on the node.
  std::vector<const ServerJob*> here = (*heard)->kind == NodeKind::kRented
                                           ? bursts_.heard_from(**heard, now, batch)
                                           : state_.running_on((*heard)->id);
  services_.note_figures(node, heartbeat.replicas, now);
  // The steps of tasks that run on this node in their job's current run; others are ignored (a
  // late report of an earlier run, or a node reporting for a task it does not run).
  for (const TaskSteps& reported : heartbeat.steps) {
    const auto id = job_id_from_wire(reported.job);
    const auto job = std::ranges::find_if(here, [&](const ServerJob* j) {
      return id && j->id == *id && reported.run == j->starts && reported.task >= 0 &&
             std::cmp_less(reported.task, j->placement.size()) &&
             j->placement[static_cast<std::size_t>(reported.task)].node == node;
    });
    if (job == here.end()) continue;
    ServerJob& reporting = state_.jobs().at((*job)->id);
    reporting.steps.merge(reported.stats);
    note_steps(reporting, now, batch);
  }
  HeartbeatReply reply = nodes_.answer_heartbeat(node, here, heartbeat.gpus, now, batch);
  for (NodeAssignment& assignment : reply.assignments) {
    const auto id = job_id_from_wire(assignment.job);
    auto it = id ? state_.jobs().find(*id) : state_.jobs().end();
    if (it == state_.jobs().end()) continue;
    assignment.replica = services_.replica_assignment(it->second, now, batch);
    if (assignment.replica && it->second.replica_port > 0) {
      assignment.env["TIDEPOOL_PORT"] = fmt::format("{}", it->second.replica_port);
    }
  }
  return answer(heartbeat_reply_to_json(reply));
}

// --- the internal market ---

namespace {

std::unexpected<Refused> no_market() {
  return refuse(Refusal::kNotFound, Error{"market",
                                          "this server runs without an internal market; add "
                                          "`market: PATH` (a market file) to its configuration"});
}

}  // namespace

Reply ControlPlane::prices(Instant now) {
  if (clerk_.market() == nullptr) return no_market();
  Batch ignored;  // the meter's failures are shown by the commands that change what it meters
  clerk_.advance(now, ignored);
  return answer(views_.prices());
}

Reply ControlPlane::bill(const Principal& who, const BillQuery& query) const {
  if (who.role == Role::kAgent) return forbidden("role", "agent tokens cannot read bills");
  if (who.role == Role::kUser && query.tenant != who.tenant) {
    return forbidden("tenant", fmt::format("this token sees tenant '{}' only", who.tenant));
  }
  if (clerk_.market() == nullptr) return no_market();
  const auto tenant = state_.scheduler().book().find_tenant(query.tenant);
  if (!tenant) {
    return refuse(Refusal::kNotFound, Error{"tenant", fmt::format("no tenant '{}'", query.tenant)});
  }
  return answer(views_.bill(query, *tenant));
}

// --- bursting ---

Reply ControlPlane::provider_result(std::int64_t call, bool ok, const std::string& output,
                                    Instant now, Batch& batch) {
  if (auto lost = bursts_.provider_result(call, ok, output, now, batch)) {
    jobs_.requeue_from_burst(*lost, now, batch);
  }
  return answer({{"call", call}});
}

// --- scheduling ---

void ControlPlane::schedule(Instant now, Batch& batch) {
  clerk_.advance(now, batch);
  jobs_.stop_overdue(now, batch);
  for (const OverCost& over : clerk_.over_cost()) {
    jobs_.end_job(state_.jobs().at(over.job), JobState::kFailed, over.reason, now, batch);
  }
  check_liveness(now, batch);
  for (const LostRental& lost : bursts_.lost_rentals(now)) {
    state_.emit(batch, now, "burst.lost", {{"job", lost.job}, {"reason", lost.reason}});
    jobs_.requeue_from_burst(lost, now, batch);
  }
  // The services first, so that the replicas they add are placed by this pass.
  services_.tick(now, batch);
  state_.passed(now);
  const PassResult pass = state_.scheduler().pass(unix_seconds(now));
  PrewarmPass prewarm;
  if (PrewarmPlanner* planner = state_.prewarm()) {
    prewarm = prewarm_after_pass(*planner, state_.scheduler(), pass, unix_seconds(now));
    const PrewarmSetup& setup = *state_.setup().prewarm;
    for (const PrewarmCall& call : prewarm.calls) {
      const auto job = state_.jobs().find(call.job);
      if (job == state_.jobs().end()) continue;
      prewarm_calls_.push_back(
          {call.job, setup.hook,
           prewarm_request(call, job->second, state_.setup().cluster, setup.planner.lead, now)});
    }
  }
  jobs_.apply_pass(pass, prewarm.started, now, batch);
  services_.placed(now, batch);
  if (state_.scheduler().cut_short()) state_.mark_dirty();  // the rest in the next round
  bursts_.rent_waiting(now, batch);
  clerk_.post_ledger(now, batch);
  jobs_wakeup_ = jobs_.next_deadline(now);
  if (now >= history_.next_sample()) history_.record(now, views_.history_values(), batch);
}

void ControlPlane::check_liveness(Instant now, Batch& batch) {
  std::vector<std::vector<const ServerJob*>> running;
  for (NodeId id : nodes_.silent(now)) {
    const std::string reason = nodes_.mark_not_ready(id, now, batch);
    if (running.empty()) running = state_.running_by_node();
    std::vector<JobId> ids;
    for (const ServerJob* job : running[id.value]) ids.push_back(job->id);
    for (JobId job_id : ids) {
      ServerJob& job = state_.jobs().at(job_id);
      if (job.state == JobState::kRunning) jobs_.requeue_run(job, true, reason, now, batch);
    }
  }
}

std::optional<Instant> ControlPlane::next_wakeup(Instant now) const {
  std::optional<Instant> next = jobs_wakeup_;
  const auto sooner = [&](std::optional<Instant> at) {
    if (at && (!next || *at < *next)) next = at;
  };
  if (auto wake = state_.scheduler().next_wakeup(unix_seconds(now)))
    sooner(instant_from_unix_seconds(*wake));
  sooner(nodes_.next_silence(now));
  sooner(clerk_.next_post());
  sooner(history_.next_sample());
  sooner(services_.next_wakeup(now));
  if (const PrewarmPlanner* planner = state_.prewarm()) {
    if (auto due = planner->due_at()) sooner(instant_from_unix_seconds(*due));
  }
  return next;
}

Reply ControlPlane::history(const Principal& who, HistoryQuery query) const {
  if (who.role != Role::kAdmin) {
    query.visible = [tenant = who.role == Role::kUser ? who.tenant
                                                      : std::string()](const std::string& key) {
      const std::optional<std::string> of = history_label(key, "tenant");
      return !of || (!tenant.empty() && *of == tenant);
    };
  }
  return answer(history_.query(query));
}

Result<Scheduler> ControlPlane::rebuild_scheduler(const TenantsSpec& tenants, Instant now) const {
  const ControlPlaneSetup& setup = state_.setup();
  auto pool = Pool::create(setup.cluster.models, setup.cluster.topology, setup.cluster.nodes);
  if (!pool) return std::unexpected(pool.error());
  auto book = TenantBook::create(tenants, setup.cluster.models);
  if (!book) return std::unexpected(book.error());
  auto scheduler = Scheduler::create(std::move(*pool), std::move(*book), setup.scheduler);
  if (!scheduler) return std::unexpected(scheduler.error());
  for (JobId id : state_.live()) {
    if (auto ok = jobs_.restore(*scheduler, state_.jobs().at(id), now); !ok) {
      return fail(ok.error().field, fmt::format("job {}: {}", id, ok.error().reason));
    }
  }
  // As in create: the same nodes, so a refusal is a bug; the old scheduler is kept.
  if (auto cordoned = nodes_.cordon(*scheduler); !cordoned) {
    return std::unexpected(cordoned.error());
  }
  return scheduler;
}

}  // namespace tidepool
