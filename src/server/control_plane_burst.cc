// The control plane's side of bursting (core/burst.h): a pending job that waited past the market
// file's burst threshold is sent to capacity rented from a provider, through the provider's hook.
//
// A rental, step by step:
//   1. Each pass, the jobs waiting past the threshold (longest first) go through choose_bursts
//      with the offers, the GPUs each offer has rented now and the tenants' remaining budgets. A
//      chosen job leaves the scheduler's queue (it stays pending) and gets a BurstRun: one node per
//      task, named "<offer>-<job>-<rental>-<task>", and an agent token per node.
//   2. The server runs `<hook> up` with the request on stdin (provider_hooks.h): the offer, the
//      job, and per node its name, task, GPUs and agent token. The hook rents the machines and
//      starts `tidepool agent --node NAME --token TOKEN` on each (cloud-init, a pod, ...).
//   3. Each rented node's agent registers like any agent (it needs as many GPUs as its task).
//      Once all have, the job runs there: placement on the rented nodes, assignments in their
//      heartbeats, exits and checkpoints reported as usual. The pool's scheduler never sees it.
//   4. When the job ends (succeeded, failed, cancelled, stopped at a cap), or a rented node falls
//      silent, or the nodes do not come up within the offer's start-up delay plus the heartbeat
//      timeout plus two minutes, the server runs `<hook> down` with the nodes, revokes their
//      tokens, and (for a silent node or a late start) queues the job in the pool again.
//   5. Money: the tenant is charged the offer's price for every rented GPU from the `up` request
//      to the release (start-up paid), at each ledger posting and at the end; the same amount is
//      booked as owed to the provider (EntryKind::kBurstCharge / kBurstCost). A failed `up`
//      rented nothing and is not charged; the offer then rests for max(threshold, 5 minutes).
//
// Hooks must be idempotent: after a restart the server asks `up` again (with new tokens) for a
// rental whose nodes had not all registered, and `down` may be asked for nodes already gone.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/burst.h"
#include "server/control_plane.h"

namespace tidepool {
namespace {

// Rented nodes get this long past their start-up delay and a heartbeat timeout to register.
constexpr std::int64_t kBurstStartSlackMs = 120'000;
// After a failed `up` (or nodes that never came up) the offer rests at least this long.
constexpr Seconds kOfferPause = 300;

nlohmann::json job_brief(const ServerJob& job) {
  const JobSpec& spec = job.spec;
  return {{"id", job.id},
          {"name", spec.name},
          {"tenant", spec.tenant},
          {"queue", spec.queue},
          {"tasks", spec.tasks},
          {"gpus_per_task", spec.gpus_per_task},
          {"preemptible", spec.preemptible},
          {"checkpoints", spec.checkpoint_interval.has_value()}};
}

}  // namespace

std::vector<ProviderCall> ControlPlane::take_provider_calls() {
  return std::exchange(provider_calls_, {});
}

std::optional<std::size_t> ControlPlane::offer_index(const std::string& name) const {
  if (!market_) return std::nullopt;
  const std::vector<BurstOffer>& offers = market_->burst_offers();
  for (std::size_t i = 0; i < offers.size(); ++i) {
    if (offers[i].name == name) return i;
  }
  return std::nullopt;
}

int ControlPlane::rented_gpus_per_task(const JobSpec& spec) { return spec.gpus_per_task; }

std::int64_t ControlPlane::rented_gpus(const JobSpec& spec) {
  return std::int64_t{spec.tasks} * rented_gpus_per_task(spec);
}

std::vector<std::int64_t> ControlPlane::rented_gpus_by_offer() const {
  std::vector<std::int64_t> rented(market_ ? market_->burst_offers().size() : 0, 0);
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (!job.burst) continue;
    if (auto offer = offer_index(job.burst->offer)) rented[*offer] += rented_gpus(job.spec);
  }
  return rented;
}

std::int64_t ControlPlane::ask_provider(const ServerJob& job, const BurstRun& run,
                                        const std::string& action, nlohmann::json request) {
  request["action"] = action;
  request["provider"] = run.provider;
  request["offer"] = run.offer;
  request["job"] = job_brief(job);
  ProviderCall call;
  call.id = next_call_id_++;
  call.provider = run.provider;
  call.hook = hook_of(run.provider);
  call.action = action;
  call.job = job.id;
  call.request = std::move(request);
  provider_calls_.push_back(std::move(call));
  return provider_calls_.back().id;
}

