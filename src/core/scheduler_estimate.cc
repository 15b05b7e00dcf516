// A pending job's estimated start (Scheduler::estimated_start).
#include "core/scheduler.h"

namespace tidepool {

namespace {

bool share_a_model(const ModelSet& a, const ModelSet& b) {
  return a.is_any() || b.is_any() || (a.bits() & b.bits()) != 0;
}

}  // namespace

std::optional<Seconds> Scheduler::estimated_start(JobId job, Seconds now) const {
  if (!index_.contains(job)) return std::nullopt;
  const Entry& e = entry(job);
  if (e.phase != JobPhase::kPending) return std::nullopt;
  const ModelSet& models = e.job.gang.task.models;
  // What it and the jobs ahead of it in its lane that want GPUs of its models need.
  std::int64_t wanted = e.milli;
  const std::set<LaneKey>& lane = lanes_[e.lane];
  for (auto it = lane.begin(); it != lane.end() && *it != e.key; ++it) {
    const Entry& ahead = entry(JobId{std::get<3>(*it)});
    if (share_a_model(ahead.job.gang.task.models, models)) wanted += ahead.milli;
  }
  // Free now on the nodes of its models (a cordoned node shows nothing free)...
  std::int64_t free = 0;
  for (int n = 0; n < pool_.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    if (pool_.spec(node).gpu_count > 0 && models.accepts(pool_.spec(node).model)) {
      free += pool_.state(node).total_free_milli;
    }
  }
  if (free >= wanted) return now;
  // ... then as the running jobs end.
  for (const auto& [end, id] : running_by_predicted_end(now)) {
    const Entry& ending = entry(JobId{id});
    for (const Assignment& a : ending.assignments) {
      if (models.accepts(pool_.spec(a.node).model)) free += ending.job.gang.task.total_milli_gpu();
    }
    if (free >= wanted) return end;
  }
  return std::nullopt;
}

std::optional<ExpectedStart> Scheduler::expected_start() const {
  if (!expected_start_ || phase(expected_start_->job) != JobPhase::kPending) return std::nullopt;
  return expected_start_;
}

}  // namespace tidepool
