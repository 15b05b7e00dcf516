#include "server/burst_desk.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "core/burst.h"

namespace tidepool {
namespace {

// Rented nodes get this long past their start-up delay and a heartbeat timeout to register.
constexpr Millis kBurstStartSlack = std::chrono::minutes{2};
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

std::vector<LostRental> BurstDesk::restore(Instant now, Batch& repairs) {
  std::vector<LostRental> orphaned;
  for (JobId id : state_.live()) {
    ServerJob& job = state_.jobs().at(id);
    if (!job.burst) continue;
    // A rental whose offer left the market file: given up (a running job goes back to the pool).
    if (!clerk_.offer_index(job.burst->offer)) {
      orphaned.push_back(
          {id, fmt::format("offer {} is no longer in the market file", job.burst->offer), false});
      continue;
    }
    for (std::size_t t = 0; t < job.burst->nodes.size(); ++t) {
      // A server that was down heard nothing: each agent gets a full timeout from now.
      nodes_.add_rented(job.burst->nodes[t], id, static_cast<int>(t),
                        job.state == JobState::kRunning ? now : kNotYet, now);
    }
    if (job.state == JobState::kPending) {
      request_up(job, now, repairs);
      PlaneState::stage(repairs, job);
    }
  }
  return orphaned;
}

// --- renting ---

void BurstDesk::rent_waiting(Instant now, Batch& batch) {
  refusals_.clear();
  const ServerMarket* market = clerk_.market();
  if (market == nullptr) return;
  const std::optional<BurstPolicy> policy = market->burst_policy();
  const std::vector<BurstOffer>& offers = market->burst_offers();
  if (!policy || offers.empty()) return;
  // The pending jobs in the pool's queue (not renting, held or waiting for others), as core jobs.
  const Scheduler& scheduler = state_.scheduler();
  std::vector<Job> jobs;
  std::vector<Seconds> waited;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state != JobState::kPending || state_.outside_scheduler(job)) continue;
    const Seconds wait = whole_seconds(now - job.transitions.back().at);
    if (wait < policy->threshold) continue;
    auto core = state_.to_core_job(job, scheduler.book());
    if (!core) continue;
    jobs.push_back(std::move(*core));
    waited.push_back(wait);
  }
  std::vector<WaitingJob> waiting;
  for (std::size_t i = 0; i < jobs.size(); ++i) waiting.push_back({&jobs[i], waited[i]});
  const std::vector<BurstCandidate> candidates = burst_candidates(waiting, scheduler, *policy);
  if (candidates.empty()) return;
  // GPUs of each offer rented now; an offer that is resting has no room.
  std::vector<std::int64_t> rented = rented_gpus_by_offer();
  for (std::size_t i = 0; i < offers.size(); ++i) {
    auto paused = offer_paused_until_.find(offers[i].name);
    if (paused != offer_paused_until_.end() && paused->second > now) {
      rented[i] = offers[i].max_gpus;
    }
  }
  const BurstChoice choice = choose_bursts(
      candidates, offers, rented, market->desk().remaining_budgets(unix_seconds(now)), *policy);
  for (const BurstRefusal& refusal : choice.refusals) refusals_[refusal.job] = refusal.reason;
  for (const BurstDecision& decision : choice.decisions) {
    rent(state_.jobs().at(decision.job), decision.offer, now, batch);
  }
}

void BurstDesk::rent(ServerJob& job, std::size_t offer, Instant now, Batch& batch) {
  const BurstOffer& o = clerk_.offers()[offer];
  // Chosen from the scheduler's queue (rent_waiting): it leaves it.
  state_.withdraw_pending(job, now, batch);
  const Seconds waited = whole_seconds(now - job.transitions.back().at);
  ++job.bursts;
  ++rentals_;
  BurstRun run;
  run.offer = o.name;
  run.provider = o.provider;
  run.requested_at = now;
  run.charged_to = now;
  for (int t = 0; t < job.spec.tasks; ++t) {
    run.nodes.push_back(fmt::format("{}-{}-{}-{}", o.name, job.id, job.bursts, t));
  }
  job.burst = std::move(run);
  job.move_to(JobState::kPending, now,
              fmt::format("waited {} s, past the burst threshold: renting {} node(s) of offer {} "
                          "from provider {}",
                          waited, job.spec.tasks, o.name, o.provider));
  request_up(job, now, batch);
  state_.record_job(batch, job, now, "job.bursting");
  state_.mark_dirty();
}

