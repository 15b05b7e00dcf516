// The pass's placement stage (see scheduler.h): where a waiting job that the book admits would
// run now, whether starting it there would delay the reserved start of an earlier job (EASY
// backfill), and the reservation itself.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/duration_format.h"
#include "core/scheduler.h"
#include "core/scheduler_pass_state.h"

namespace tidepool {
namespace {

// A job past its predicted end is assumed to end this soon.
constexpr Seconds kOverrunSlack = 600;

}  // namespace

using scheduler_detail::may_fit;

std::optional<PendingReason> Scheduler::try_to_place(Entry& e, const QuotaVerdict& quota,
                                                     const WindowVerdict& window, Seconds now,
                                                     PassState& state, PassResult& out) {
  const GangRequest& request = quota.request;
  const std::int64_t gpus = whole_gpus(e.milli);
  const auto shape_key = std::make_tuple(request.task_count, request.task,
                                         static_cast<std::uint8_t>(request.topology.level),
                                         static_cast<std::uint8_t>(request.topology.strength));
  std::optional<PendingReason> unplaceable;
  if (quota.refused) {
    unplaceable = *quota.refused;
  } else if (window.reason) {
    unplaceable = *window.reason;
  } else if (auto it = state.unplaceable.find(shape_key); it != state.unplaceable.end()) {
    unplaceable = it->second;
  } else if (const std::int64_t free = whole_free_gpus(request.task.models);
             !request.task.is_fractional() && !request.task.is_mig() && free < gpus) {
    unplaceable = make_reason(PendingKind::kCapacity,
                              fmt::format("needs {} GPUs ({}); {} free", gpus,
                                          describe(request.task.models, pool_.models()), free));
    state.unplaceable.emplace(shape_key, *unplaceable);
  } else {
    GangResult placed = std::unexpected(Unplaceable{});
    if (config_.segregate_borrowed && config_.quotas &&
        config_.placement == PlacementRule::kTopology && !request.task.is_fractional()) {
      // Borrowed work goes where no guaranteed work runs and the other way round, so that
      // reclaim can empty whole nodes; anywhere if that fails.
      // No filter when it would allow every node (the placement below is the same) or none (it
      // would find nothing, and changes nothing, not even a policy's random draws): told by the
      // count of nodes running the other kind of work, without a look at each node.
      // A single task that found no room there earlier in the pass finds none again.
      const bool borrows = quota.borrowed > 0;
      const int others = borrows ? nodes_with_guaranteed_ : nodes_with_borrowed_;
      const auto apart_key = std::tuple_cat(shape_key, std::make_tuple(borrows));
      const bool single = request.task_count == 1 && !e.job.replica_of;
      if (others > 0 && others < pool_.node_count() &&
          !(single && state.not_kept_apart.contains(apart_key))) {
        placed = place(pool_, e.job, request, borrows ? free_of_guaranteed_ : free_of_borrowed_);
        if (!placed && single) state.not_kept_apart.insert(apart_key);
      }
    }
    if (!placed) placed = place(pool_, e.job, request);
    if (placed) {
      bool backfilled = false;
      if (state.reservation) {
        Reservation& r = *state.reservation;
        bool fits_beside = true;
        if (now + predicted_remaining(e) > r.start && placed->assignments.size() == 1) {
          // One task: allocate changes nothing when it fails, so no copy of the shadow pool.
          fits_beside = r.shadow.allocate(request.task, placed->assignments.front()).has_value();
        } else if (now + predicted_remaining(e) > r.start) {
          Pool trial = r.shadow;
          for (const Assignment& a : placed->assignments) {
            fits_beside = fits_beside && trial.allocate(request.task, a).has_value();
          }
          if (fits_beside) r.shadow = std::move(trial);
        }
        if (!fits_beside) {
          set_reason(e, now, r.reason);
          return std::nullopt;
        }
        backfilled = true;
      }
      start(e, *placed, now, quota.admission, quota.borrowed, backfilled, out);
      state.admissions.clear();
      running_changed(state);
      return std::nullopt;
    }
    // A MIG instance needs room on one GPU, not a topology: short of capacity.
    unplaceable = make_reason(
        free >= gpus && !request.task.is_mig() ? PendingKind::kTopology : PendingKind::kCapacity,
        placed.error().reason);
    // A replica's spread limit binds it alone, not the other jobs of its shape.
    if (!e.job.replica_of) state.unplaceable.emplace(shape_key, *unplaceable);
  }
  return unplaceable;
}

std::vector<std::tuple<Seconds, std::uint32_t>> Scheduler::running_by_predicted_end(
    Seconds now) const {
  // No job is taken to end sooner than kOverrunSlack from now: not one past its predicted end
  // (overrunning), nor one predicted to end within the slack (a prediction is not that precise).
  std::vector<std::tuple<Seconds, std::uint32_t>> ends;
  ends.reserve(running_.size());
  for (JobId id : running_) {
    const Entry& r = entry(id);
    ends.emplace_back(std::max(r.predicted_end, now + kOverrunSlack), id.value);
  }
  std::sort(ends.begin(), ends.end());
  return ends;
}

std::optional<Scheduler::Reservation> Scheduler::reserve(const Entry& e, const GangRequest& request,
                                                         Seconds now) {
  const std::vector<std::tuple<Seconds, std::uint32_t>> ends = running_by_predicted_end(now);
  // Running jobs end in that order in the shadow pool until the job fits there.
  Pool shadow = pool_;
  std::optional<GangPlacement> placed;
  Seconds start = now;
  for (std::size_t i = 0; i < ends.size() && !placed; ++i) {
    const Entry& r = entry(JobId{std::get<1>(ends[i])});
    for (const Assignment& a : r.assignments) (void)shadow.release(r.job.gang.task, a);
    start = std::get<0>(ends[i]);
    if (!may_fit(shadow, request)) continue;
    if (auto p = place(shadow, e.job, request)) placed = std::move(*p);
  }
  if (!placed) return std::nullopt;
  for (const Assignment& a : placed->assignments) (void)shadow.allocate(request.task, a);
  Reservation res{e.job.id, start, std::move(shadow), {}};
  res.reason =
      make_reason(PendingKind::kReservation,
                  fmt::format("behind the reservation of job {} (predicted to start in {})",
                              e.job.id.value, format_duration_about(start - now)));
  return res;
}

}  // namespace tidepool
