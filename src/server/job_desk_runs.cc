// A job's moves: loaded from the store, queued, started and stopped by the scheduler's passes,
// requeued, ended; and its deadlines.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "core/duration_format.h"
#include "server/job_desk.h"

namespace tidepool {

// --- loading ---

void JobDesk::load(ServerJob loaded, Instant now, Batch& repairs) {
  // The next id follows the highest stored, up to the last (which admit() never gives).
  constexpr std::uint32_t kLast = std::numeric_limits<std::uint32_t>::max();
  if (loaded.id >= next_job_id_) {
    next_job_id_ = JobId{loaded.id.value == kLast ? kLast : loaded.id.value + 1};
  }
  if (!loaded.idempotency_key.empty()) {
    idempotency_[{loaded.spec.tenant, loaded.idempotency_key}] = loaded.id;
  }
  const JobId id = loaded.id;
  ServerJob& job = state_.jobs().emplace(id, std::move(loaded)).first->second;
  // A service is not live: the service desk takes it back (ControlPlane::create).
  if (is_final(job.state) || job.spec.service) return;
  add_live(job);
  if (auto restored = restore(state_.scheduler(), job, now); !restored) {
    drop_live(job);
    job.placement.clear();
    job.move_to(JobState::kFailed, now,
                "could not be restored after a restart: " + restored.error().message());
    job.ended_at = now;
    state_.record_job(repairs, job, now, "job.failed");
  }
}

Result<void> JobDesk::restore(Scheduler& scheduler, const ServerJob& job, Instant now) const {
  // A job on rented capacity (or waiting for it), held, or waiting for other jobs is outside the
  // pool's scheduler.
  if (job.state == JobState::kPending && state_.outside_scheduler(job)) return {};
  if (job.burst) return {};
  auto core = state_.to_core_job(job, scheduler.book());
  if (!core) return std::unexpected(core.error());
  if (job.state == JobState::kRunning) {
    auto assignments = state_.to_assignments(job);
    if (!assignments) return std::unexpected(assignments.error());
    auto adopted = scheduler.adopt(*core, *assignments,
                                   std::min(unix_seconds(job.started_at), unix_seconds(now)),
                                   unix_seconds(now));
    if (!adopted) return adopted;
  } else if (auto queued = scheduler.submit(*core, unix_seconds(now)); !queued) {
    return queued;
  }
  // The service of its ended runs, so that it does not rank as new work.
  if (job.attained_gpu_seconds == 0) return {};
  auto credited = scheduler.credit_attained(core->id, job.attained_gpu_seconds);
  if (credited) return credited;
  // Not restored after all: out of the scheduler again, so that no pass starts (or keeps) a job
  // the caller fails. Taking out a job just added cannot fail unless the scheduler is broken.
  auto out = job.state == JobState::kRunning
                 ? scheduler.finish(core->id, unix_seconds(now), std::nullopt)
                 : scheduler.withdraw(core->id, unix_seconds(now));
  if (out) out = scheduler.forget(core->id);
  if (!out) {
    return fail(credited.error().field,
                fmt::format("{}; and the scheduler kept the job: {}", credited.error().reason,
                            out.error().message()));
  }
  return credited;
}

// --- live jobs ---

void JobDesk::add_live(const ServerJob& job) {
  state_.set_live(job, true);
  if (job.state == JobState::kPending) note_dependencies(job);
  note_parked(job);
  if (job.spec.max_runtime) timed_.insert(job.id);
}

void JobDesk::drop_live(const ServerJob& job) {
  state_.set_live(job, false);
  timed_.erase(job.id);
  parked_.erase(job.id);
}

Result<void> JobDesk::enqueue(const Job& core, const ServerJob& job, Instant now, Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  if (auto queued = scheduler.submit(core, unix_seconds(now)); !queued) return queued;
  if (job.attained_gpu_seconds == 0) return {};
  auto credited = scheduler.credit_attained(core.id, job.attained_gpu_seconds);
  // Not queued after all (an implausible service): out again, so that no pass starts it.
  if (!credited) state_.withdraw_pending(job, now, batch);
  return credited;
}

// --- the moves ---

void JobDesk::end_job(ServerJob& job, JobState state, std::string reason, Instant now,
                      Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  const JobId core_id = job.id;
  // A job held, waiting for others or on rented capacity is not the scheduler's to end. One that
  // is must end there: a refusal means the two disagree (a bug), which internal_error shows.
  const bool scheduled = state_.in_scheduler(job);
  if (job.burst) {
    // On rented capacity, outside the scheduler: the rental ends with the job.
    bursts_.release(job, fmt::format("job {} {}: {}", job.id, job_state_name(state), reason), true,
                    now, batch);
  } else if (job.state == JobState::kRunning && !job.spec.service) {
    clerk_.stop(job, now, batch);
    std::optional<Seconds> observed;
    if (state == JobState::kSucceeded) observed = whole_seconds(now - job.started_at);
    if (auto ok = scheduler.finish(core_id, unix_seconds(now), observed); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now,
                            batch);
    }
  } else if (scheduled) {
    if (auto ok = scheduler.withdraw(core_id, unix_seconds(now)); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler withdraw", job.id), ok.error(), now,
                            batch);
    }
  }
  if (scheduled) {
    if (auto ok = scheduler.forget(core_id); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now,
                            batch);
    }
  }
  state_.forget_prewarm(job.id);  // a pending job's calls (a running job has none)
  drop_live(job);
  job.held.clear();  // an ended job is no longer held
  job.move_to(state, now, std::move(reason));
  job.ended_at = now;
  state_.mark_dirty();
  state_.record_job(batch, job, now, fmt::format("job.{}", job_state_name(state)));
  settle_dependents(job, now, batch);
}