void BurstDesk::request_up(ServerJob& job, Instant now, Batch& batch) {
  BurstRun& run = *job.burst;
  state_.revoke_tokens(run.tokens, batch);
  run.tokens.clear();
  const BurstOffer& offer = clerk_.offers()[*clerk_.offer_index(run.offer)];
  const int gpus = rented_gpus_per_task(job.spec);
  nlohmann::json nodes = nlohmann::json::array();
  for (std::size_t t = 0; t < run.nodes.size(); ++t) {
    NewToken token = make_token(
        Role::kAgent, "", run.nodes[t],
        fmt::format("rented node of job {} (offer {}, task {})", job.id, run.offer, t), now);
    state_.store_token(token.record, batch);
    run.tokens.push_back(token.record.id);
    nodes.push_back(
        {{"node", run.nodes[t]}, {"task", t}, {"gpus", gpus}, {"token", std::move(token.secret)}});
    nodes_.add_rented(run.nodes[t], job.id, static_cast<int>(t));
  }
  const std::int64_t call =
      ask_provider(job, run, "up",
                   {{"model", state_.scheduler().pool().models().name(offer.model)},
                    {"spot", offer.spot},
                    {"price_per_gpu_hour", money_text(offer.price_per_gpu_hour)},
                    {"currency", clerk_.market()->spec().currency},
                    {"startup_delay_seconds", offer.startup_delay},
                    {"nodes", std::move(nodes)}});
  awaited_up_[call] = {job.id, run.requested_at};
  state_.emit(batch, now, "burst.requested",
              {{"job", job.id},
               {"tenant", job.spec.tenant},
               {"offer", run.offer},
               {"provider", run.provider},
               {"nodes", run.nodes}});
}

std::vector<LostRental> BurstDesk::lost_rentals(Instant now) {
  std::vector<LostRental> lost;
  if (nodes_.rented().empty()) return lost;
  const Millis timeout = state_.setup().heartbeat_timeout;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (!job.burst) continue;
    const BurstRun& run = *job.burst;
    if (job.state == JobState::kPending) {
      const auto offer = clerk_.offer_index(run.offer);
      const Millis startup =
          offer ? millis_from_seconds(clerk_.offers()[*offer].startup_delay) : Millis{0};
      const Instant deadline = run.requested_at + startup + timeout + kBurstStartSlack;
      if (now > deadline) {
        offer_paused_until_[run.offer] =
            now + millis_from_seconds(std::max<Seconds>(
                      kOfferPause, clerk_.burst_policy().value_or(BurstPolicy{}).threshold));
        lost.push_back({id, fmt::format("the rented nodes of offer {} did not all register "
                                        "within {} s",
                                        run.offer, whole_seconds(deadline - run.requested_at))});
      }
      continue;
    }
    for (const std::string& node : run.nodes) {
      const PlaneNode* rented = nodes_.find(node);
      if (rented == nullptr || rented->kind != NodeKind::kRented) continue;
      const Millis silent_for = now - rented->last_heartbeat_at;
      if (silent_for > timeout) {
        nodes_.count_failure();
        lost.push_back({id, fmt::format("rented node {}'s agent sent no heartbeat for {} s "
                                        "(timeout {} s)",
                                        node, whole_seconds(silent_for), whole_seconds(timeout))});
        break;
      }
    }
  }
  return lost;
}

void BurstDesk::release(ServerJob& job, const std::string& reason, bool charge, Instant now,
                        Batch& batch) {
  if (!job.burst) return;
  if (charge) clerk_.charge_rental(job, now, batch);
  const BurstRun run = std::move(*job.burst);
  job.burst.reset();
  state_.revoke_tokens(run.tokens, batch);
  nlohmann::json nodes = nlohmann::json::array();
  for (const std::string& node : run.nodes) {
    nodes.push_back({{"node", node}});
    nodes_.forget_rented(node);
  }
  state_.emit(batch, now, "burst.released",
              {{"job", job.id}, {"offer", run.offer}, {"nodes", run.nodes}, {"reason", reason}});
  if (clerk_.hook_of(run.provider).empty()) {
    state_.emit(batch, now, "burst.hook_failed",
                {{"job", job.id},
                 {"action", "down"},
                 {"provider", run.provider},
                 {"reason", fmt::format("provider '{}' has no hook in the market file any more; "
                                        "release nodes {} by hand",
                                        run.provider, fmt::join(run.nodes, ", "))}});
    return;
  }
  ask_provider(job, run, "down", {{"nodes", std::move(nodes)}, {"reason", reason}});
}

// --- the rented nodes' agents ---

