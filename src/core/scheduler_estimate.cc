// A pending job's estimated start (Scheduler::estimated_start).
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "core/scheduler.h"
#include "core/scheduler_pass_state.h"

namespace tidepool {

namespace {

using scheduler_detail::may_fit;

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

std::vector<ExpectedStart> Scheduler::expected_starts(Seconds now, Seconds horizon,
                                                      int max_jobs) const {
  // The waiting jobs per tenant, in the pass's order; tenants in the order of their first job.
  std::vector<std::vector<const Entry*>> lanes;
  std::map<TenantId, std::size_t> lane_of;
  for (JobId id : waiting_for_room_) {
    if (!index_.contains(id) || entry(id).phase != JobPhase::kPending) continue;
    const Entry& e = entry(id);
    const auto [at, added] = lane_of.emplace(e.job.tenant, lanes.size());
    if (added) lanes.emplace_back();
    lanes[at->second].push_back(&e);
  }
  std::vector<ExpectedStart> expected;
  if (lanes.empty() || max_jobs <= 0) return expected;
  // Placement may draw from the scheduler's generators: what it draws here is given back.
  const Rng fraction_rng = fraction_rng_;
  const Rng gang_rng = gang_rng_;
  Pool shadow = pool_;
  std::vector<std::size_t> next(lanes.size(), 0);    // per lane, the first job not placed
  std::vector<std::int64_t> freed(lanes.size(), 0);  // per lane, milli-GPUs its jobs freed
  // The running jobs by predicted end; one past it may end at any moment (backfill's
  // reservations give it a slack instead, which would move its successors' starts, and so their
  // calls, later at every look).
  std::vector<std::tuple<Seconds, std::uint32_t>> ends;
  ends.reserve(running_.size());
  for (JobId id : running_) ends.emplace_back(std::max(entry(id).predicted_end, now + 1), id.value);
  std::sort(ends.begin(), ends.end());
  for (const auto& [end, id] : ends) {
    if (end > now + horizon || std::ssize(expected) >= max_jobs) break;
    const Entry& ending = entry(JobId{id});
    for (const Assignment& a : ending.assignments) (void)shadow.release(ending.job.gang.task, a);
    if (const auto lane = lane_of.find(ending.job.tenant); lane != lane_of.end()) {
      freed[lane->second] += ending.milli;
    }
    // Per lane in the pass's order, while they fit: a job that does not fit yet holds those of
    // its lane behind it, as the reservation holds back what would delay it. A job waiting for
    // its tenant's quota fits only in what its tenant's own jobs freed.
    for (std::size_t l = 0; l < lanes.size() && std::ssize(expected) < max_jobs; ++l) {
      while (next[l] < lanes[l].size() && std::ssize(expected) < max_jobs) {
        const Entry& e = *lanes[l][next[l]];
        const bool quota = e.reason.kind == PendingKind::kQuota;
        if (quota && freed[l] < e.milli) break;
        const GangRequest& request = e.job.gang;
        if (!may_fit(shadow, request)) break;
        GangResult placed = place(shadow, e.job, request);
        if (!placed) break;
        if (quota) freed[l] -= e.milli;
        for (const Assignment& a : placed->assignments) (void)shadow.allocate(request.task, a);
        expected.push_back(ExpectedStart{e.job.id, end, distinct_nodes(placed->assignments)});
        ++next[l];
      }
    }
  }
  fraction_rng_ = fraction_rng;
  gang_rng_ = gang_rng;
  return expected;
}

}  // namespace tidepool