void JobDesk::stop_run(ServerJob& job, const std::string& cause, Instant now) {
  const Instant saved_until = std::max(job.started_at, job.last_checkpoint_at);
  const Millis lost = std::max(Millis{0}, now - saved_until);
  job.lost_work += lost;
  lost_work_ms_by_cause_[cause] += lost.count();
  ++requeued_by_cause_[cause];
  job.placement.clear();
  job.tasks_done.clear();
}

void JobDesk::requeue_run(ServerJob& job, bool node_failure, const std::string& reason, Instant now,
                          Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  const JobId core_id = job.id;
  clerk_.stop(job, now, batch);
  job.attained_gpu_seconds =
      scheduler.attained_gpu_seconds(core_id, unix_seconds(now)).value_or(job.attained_gpu_seconds);
  // A running job on the pool's nodes is the scheduler's: a refusal is a bug (see end_job).
  if (auto ok = scheduler.finish(core_id, unix_seconds(now), std::nullopt); !ok) {
    state_.internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now, batch);
  }
  if (auto ok = scheduler.forget(core_id); !ok) {
    state_.internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now, batch);
  }
  stop_run(job, node_failure ? "node_failure" : "requeue", now);
  if (node_failure) ++job.faults;
  job.move_to(JobState::kPreempted, now, reason);
  state_.record_job(batch, job, now, "job.requeued");
  const std::string requeued = node_failure ? "requeued after a node failure" : reason;
  queue_again(job,
              job.checkpoint_path.empty()
                  ? requeued + "; restarts from the beginning (no checkpoint)"
                  : requeued + "; resumes from " + job.checkpoint_path,
              now, batch);
}

void JobDesk::requeue_from_burst(const LostRental& lost, Instant now, Batch& batch) {
  ServerJob& job = state_.jobs().at(lost.job);
  const bool was_running = job.state == JobState::kRunning;
  bursts_.release(job, lost.reason, lost.charge, now, batch);
  if (was_running) {
    stop_run(job, "node_failure", now);
    ++job.faults;
    job.move_to(JobState::kPreempted, now, lost.reason);
    state_.record_job(batch, job, now, "job.requeued");
  }
  queue_again(job, "back in the pool's queue: " + lost.reason, now, batch);
}

void JobDesk::queue_again(ServerJob& job, const std::string& reason, Instant now, Batch& batch) {
  state_.mark_dirty();
  auto core = state_.to_core_job(job, state_.scheduler().book());
  auto queued =
      core ? enqueue(*core, job, now, batch) : Result<void>(std::unexpected(core.error()));
  if (!queued) {
    drop_live(job);
    job.move_to(JobState::kFailed, now, "could not be queued again: " + queued.error().message());
    job.ended_at = now;
    state_.record_job(batch, job, now, "job.failed");
    settle_dependents(job, now, batch);
    return;
  }
  job.move_to(JobState::kPending, now, reason);
  note_parked(job);
  PlaneState::stage(batch, job);
}

