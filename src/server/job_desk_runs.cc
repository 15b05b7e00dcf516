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

void JobDesk::load(ServerJob loaded, std::int64_t now_ms, Batch& repairs) {
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
  if (is_final(job.state)) return;
  add_live(job);
  if (auto restored = restore(state_.scheduler(), job, now_ms); !restored) {
    drop_live(id);
    job.placement.clear();
    job.move_to(JobState::kFailed, now_ms,
                "could not be restored after a restart: " + restored.error().message());
    job.ended_ms = now_ms;
    state_.record_job(repairs, job, now_ms, "job.failed");
  }
}

Result<void> JobDesk::restore(Scheduler& scheduler, const ServerJob& job,
                              std::int64_t now_ms) const {
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
                                   std::min(to_seconds(job.started_ms), to_seconds(now_ms)),
                                   to_seconds(now_ms));
    if (!adopted) return adopted;
  } else if (auto queued = scheduler.submit(*core, to_seconds(now_ms)); !queued) {
    return queued;
  }
  // The service of its ended runs, so that it does not rank as new work.
  if (job.attained_gpu_seconds == 0) return {};
  auto credited = scheduler.credit_attained(core->id, job.attained_gpu_seconds);
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

// --- live jobs ---

void JobDesk::add_live(const ServerJob& job) {
  state_.set_live(job.id, true);
  if (job.state == JobState::kPending) note_dependencies(job);
  note_parked(job);
  if (job.spec.max_runtime) timed_.insert(job.id);
}

void JobDesk::drop_live(JobId id) {
  state_.set_live(id, false);
  timed_.erase(id);
  parked_.erase(id);
}

Result<void> JobDesk::enqueue(const Job& core, const ServerJob& job, std::int64_t now_ms,
                              Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  if (auto queued = scheduler.submit(core, to_seconds(now_ms)); !queued) return queued;
  if (job.attained_gpu_seconds == 0) return {};
  auto credited = scheduler.credit_attained(core.id, job.attained_gpu_seconds);
  // Not queued after all (an implausible service): out again, so that no pass starts it.
  if (!credited) state_.withdraw_pending(job, now_ms, batch);
  return credited;
}

// --- the moves ---

void JobDesk::end_job(ServerJob& job, JobState state, std::string reason, std::int64_t now_ms,
                      Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  const JobId core_id = job.id;
  // A job held, waiting for others or on rented capacity is not the scheduler's to end. One that
  // is must end there: a refusal means the two disagree (a bug), which internal_error shows.
  const bool scheduled = state_.in_scheduler(job);
  if (job.burst) {
    // On rented capacity, outside the scheduler: the rental ends with the job.
    bursts_.release(job, fmt::format("job {} {}: {}", job.id, job_state_name(state), reason), true,
                    now_ms, batch);
  } else if (job.state == JobState::kRunning) {
    clerk_.stop(job, now_ms, batch);
    std::optional<Seconds> observed;
    if (state == JobState::kSucceeded) observed = to_seconds(now_ms - job.started_ms);
    if (auto ok = scheduler.finish(core_id, to_seconds(now_ms), observed); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now_ms,
                            batch);
    }
  } else if (scheduled) {
    if (auto ok = scheduler.withdraw(core_id, to_seconds(now_ms)); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler withdraw", job.id), ok.error(), now_ms,
                            batch);
    }
  }
  if (scheduled) {
    if (auto ok = scheduler.forget(core_id); !ok) {
      state_.internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now_ms,
                            batch);
    }
  }
  drop_live(job.id);
  job.held.clear();  // an ended job is no longer held
  job.move_to(state, now_ms, std::move(reason));
  job.ended_ms = now_ms;
  state_.mark_dirty();
  state_.record_job(batch, job, now_ms, fmt::format("job.{}", job_state_name(state)));
  settle_dependents(job, now_ms, batch);
}

void JobDesk::stop_run(ServerJob& job, const std::string& cause, std::int64_t now_ms) {
  const std::int64_t saved_until = std::max(job.started_ms, job.last_checkpoint_ms);
  const std::int64_t lost = std::max<std::int64_t>(0, now_ms - saved_until);
  job.lost_work_ms += lost;
  lost_work_ms_by_cause_[cause] += lost;
  ++requeued_by_cause_[cause];
  job.placement.clear();
  job.tasks_done.clear();
}

void JobDesk::requeue_run(ServerJob& job, bool node_failure, const std::string& reason,
                          std::int64_t now_ms, Batch& batch) {
  Scheduler& scheduler = state_.scheduler();
  const JobId core_id = job.id;
  clerk_.stop(job, now_ms, batch);
  job.attained_gpu_seconds = scheduler.attained_gpu_seconds(core_id, to_seconds(now_ms))
                                 .value_or(job.attained_gpu_seconds);
  // A running job on the pool's nodes is the scheduler's: a refusal is a bug (see end_job).
  if (auto ok = scheduler.finish(core_id, to_seconds(now_ms), std::nullopt); !ok) {
    state_.internal_error(fmt::format("job {}: scheduler finish", job.id), ok.error(), now_ms,
                          batch);
  }
  if (auto ok = scheduler.forget(core_id); !ok) {
    state_.internal_error(fmt::format("job {}: scheduler forget", job.id), ok.error(), now_ms,
                          batch);
  }
  stop_run(job, node_failure ? "node_failure" : "requeue", now_ms);
  if (node_failure) ++job.faults;
  job.move_to(JobState::kPreempted, now_ms, reason);
  state_.record_job(batch, job, now_ms, "job.requeued");
  const std::string requeued = node_failure ? "requeued after a node failure" : reason;
  queue_again(job,
              job.checkpoint_path.empty()
                  ? requeued + "; restarts from the beginning (no checkpoint)"
                  : requeued + "; resumes from " + job.checkpoint_path,
              now_ms, batch);
}