std::string ControlPlane::hook_of(const std::string& provider) const {
  if (!market_) return {};
  for (const BurstProviderSpec& p : market_->spec().burst_providers) {
    if (p.name == provider) return p.hook;
  }
  return {};
}

void ControlPlane::revoke_tokens(const std::vector<std::string>& ids, Batch& batch) {
  for (const std::string& id : ids) {
    if (auto token = tokens_->find(id); token && !token->revoked) {
      token->revoked = true;
      tokens_->put(*token);
      batch.tokens.push_back(*token);
    }
  }
}

void ControlPlane::burst_waiting(std::int64_t now_ms, Batch& batch) {
  burst_refusals_.clear();
  if (!market_) return;
  const std::optional<BurstPolicy> policy = market_->burst_policy();
  const std::vector<BurstOffer>& offers = market_->burst_offers();
  if (!policy || offers.empty()) return;
  // The pending jobs in the pool's queue (not renting, held or waiting for others), as core jobs.
  std::vector<Job> jobs;
  std::vector<Seconds> waited;
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (job.state != JobState::kPending || outside_scheduler(job)) continue;
    const Seconds wait = to_seconds(now_ms - job.transitions.back().at_ms);
    if (wait < policy->threshold) continue;
    auto core = to_core_job(job, scheduler_.book());
    if (!core) continue;
    jobs.push_back(std::move(*core));
    waited.push_back(wait);
  }
  std::vector<WaitingJob> waiting;
  for (std::size_t i = 0; i < jobs.size(); ++i) waiting.push_back({&jobs[i], waited[i]});
  const std::vector<BurstCandidate> candidates = burst_candidates(waiting, scheduler_, *policy);
  if (candidates.empty()) return;
  // GPUs of each offer rented now; an offer that is resting has no room.
  std::vector<std::int64_t> rented = rented_gpus_by_offer();
  for (std::size_t i = 0; i < offers.size(); ++i) {
    auto paused = offer_paused_until_ms_.find(offers[i].name);
    if (paused != offer_paused_until_ms_.end() && paused->second > now_ms) {
      rented[i] = offers[i].max_gpus;
    }
  }
  const BurstChoice choice = choose_bursts(
      candidates, offers, rented, market_->desk().remaining_budgets(to_seconds(now_ms)), *policy);
  for (const BurstRefusal& refusal : choice.refusals) {
    burst_refusals_[refusal.job.value] = refusal.reason;
  }
  for (const BurstDecision& decision : choice.decisions) {
    rent(jobs_.at(decision.job.value), decision.offer, now_ms, batch);
  }
}

void ControlPlane::rent(ServerJob& job, std::size_t offer, std::int64_t now_ms, Batch& batch) {
  const BurstOffer& o = market_->burst_offers()[offer];
  // Chosen from the scheduler's queue (burst_waiting): it leaves it.
  withdraw_pending(job, now_ms, batch);
  const Seconds waited = to_seconds(now_ms - job.transitions.back().at_ms);
  ++job.bursts;
  ++burst_rentals_;
  BurstRun run;
  run.offer = o.name;
  run.provider = o.provider;
  run.requested_ms = now_ms;
  run.charged_to_ms = now_ms;
  for (int t = 0; t < job.spec.tasks; ++t) {
    run.nodes.push_back(fmt::format("{}-{}-{}-{}", o.name, job.id, job.bursts, t));
  }
  job.burst = std::move(run);
  job.move_to(JobState::kPending, now_ms,
              fmt::format("waited {} s, past the burst threshold: renting {} node(s) of offer {} "
                          "from provider {}",
                          waited, job.spec.tasks, o.name, o.provider));
  request_up(job, now_ms, batch);
  record_job(batch, job, now_ms, "job.bursting");
  dirty_ = true;
}