// --- passes ---

void JobDesk::stop_overdue(Instant now, Batch& batch) {
  std::vector<JobId> overdue;
  for (JobId id : timed_) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kRunning && job.spec.max_runtime &&
        now - job.started_at >= millis_from_seconds(*job.spec.max_runtime)) {
      overdue.push_back(id);
    }
  }
  for (JobId id : overdue) {
    ServerJob& job = state_.jobs().at(id);
    end_job(job, JobState::kFailed,
            fmt::format("stopped: ran past its max_runtime of {}",
                        format_duration(*job.spec.max_runtime)),
            now, batch);
  }
}

void JobDesk::apply_pass(const PassResult& pass, const std::vector<PrewarmedStart>& prewarmed,
                         Instant now, Batch& batch) {
  const Scheduler& scheduler = state_.scheduler();
  for (const PreemptedJob& p : pass.preempted) {
    ServerJob& job = state_.jobs().at(p.job);
    std::string reason = fmt::format("preempted ({})", preemption_cause_name(p.cause));
    if (p.beneficiary) {
      // Who took its GPUs: the job, and its tenant.
      reason += fmt::format(" for job {}", p.beneficiary->value);
      const auto taker = state_.jobs().find(*p.beneficiary);
      if (taker != state_.jobs().end()) reason += " of tenant " + taker->second.spec.tenant;
    }
    clerk_.stop(job, now, batch);
    job.attained_gpu_seconds =
        scheduler.attained_gpu_seconds(p.job, unix_seconds(now)).value_or(job.attained_gpu_seconds);
    job.move_to(JobState::kPreempted, now, reason);
    stop_run(job, "preemption", now);
    ++job.preemptions;
    state_.record_job(batch, job, now, "job.preempted");
    job.move_to(JobState::kPending, now, "requeued after preemption");
  }
  for (std::size_t k = 0; k < pass.started.size(); ++k) {
    const StartedJob& s = pass.started[k];
    ServerJob& job = state_.jobs().at(s.job);
    state_.observe_queue_wait(job, now);
    job.prewarm.reset();
    if (k < prewarmed.size()) job.prewarm = prewarmed[k];
    state_.count_start(job.prewarm && job.prewarm->prewarmed);
    job.placement = state_.to_places(s.assignments);
    state_.note_placed(job);
    job.started_at = now;
    job.tasks_done.clear();
    job.note_ran_on();
    ++job.starts;
    std::string how = s.admission == StartAdmission::kBorrowing ? "borrowing idle capacity"
                      : s.admission == StartAdmission::kWindow  ? "in its class's window"
                                                                : "within its quota";
    if (s.backfilled) how += ", backfilled";
    job.move_to(JobState::kRunning, now,
                fmt::format("placed on {} node(s) ({})", s.span.nodes, how));
    clerk_.start(job, s.assignments, now, batch);
    state_.record_job(batch, job, now, "job.started");
  }
  // Preempted jobs that did not start again in this pass are pending: store that state.
  for (const PreemptedJob& p : pass.preempted) {
    const ServerJob& job = state_.jobs().at(p.job);
    if (job.state == JobState::kPending) PlaneState::stage(batch, job);
  }
}

std::optional<Instant> JobDesk::next_deadline(Instant now) const {
  std::optional<Instant> next;
  const auto sooner = [&](Instant at) {
    if (!next || at < *next) next = at;
  };
  for (JobId id : timed_) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kRunning)
      sooner(job.started_at + millis_from_seconds(*job.spec.max_runtime));
  }
  // A waiting job reaches the burst threshold.
  const auto policy = clerk_.burst_policy();
  if (!policy || clerk_.offers().empty()) return next;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kPending && !job.burst) {
      const Instant at = job.transitions.back().at + millis_from_seconds(policy->threshold);
      if (at > now) sooner(at);
    }
  }
  return next;
}

}  // namespace tidepool
