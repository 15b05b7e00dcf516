// A user's hand on one job, as Slurm's scontrol hold, release, requeue and update.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "server/job_desk.h"

namespace tidepool {
namespace {

std::string by_whom(const Principal& who) {
  return fmt::format("token {} ({})", who.token_id, role_name(who.role));
}

std::unexpected<Refused> not_in_state(const ServerJob& job, std::string_view wanted,
                                      std::string_view action) {
  return conflict("state", fmt::format("job {} is {}{}; only a {} job can be {}", job.id,
                                       job_state_name(job.state), job.held.empty() ? "" : " (held)",
                                       wanted, action));
}

}  // namespace

Outcome<ServerJob*> JobDesk::actionable_job(const Principal& who, JobId id,
                                            std::string_view action) {
  if (who.role == Role::kAgent) {
    return forbidden("role", fmt::format("agent tokens cannot {} jobs", action));
  }
  return state_.visible_job(who, id);
}

Outcome<const ServerJob*> JobDesk::hold(const Principal& who, JobId id, Instant now, Batch& batch) {
  auto found = actionable_job(who, id, "hold");
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (job.state != JobState::kPending || !job.held.empty() || job.burst) {
    if (job.burst && job.state == JobState::kPending) {
      return conflict("state", fmt::format("job {} is waiting for rented capacity; cancel it "
                                           "instead",
                                           id));
    }
    return not_in_state(job, "pending", "held");
  }
  // A job that waits for others is not in the scheduler's queue yet.
  if (state_.in_scheduler(job)) state_.withdraw_pending(job, now, batch);
  job.held = "held by " + by_whom(who);
  job.move_to(JobState::kPending, now, job.held);
  note_parked(job);
  state_.mark_dirty();
  state_.record_job(batch, job, now, "job.held");
  return &job;
}

Outcome<const ServerJob*> JobDesk::release(const Principal& who, JobId id, Instant now,
                                           Batch& batch) {
  auto found = actionable_job(who, id, "release");
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (job.held.empty() || job.state != JobState::kPending) {
    return conflict("state",
                    fmt::format("job {} is {} and not held", id, job_state_name(job.state)));
  }
  job.held.clear();
  state_.record_job(batch, job, now, "job.released");
  if (state_.unmet_dependencies(job).empty()) {
    queue_again(job, "released by " + by_whom(who), now, batch);
  } else {
    job.message = "released by " + by_whom(who);  // and waits for the jobs it runs after
    state_.mark_dirty();
  }
  return &job;
}

Outcome<const ServerJob*> JobDesk::requeue(const Principal& who, JobId id, Instant now,
                                           Batch& batch) {
  auto found = actionable_job(who, id, "requeue");
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (job.state != JobState::kRunning || job.burst) return not_in_state(job, "running", "requeued");
  if (job.spec.service) {
    return conflict("id", fmt::format("job {} is a service: its replicas are jobs of their own, "
                                      "each of which may be requeued",
                                      job.id));
  }
  requeue_run(job, false, "requeued by " + by_whom(who), now, batch);
  return &job;
}

Outcome<const ServerJob*> JobDesk::update(const Principal& who, JobId id, const JobUpdate& update,
                                          Instant now, Batch& batch) {
  auto found = actionable_job(who, id, "update");
  if (!found) return std::unexpected(found.error());
  ServerJob& job = **found;
  if (job.state != JobState::kPending || job.burst) return not_in_state(job, "pending", "updated");
  auto spec = apply_job_update(job.spec, update);
  if (!spec) return refuse(Refusal::kInvalid, "invalid update", spec.error());
  ServerJob updated = job;
  updated.spec = std::move(*spec);
  const TenantBook& book = state_.scheduler().book();
  auto core = state_.to_core_job(updated, book);
  if (!core) return refuse(Refusal::kInvalid, "invalid update", core.error());
  if (!state_.outside_scheduler(job)) {
    // Queued again with the new values: the same id and submission time, so it keeps its place
    // by age, and its service so far.
    state_.withdraw_pending(job, now, batch);
    if (auto queued = enqueue(*core, updated, now, batch); !queued) {
      // Back as it was: the old spec was queued a moment ago, so a refusal now is a bug.
      auto old = state_.to_core_job(job, book);
      auto back = old ? enqueue(*old, job, now, batch) : Result<void>(std::unexpected(old.error()));
      if (!back) {
        state_.internal_error(fmt::format("job {}: queued again as before its update", job.id),
                              back.error(), now, batch);
      }
      return refuse(Refusal::kInvalid, "invalid update", queued.error());
    }
  }
  drop_live(job);
  job.spec = std::move(updated.spec);
  add_live(job);
  state_.mark_dirty();
  std::vector<std::string> changed;
  for (const auto& [key, value] : update.fields.items()) changed.push_back(key);
  // Still pending since it last became so (no new transition): only the message says it.
  job.message = fmt::format("{} updated by {}", fmt::join(changed, ", "), by_whom(who));
  state_.record_job(batch, job, now, "job.updated");
  return &job;
}

}  // namespace tidepool