void ControlPlane::request_up(ServerJob& job, std::int64_t now_ms, Batch& batch) {
  BurstRun& run = *job.burst;
  revoke_tokens(run.tokens, batch);
  run.tokens.clear();
  const BurstOffer& offer = market_->burst_offers()[*offer_index(run.offer)];
  const int gpus = rented_gpus_per_task(job.spec);
  nlohmann::json nodes = nlohmann::json::array();
  for (std::size_t t = 0; t < run.nodes.size(); ++t) {
    NewToken token = make_token(
        Role::kAgent, "", run.nodes[t],
        fmt::format("rented node of job {} (offer {}, task {})", job.id, run.offer, t), now_ms);
    tokens_->put(token.record);
    batch.tokens.push_back(token.record);
    run.tokens.push_back(token.record.id);
    nodes.push_back(
        {{"node", run.nodes[t]}, {"task", t}, {"gpus", gpus}, {"token", std::move(token.secret)}});
    BurstNode& rented = burst_nodes_[run.nodes[t]];
    rented = BurstNode{};
    rented.job = job.id;
    rented.task = static_cast<int>(t);
  }
  const std::int64_t call =
      ask_provider(job, run, "up",
                   {{"model", scheduler_.pool().models().name(offer.model)},
                    {"spot", offer.spot},
                    {"price_per_gpu_hour", money_text(offer.price_per_gpu_hour)},
                    {"currency", market_->spec().currency},
                    {"startup_delay_seconds", offer.startup_delay},
                    {"nodes", std::move(nodes)}});
  awaited_up_[call] = {job.id, run.requested_ms};
  emit(batch, now_ms, "burst.requested",
       {{"job", job.id},
        {"tenant", job.spec.tenant},
        {"offer", run.offer},
        {"provider", run.provider},
        {"nodes", run.nodes}});
}

void ControlPlane::charge_burst(ServerJob& job, std::int64_t now_ms, Batch& batch) {
  if (!market_ || !job.burst) return;
  BurstRun& run = *job.burst;
  const Seconds from = to_seconds(run.charged_to_ms);
  const Seconds to = to_seconds(now_ms);
  if (to <= from) return;
  run.charged_to_ms = to * 1000;
  const auto offer = offer_index(run.offer);
  const auto tenant = scheduler_.book().find_tenant(job.spec.tenant);
  if (!offer || !tenant) return;  // the files changed: nothing to charge it to
  auto charged = market_->charge_burst(JobId{static_cast<std::uint32_t>(job.id)}, *tenant, *offer,
                                       rented_gpus(job.spec), from, to);
  if (!charged) market_failed(charged.error(), now_ms, batch);
  store_ledger(batch);
}

void ControlPlane::release_burst(ServerJob& job, const std::string& reason, bool charge,
                                 std::int64_t now_ms, Batch& batch) {
  if (!job.burst) return;
  if (charge) charge_burst(job, now_ms, batch);
  const BurstRun run = std::move(*job.burst);
  job.burst.reset();
  revoke_tokens(run.tokens, batch);
  nlohmann::json nodes = nlohmann::json::array();
  for (const std::string& node : run.nodes) {
    nodes.push_back({{"node", node}});
    burst_nodes_.erase(node);
    telemetry_.forget_node(node);
  }
  emit(batch, now_ms, "burst.released",
       {{"job", job.id}, {"offer", run.offer}, {"nodes", run.nodes}, {"reason", reason}});
  if (hook_of(run.provider).empty()) {
    emit(batch, now_ms, "burst.hook_failed",
         {{"job", job.id},
          {"action", "down"},
          {"provider", run.provider},
          {"reason", fmt::format("provider '{}' has no hook in the market file any more; release "
                                 "nodes {} by hand",
                                 run.provider, fmt::join(run.nodes, ", "))}});
    return;
  }
  ask_provider(job, run, "down", {{"nodes", std::move(nodes)}, {"reason", reason}});
}

void ControlPlane::requeue_from_burst(ServerJob& job, const std::string& reason, bool charge,
                                      std::int64_t now_ms, Batch& batch) {
  const bool was_running = job.state == JobState::kRunning;
  release_burst(job, reason, charge, now_ms, batch);
  if (was_running) {
    stop_run(job, "node_failure", now_ms);
    ++job.faults;
    job.move_to(JobState::kPreempted, now_ms, reason);
    record_job(batch, job, now_ms, "job.requeued");
  }
  queue_again(job, "back in the pool's queue: " + reason, now_ms, batch);
}

