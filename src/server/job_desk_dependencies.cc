// Job dependencies (a spec's after_ok, Slurm's afterok): a job waits outside the scheduler until
// every job it names has succeeded, and is cancelled when one of them fails or is cancelled.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "server/job_desk.h"

namespace tidepool {

Outcome<void> JobDesk::check_dependencies(const Principal& who, const JobSpec& spec) const {
  for (std::size_t i = 0; i < spec.after_ok.size(); ++i) {
    const std::string field = fmt::format("after_ok[{}]", i);
    const std::int64_t id = spec.after_ok[i];
    const auto job_id = job_id_from_wire(id);
    auto it = job_id ? state_.jobs().find(*job_id) : state_.jobs().end();
    if (it == state_.jobs().end() || !state_.may_see(who, it->second)) {
      return refuse(Refusal::kInvalid, "invalid job spec",
                    Error{field, fmt::format("no job {}", id)});
    }
    const ServerJob& dep = it->second;
    if (ended_unsuccessfully(dep.state)) {
      return refuse(
          Refusal::kInvalid, "invalid job spec",
          Error{field, fmt::format("job {} already ended {}: a job after it could never start", id,
                                   job_state_name(dep.state))});
    }
  }
  return {};
}

void JobDesk::settle_dependents(const ServerJob& ended, Instant now, Batch& batch) {
  auto it = dependents_.find(ended.id);
  if (it == dependents_.end()) return;
  const std::set<JobId> waiting = std::move(it->second);
  dependents_.erase(it);
  for (JobId id : waiting) {
    auto found = state_.jobs().find(id);
    if (found == state_.jobs().end()) continue;
    ServerJob& job = found->second;
    if (job.state != JobState::kPending) continue;
    if (ended.state != JobState::kSucceeded) {
      cancel_after(job, ended, now, batch);
    } else if (!state_.outside_scheduler(job)) {
      queue_again(job, fmt::format("job {} succeeded: every job it runs after has", ended.id), now,
                  batch);
    }
  }
}

void JobDesk::cancel_after(ServerJob& job, const ServerJob& ended, Instant now, Batch& batch) {
  // Ends it, and in turn the jobs after it.
  end_job(job, JobState::kCancelled,
          fmt::format("cancelled: job {} that it runs after (after_ok) ended {}", ended.id,
                      job_state_name(ended.state)),
          now, batch);
}

void JobDesk::note_parked(const ServerJob& job) {
  if (job.state == JobState::kPending && !job.burst && state_.outside_scheduler(job)) {
    parked_.insert(job.id);
  } else {
    parked_.erase(job.id);
  }
}

void JobDesk::note_dependencies(const ServerJob& job) {
  // Only the jobs still to end: one that has ended was settled for it already.
  for (std::int64_t wire : job.spec.after_ok) {
    const auto id = job_id_from_wire(wire);
    auto it = id ? state_.jobs().find(*id) : state_.jobs().end();
    if (it != state_.jobs().end() && !is_final(it->second.state)) dependents_[*id].insert(job.id);
  }
}

void JobDesk::settle_loaded_dependents(Instant now, Batch& repairs) {
  const std::vector<JobId> live(state_.live().begin(), state_.live().end());
  for (JobId id : live) {
    ServerJob& job = state_.jobs().at(id);
    if (job.state != JobState::kPending) continue;
    for (std::int64_t wire : job.spec.after_ok) {
      const auto dep = job_id_from_wire(wire);
      auto it = dep ? state_.jobs().find(*dep) : state_.jobs().end();
      if (it != state_.jobs().end() && ended_unsuccessfully(it->second.state)) {
        cancel_after(job, it->second, now, repairs);
        break;
      }
    }
  }
}

}  // namespace tidepool