Outcome<void> BurstDesk::register_node(const std::string& node,
                                       const NodeRegistration& registration, Instant now,
                                       Batch& batch) {
  const PlaneNode& rented = *nodes_.find(node);
  ServerJob& job = state_.jobs().at(rented.job);
  const int needed = rented_gpus_per_task(job.spec);
  const int found = registration.gpus.value_or(static_cast<int>(registration.devices.size()));
  if (found < needed) {
    return conflict("gpus", fmt::format("rented node '{}' runs task {} of job {}, which needs {} "
                                        "GPU(s); the agent found {}",
                                        node, rented.task, job.id, needed, found));
  }
  nodes_.register_rented(node, registration, now);
  state_.emit(batch, now, "node.registered",
              {{"node", node},
               {"gpus", registration.devices.size()},
               {"address", registration.address},
               {"agent_version", registration.agent_version},
               {"burst", {{"job", job.id}, {"offer", job.burst->offer}, {"task", rented.task}}}});
  start_when_up(job, now, batch);
  return {};
}

std::vector<const ServerJob*> BurstDesk::heard_from(const PlaneNode& node, Instant now,
                                                    Batch& batch) {
  ServerJob& job = state_.jobs().at(node.job);
  start_when_up(job, now, batch);
  if (job.state != JobState::kRunning) return {};
  return {&job};
}

void BurstDesk::start_when_up(ServerJob& job, Instant now, Batch& batch) {
  if (job.state != JobState::kPending || !job.burst) return;
  for (const std::string& node : job.burst->nodes) {
    const PlaneNode* rented = nodes_.find(node);
    if (rented == nullptr || rented->kind != NodeKind::kRented ||
        rented->registered_at == kNotYet) {
      return;
    }
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
  state_.observe_queue_wait(job, now);
  job.started_at = now;
  job.tasks_done.clear();
  ++job.starts;
  job.move_to(JobState::kRunning, now,
              fmt::format("placed on {} rented node(s) of offer {} (provider {})", run.nodes.size(),
                          run.offer, run.provider));
  state_.record_job(batch, job, now, "job.started");
  state_.mark_dirty();
}

// --- the providers' hooks ---

std::vector<ProviderCall> BurstDesk::take_provider_calls() {
  return std::exchange(provider_calls_, {});
}

std::int64_t BurstDesk::ask_provider(const ServerJob& job, const BurstRun& run,
                                     const std::string& action, nlohmann::json request) {
  request["action"] = action;
  request["provider"] = run.provider;
  request["offer"] = run.offer;
  request["job"] = job_brief(job);
  ProviderCall call;
  call.id = next_call_id_++;
  call.provider = run.provider;
  call.hook = clerk_.hook_of(run.provider);
  call.action = action;
  call.job = job.id;
  call.request = std::move(request);
  provider_calls_.push_back(std::move(call));
  return provider_calls_.back().id;
}

std::optional<LostRental> BurstDesk::provider_result(std::int64_t call, bool ok,
                                                     const std::string& output, Instant now,
                                                     Batch& batch) {
  auto awaited = awaited_up_.find(call);
  if (awaited == awaited_up_.end()) {
    // A `down`: only a failure needs someone.
    if (!ok) {
      state_.emit(batch, now, "burst.hook_failed",
                  {{"call", call},
                   {"action", "down"},
                   {"reason",
                    "the provider's down hook failed; the nodes may still be rented: " + output}});
    }
    return std::nullopt;
  }
  const auto [job_id, requested_at] = awaited->second;
  awaited_up_.erase(awaited);
  auto it = state_.jobs().find(job_id);
  if (ok || it == state_.jobs().end()) return std::nullopt;
  ServerJob& job = it->second;
  // Only the rental this call was for, if the job still waits for it.
  if (!job.burst || job.burst->requested_at != requested_at || job.state != JobState::kPending) {
    return std::nullopt;
  }
  const std::string offer = job.burst->offer;
  const Seconds threshold = clerk_.burst_policy().value_or(BurstPolicy{}).threshold;
  offer_paused_until_[offer] = now + millis_from_seconds(std::max<Seconds>(kOfferPause, threshold));
  std::string reason = fmt::format("provider {}'s up hook failed for offer {}: {}",
                                   job.burst->provider, offer, output);
  state_.emit(
      batch, now, "burst.hook_failed",
      {{"call", call}, {"action", "up"}, {"job", job.id}, {"offer", offer}, {"reason", reason}});
  return LostRental{job.id, std::move(reason), /*charge=*/false};
}

std::vector<std::int64_t> BurstDesk::rented_gpus_by_offer() const {
  std::vector<std::int64_t> rented(clerk_.offers().size(), 0);
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (!job.burst) continue;
    if (auto offer = clerk_.offer_index(job.burst->offer)) rented[*offer] += rented_gpus(job.spec);
  }
  return rented;
}

}  // namespace tidepool