void ControlPlane::check_bursts(std::int64_t now_ms, Batch& batch) {
  if (burst_nodes_.empty()) return;
  std::vector<std::pair<std::int64_t, std::string>> lost;  // (job, why)
  for (std::int64_t id : live_) {
    const ServerJob& job = jobs_.at(id);
    if (!job.burst) continue;
    const BurstRun& run = *job.burst;
    if (job.state == JobState::kPending) {
      const auto offer = offer_index(run.offer);
      const std::int64_t startup =
          offer ? market_->burst_offers()[*offer].startup_delay * 1000 : std::int64_t{0};
      const std::int64_t deadline =
          run.requested_ms + startup + setup_.heartbeat_timeout_ms + kBurstStartSlackMs;
      if (now_ms > deadline) {
        offer_paused_until_ms_[run.offer] =
            now_ms + std::max<Seconds>(kOfferPause,
                                       market_->burst_policy().value_or(BurstPolicy{}).threshold) *
                         1000;
        lost.emplace_back(id, fmt::format("the rented nodes of offer {} did not all register "
                                          "within {} s",
                                          run.offer, (deadline - run.requested_ms) / 1000));
      }
      continue;
    }
    for (const std::string& node : run.nodes) {
      auto it = burst_nodes_.find(node);
      if (it == burst_nodes_.end()) continue;
      const std::int64_t silent_ms = now_ms - it->second.last_heartbeat_ms;
      if (silent_ms > setup_.heartbeat_timeout_ms) {
        ++node_failures_;
        lost.emplace_back(id,
                          fmt::format("rented node {}'s agent sent no heartbeat for {} s "
                                      "(timeout {} s)",
                                      node, silent_ms / 1000, setup_.heartbeat_timeout_ms / 1000));
        break;
      }
    }
  }
  for (const auto& [id, reason] : lost) {
    emit(batch, now_ms, "burst.lost", {{"job", id}, {"reason", reason}});
    requeue_from_burst(jobs_.at(id), reason, true, now_ms, batch);
  }
}

void ControlPlane::start_when_up(ServerJob& job, std::int64_t now_ms, Batch& batch) {
  if (job.state != JobState::kPending || !job.burst) return;
  for (const std::string& node : job.burst->nodes) {
    auto it = burst_nodes_.find(node);
    if (it == burst_nodes_.end() || it->second.registered_ms == 0) return;
  }
  const BurstRun& run = *job.burst;
  const int gpus = rented_gpus_per_task(job.spec);
  job.placement.clear();
  for (const std::string& node : run.nodes) {
    TaskPlace place{node, {}};
    for (int g = 0; g < gpus; ++g) place.gpus.push_back(g);
    job.placement.push_back(std::move(place));
  }
  job.note_ran_on();
  observe_queue_wait(job, now_ms);
  job.started_ms = now_ms;
  job.tasks_done.clear();
  ++job.starts;
  job.move_to(JobState::kRunning, now_ms,
              fmt::format("placed on {} rented node(s) of offer {} (provider {})", run.nodes.size(),
                          run.offer, run.provider));
  record_job(batch, job, now_ms, "job.started");
  dirty_ = true;
}

Reply ControlPlane::register_burst_node(const std::string& node,
                                        const NodeRegistration& registration, std::int64_t now_ms,
                                        Batch& batch) {
  BurstNode& rented = burst_nodes_.at(node);
  ServerJob& job = jobs_.at(rented.job);
  const int needed = rented_gpus_per_task(job.spec);
  const int found = registration.gpus.value_or(static_cast<int>(registration.devices.size()));
  if (found < needed) {
    return refuse(Refusal::kConflict,
                  Error{"gpus", fmt::format("rented node '{}' runs task {} of job {}, which "
                                            "needs {} GPU(s); the agent found {}",
                                            node, rented.task, job.id, needed, found)});
  }
  rented.reported = registration;
  rented.registered_ms = now_ms;
  rented.last_heartbeat_ms = now_ms;
  emit(batch, now_ms, "node.registered",
       {{"node", node},
        {"gpus", registration.devices.size()},
        {"address", registration.address},
        {"agent_version", registration.agent_version},
        {"burst", {{"job", job.id}, {"offer", job.burst->offer}, {"task", rented.task}}}});
  start_when_up(job, now_ms, batch);
  return answer(burst_node_json(node));
}