void JobDesk::requeue_from_burst(const LostRental& lost, std::int64_t now_ms, Batch& batch) {
  ServerJob& job = state_.jobs().at(lost.job);
  const bool was_running = job.state == JobState::kRunning;
  bursts_.release(job, lost.reason, lost.charge, now_ms, batch);
  if (was_running) {
    stop_run(job, "node_failure", now_ms);
    ++job.faults;
    job.move_to(JobState::kPreempted, now_ms, lost.reason);
    state_.record_job(batch, job, now_ms, "job.requeued");
  }
  queue_again(job, "back in the pool's queue: " + lost.reason, now_ms, batch);
}

void JobDesk::queue_again(ServerJob& job, const std::string& reason, std::int64_t now_ms,
                          Batch& batch) {
  state_.mark_dirty();
  auto core = state_.to_core_job(job, state_.scheduler().book());
  auto queued =
      core ? enqueue(*core, job, now_ms, batch) : Result<void>(std::unexpected(core.error()));
  if (!queued) {
    drop_live(job.id);
    job.move_to(JobState::kFailed, now_ms,
                "could not be queued again: " + queued.error().message());
    job.ended_ms = now_ms;
    state_.record_job(batch, job, now_ms, "job.failed");
    settle_dependents(job, now_ms, batch);
    return;
  }
  job.move_to(JobState::kPending, now_ms, reason);
  note_parked(job);
  PlaneState::stage(batch, job);
}

// --- passes ---

void JobDesk::stop_overdue(std::int64_t now_ms, Batch& batch) {
  std::vector<JobId> overdue;
  for (JobId id : timed_) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kRunning && job.spec.max_runtime &&
        now_ms - job.started_ms >= *job.spec.max_runtime * 1000) {
      overdue.push_back(id);
    }
  }
  for (JobId id : overdue) {
    ServerJob& job = state_.jobs().at(id);
    end_job(job, JobState::kFailed,
            fmt::format("stopped: ran past its max_runtime of {}",
                        format_duration(*job.spec.max_runtime)),
            now_ms, batch);
  }
}

void JobDesk::apply_pass(const PassResult& pass, std::int64_t now_ms, Batch& batch) {
  const Scheduler& scheduler = state_.scheduler();
  for (const PreemptedJob& p : pass.preempted) {
    ServerJob& job = state_.jobs().at(p.job);
    std::string reason = fmt::format("preempted ({})", preemption_cause_name(p.cause));
    if (p.beneficiary) reason += fmt::format(" for job {}", p.beneficiary->value);
    clerk_.stop(job, now_ms, batch);
    job.attained_gpu_seconds = scheduler.attained_gpu_seconds(p.job, to_seconds(now_ms))
                                   .value_or(job.attained_gpu_seconds);
    job.move_to(JobState::kPreempted, now_ms, reason);
    stop_run(job, "preemption", now_ms);
    ++job.preemptions;
    state_.record_job(batch, job, now_ms, "job.preempted");
    job.move_to(JobState::kPending, now_ms, "requeued after preemption");
  }
  for (const StartedJob& s : pass.started) {
    ServerJob& job = state_.jobs().at(s.job);
    state_.observe_queue_wait(job, now_ms);
    job.placement = state_.to_places(s.assignments);
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
    clerk_.start(job, s.assignments, now_ms, batch);
    state_.record_job(batch, job, now_ms, "job.started");
  }
  // Preempted jobs that did not start again in this pass are pending: store that state.
  for (const PreemptedJob& p : pass.preempted) {
    const ServerJob& job = state_.jobs().at(p.job);
    if (job.state == JobState::kPending) PlaneState::stage(batch, job);
  }
}

std::optional<std::int64_t> JobDesk::next_deadline_ms(std::int64_t now_ms) const {
  std::optional<std::int64_t> next;
  const auto sooner = [&](std::int64_t at) {
    if (!next || at < *next) next = at;
  };
  for (JobId id : timed_) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kRunning) sooner(job.started_ms + *job.spec.max_runtime * 1000);
  }
  // A waiting job reaches the burst threshold.
  const auto policy = clerk_.burst_policy();
  if (!policy || clerk_.offers().empty()) return next;
  for (JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    if (job.state == JobState::kPending && !job.burst) {
      const std::int64_t at = job.transitions.back().at_ms + policy->threshold * 1000;
      if (at > now_ms) sooner(at);
    }
  }
  return next;
}

}  // namespace tidepool
