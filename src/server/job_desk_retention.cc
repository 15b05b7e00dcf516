// Retention: jobs that ended long ago leave the plane and the store.
#include <set>

#include "server/job_desk.h"

namespace tidepool {

bool JobDesk::remove_finished(Instant before, std::size_t most, Batch& batch) {
  // A live job waits for, or once waited for, the jobs its after_ok names: a requeued one looks
  // at them again, so they stay while it lives.
  std::set<std::int64_t> kept;
  for (const JobId id : state_.live()) {
    const ServerJob& job = state_.jobs().at(id);
    kept.insert(job.spec.after_ok.begin(), job.spec.after_ok.end());
  }
  for (const JobRecord& changed : batch.jobs) kept.insert(changed.id);
  std::map<JobId, ServerJob>& jobs = state_.jobs();
  std::size_t removed = 0;
  for (auto it = jobs.begin(); it != jobs.end();) {
    const ServerJob& job = it->second;
    const std::int64_t wire = wire_job_id(job.id);
    if (!is_final(job.state) || job.ended_at >= before || kept.contains(wire)) {
      ++it;
      continue;
    }
    if (removed == most) return true;
    if (!job.idempotency_key.empty()) {
      const auto held = idempotency_.find({job.spec.tenant, job.idempotency_key});
      if (held != idempotency_.end() && held->second == job.id) idempotency_.erase(held);
    }
    batch.jobs_removed.push_back(wire);
    it = jobs.erase(it);
    ++removed;
  }
  return false;
}

}  // namespace tidepool