nlohmann::json ControlPlane::burst_node_json(const std::string& node) const {
  // The shape of a cluster node's (node_json), with the rental in "rental".
  const BurstNode& rented = burst_nodes_.at(node);
  const ServerJob& job = jobs_.at(rented.job);
  const bool running = job.state == JobState::kRunning;
  const int gpus = rented_gpus_per_task(job.spec);
  const auto offer = job.burst ? offer_index(job.burst->offer) : std::nullopt;
  nlohmann::json jobs = nlohmann::json::array();
  if (running) {
    jobs.push_back({{"job", job.id},
                    {"tenant", job.spec.tenant},
                    {"name", job.spec.name},
                    {"tasks", 1},
                    {"gpus", gpus},
                    {"gpu_milli", job.spec.gpu_milli}});
  }
  return {{"name", node},
          {"state", rented.registered_ms == 0 ? "starting" : "ready"},
          {"gpu_model",
           offer ? scheduler_.pool().models().name(market_->burst_offers()[*offer].model) : ""},
          {"gpus", gpus},
          {"gpu_milli_allocated", running ? std::int64_t{gpus} * job.spec.gpu_milli : 0},
          {"leaf", "(rented)"},
          {"spine", ""},
          {"jobs", std::move(jobs)},
          {"registered_ms", rented.registered_ms},
          {"last_heartbeat_ms", rented.last_heartbeat_ms},
          {"address", rented.reported.address},
          {"drain_reason", ""},
          {"burst", true},
          {"rental",
           {{"offer", job.burst ? job.burst->offer : ""},
            {"provider", job.burst ? job.burst->provider : ""},
            {"job", rented.job},
            {"task", rented.task}}}};
}

nlohmann::json ControlPlane::burst_pending_json(const ServerJob& job) const {
  const BurstRun& run = *job.burst;
  int up = 0;
  for (const std::string& node : run.nodes) {
    auto it = burst_nodes_.find(node);
    if (it != burst_nodes_.end() && it->second.registered_ms != 0) ++up;
  }
  return {{"kind", "burst"},
          {"reason", fmt::format("waiting for rented capacity: offer {} from provider {}, {} of {} "
                                 "node(s) registered",
                                 run.offer, run.provider, up, run.nodes.size())}};
}

Reply ControlPlane::provider_result(std::int64_t call, bool ok, const std::string& output,
                                    std::int64_t now_ms, Batch& batch) {
  auto awaited = awaited_up_.find(call);
  if (awaited == awaited_up_.end()) {
    // A `down`: only a failure needs someone.
    if (!ok) {
      emit(batch, now_ms, "burst.hook_failed",
           {{"call", call},
            {"action", "down"},
            {"reason",
             "the provider's down hook failed; the nodes may still be rented: " + output}});
    }
    return answer({{"call", call}});
  }
  const auto [job_id, requested_ms] = awaited->second;
  awaited_up_.erase(awaited);
  auto it = jobs_.find(job_id);
  if (ok || it == jobs_.end()) return answer({{"call", call}});
  ServerJob& job = it->second;
  // Only the rental this call was for, if the job still waits for it.
  if (!job.burst || job.burst->requested_ms != requested_ms || job.state != JobState::kPending) {
    return answer({{"call", call}});
  }
  const std::string offer = job.burst->offer;
  const Seconds threshold = market_->burst_policy().value_or(BurstPolicy{}).threshold;
  offer_paused_until_ms_[offer] = now_ms + std::max<Seconds>(kOfferPause, threshold) * 1000;
  const std::string reason = fmt::format("provider {}'s up hook failed for offer {}: {}",
                                         job.burst->provider, offer, output);
  emit(batch, now_ms, "burst.hook_failed",
       {{"call", call}, {"action", "up"}, {"job", job.id}, {"offer", offer}, {"reason", reason}});
  requeue_from_burst(job, reason, /*charge=*/false, now_ms, batch);
  return answer({{"call", call}});
}

void ControlPlane::restore_bursts(std::int64_t now_ms, Batch& repairs) {
  std::vector<std::int64_t> orphaned;
  for (std::int64_t id : live_) {
    ServerJob& job = jobs_.at(id);
    if (!job.burst) continue;
    if (!offer_index(job.burst->offer)) {
      orphaned.push_back(id);
      continue;
    }
    for (std::size_t t = 0; t < job.burst->nodes.size(); ++t) {
      // A server that was down heard nothing: each agent gets a full timeout from now.
      BurstNode& rented = burst_nodes_[job.burst->nodes[t]];
      rented.job = id;
      rented.task = static_cast<int>(t);
      rented.registered_ms = job.state == JobState::kRunning ? now_ms : 0;
      rented.last_heartbeat_ms = now_ms;
    }
    if (job.state == JobState::kPending) {
      request_up(job, now_ms, repairs);
      stage(repairs, job);
    }
  }
  // A rental whose offer left the market file: given up (a running job goes back to the pool).
  for (std::int64_t id : orphaned) {
    ServerJob& job = jobs_.at(id);
    requeue_from_burst(job,
                       fmt::format("offer {} is no longer in the market file", job.burst->offer),
                       false, now_ms, repairs);
  }
}

}  // namespace tidepool
