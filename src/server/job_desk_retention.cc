// Retention: jobs that ended long ago leave the plane and the store.
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "server/job_desk.h"

namespace tidepool {
namespace {

// The setting that keeps the next job id: {"next": N}.
constexpr std::string_view kNextIdKey = "jobs/next_id";

}  // namespace

void JobDesk::load_next_id(const std::vector<KeyedRecord>& settings) {
  for (const KeyedRecord& setting : settings) {
    if (setting.key != kNextIdKey) continue;
    const auto value = nlohmann::json::parse(setting.document, nullptr, false);
    if (!value.is_object() || !value.contains("next") || !value["next"].is_number_unsigned()) {
      continue;  // unreadable: the highest stored job's id decides, as before any removal
    }
    const auto next = value["next"].get<std::uint64_t>();
    if (next > next_job_id_.value && next <= std::numeric_limits<std::uint32_t>::max()) {
      next_job_id_ = JobId{static_cast<std::uint32_t>(next)};
    }
  }
}

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
  bool more = false;
  for (auto it = jobs.begin(); it != jobs.end();) {
    const ServerJob& job = it->second;
    const std::int64_t wire = wire_job_id(job.id);
    if (!is_final(job.state) || job.ended_at >= before || kept.contains(wire)) {
      ++it;
      continue;
    }
    if (removed == most) {
      more = true;
      break;
    }
    if (!job.idempotency_key.empty()) {
      const auto held = idempotency_.find({job.spec.tenant, job.idempotency_key});
      if (held != idempotency_.end() && held->second == job.id) idempotency_.erase(held);
    }
    batch.jobs_removed.push_back(wire);
    it = jobs.erase(it);
    ++removed;
  }
  if (removed > 0) {
    batch.settings.push_back(
        KeyedRecord{std::string(kNextIdKey), nlohmann::json{{"next", next_job_id_.value}}.dump()});
  }
  return more;
}

}  // namespace tidepool
