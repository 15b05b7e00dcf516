// The pass's quota stage (see scheduler.h): whether the book admits a waiting job, within its
// tenant's guarantee or by borrowing, on which models, and what a refusal means for the later
// jobs of its lane.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/duration_format.h"
#include "core/scheduler.h"
#include "core/scheduler_pass_state.h"

namespace tidepool {

Scheduler::QuotaVerdict Scheduler::admit_for_quota(Entry& e, const WindowVerdict& window,
                                                   Seconds now, PassState& state, PassResult& out) {
  const Job& job = e.job;
  QuotaVerdict verdict;
  verdict.request = job.gang;
  verdict.admission = config_.quotas ? StartAdmission::kWithinGuarantee : StartAdmission::kNoQuota;
  if (window.admitted) {
    verdict.admission = StartAdmission::kWindow;
  } else if (config_.quotas && e.milli > 0) {
    const auto key = std::make_tuple(job.tenant.value, job.gang.task.models.bits(),
                                     job.gang.task.models.is_any(), e.milli);
    auto it = state.admissions.find(key);
    if (it == state.admissions.end()) {
      // The decisions only; the reason text of a refusal is written when a job waits on it.
      std::vector<Admission> answers = book_.assess(job.tenant, job.gang.task.models, e.milli);
      it = state.admissions.emplace(key, std::make_pair(std::move(answers), PendingReason{})).first;
    }
    // Why the book refuses the job (the first model's answer), written once per pass and book.
    auto refusal = [&]() -> const PendingReason& {
      PendingReason& refused = it->second.second;
      const std::vector<Admission>& answers = it->second.first;
      if (!refused.text && !answers.empty()) {
        refused = make_reason(PendingKind::kQuota,
                              book_.admit(job.tenant, answers.front().model, e.milli).reason);
      }
      return refused;
    };
    const std::vector<Admission>& answers = it->second.first;
    ModelSet admitted = ModelSet::none();
    const Admission* best = nullptr;
    const Admission* straddler = nullptr;
    for (const Admission& a : answers) {
      if (!a.admitted()) continue;
      admitted.add(a.model);
      if (!best || a.borrowed_milli < best->borrowed_milli) best = &a;
    }
    if (!best && config_.reclaim) {
      // Below its guarantee but refused for the part above it: the job may still start if
      // reclaiming borrowed capacity of others makes room for it in the pool and in the book.
      for (const Admission& a : answers) {
        if (a.guaranteed_milli > 0 &&
            (!straddler || a.borrowed_milli < straddler->borrowed_milli)) {
          straddler = &a;
        }
      }
    }
    if (!best && !straddler) {
      const PendingReason refused =
          refusal().text ? refusal()
                         : make_reason(PendingKind::kQuota,
                                       "no GPU model the job accepts is in the tenant's "
                                       "quota book");
      // Time slicing: the tenant's own running jobs that rank behind this one may make room for
      // it, in the pool and in the book.
      verdict.settled = true;
      if (slices(e) && preempt_for(e, job.gang, false, true, window.hold,
                                   StartAdmission::kWithinGuarantee, 0, now, state, out)) {
        return verdict;
      }
      set_reason(e, now, refused);
      // A tenant at or above its guarantee with nothing to borrow: all its jobs wait alike
      // (unless a later one may still slice: its lane's order ranks them no better than this one).
      const bool exhausted = std::all_of(answers.begin(), answers.end(), [](const Admission& a) {
        return a.guaranteed_milli == 0 && a.borrowable_milli == 0;
      });
      // (Only when the lane's later jobs accept no other model: a job that may run on another
      // model has its own answer.)
      if (exhausted && lanes_.size() > 1 &&
          lane_shapes_[e.lane].accepts_only(job.gang.task.models) &&
          (!slices(e) || !has_slice_victim(e, now, state))) {
        state.lane_done[e.lane] = refused;
      } else if (lanes_.size() > 1 && no_later_job_easier(e, window.hold, state)) {
        // The later jobs ask for no less and rank no better: the book refuses them too, and
        // slicing makes no more room for them than for this one.
        state.lane_done[e.lane] = make_reason(
            PendingKind::kQuota,
            fmt::format("behind job {} of the same tenant, which asks for no more and waits for "
                        "quota: {}",
                        job.id.value, refused.message()));
      }
      // A job refused for quota long enough (or promoted, under an order other than fifo) holds
      // its tenant's later jobs back, so that the tenant's usage drains until it fits: small jobs
      // never starve a large one of its tenant.
      hold_lane_if_due(e, now, refused, state);
      return verdict;
    }
    if (best) {
      verdict.request.task.models = admitted;
      verdict.borrowed = best->borrowed_milli;
      verdict.within_guarantee = best->guaranteed_milli > 0;
    } else {
      verdict.request.task.models = ModelSet::only(straddler->model);
      verdict.borrowed = straddler->borrowed_milli;
      verdict.within_guarantee = true;
      verdict.refused = refusal();
    }
    verdict.admission =
        verdict.borrowed == 0 ? StartAdmission::kWithinGuarantee : StartAdmission::kBorrowing;
  }
  return verdict;
}

bool Scheduler::holds_lane(const Entry& e, Seconds now) const {
  if (lanes_.size() > 1 && lane_order(e).kind() != LaneOrderKind::kFifo) return e.promoted;
  return now - e.pending_since >= config_.quota_head_patience;
}

bool Scheduler::no_later_job_easier(const Entry& e, std::int64_t hold,
                                    const PassState& state) const {
  const Job& job = e.job;
  const std::set<LaneKey>& lane = lanes_[e.lane];
  // The lane is in priority order: the last job has the lowest.
  if (hold > 0 || lane.empty() || std::get<0>(*lane.rbegin()) != std::get<0>(e.key)) return false;
  if (job.gang.task_count != 1 ||
      (job.gang.task.gpu_count > 1 && job.gang.topology.requires_level(TopologyLevel::kNvlink))) {
    return false;
  }
  for (int m = 0; m < pool_.models().size(); ++m) {
    if (!job.gang.task.models.accepts(GpuModelId{static_cast<std::uint32_t>(m)})) return false;
  }
  const LaneShapes& shapes = lane_shapes_[e.lane];
  // A later job of a window's class might be admitted by the window instead of the book.
  for (const PassState::Window& w : state.windows) {
    if (shapes.has_class(w.window->job_class)) return false;
  }
  return shapes.no_larger_than_every_task(job.gang.task);
}

void Scheduler::hold_lane_if_due(const Entry& e, Seconds now, const PendingReason& refused,
                                 PassState& state) {
  if (!holds_lane(e, now)) return;
  const Job& job = e.job;
  state.tenant_blocked.emplace(
      job.tenant,
      make_reason(
          PendingKind::kQuota,
          fmt::format("behind job {} of the same tenant, waiting {} for quota: {}", job.id.value,
                      format_duration_about(now - e.pending_since), refused.message())));
  if (lanes_.size() > 1) state.lane_done[e.lane] = state.tenant_blocked.at(job.tenant);
}

}  // namespace tidepool
