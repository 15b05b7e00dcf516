#include "agent/stop_sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace tidepool {
namespace {

// `time_ms` + `period_ms` (both 0 or more), or the largest time when that does not fit: a period
// too long to end is one that never ends.
std::int64_t deadline_after(std::int64_t time_ms, std::int64_t period_ms) {
  constexpr std::int64_t kLatest = std::numeric_limits<std::int64_t>::max();
  return time_ms >= 0 && period_ms > kLatest - time_ms ? kLatest : time_ms + period_ms;
}

}  // namespace

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kPreempted:
      return "preempted";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kMaxRuntime:
      return "max_runtime";
    case StopReason::kNodeDrain:
      return "node_drain";
  }
  return "unknown";
}

std::string_view stop_action_name(StopAction::Kind kind) {
  switch (kind) {
    case StopAction::Kind::kNotice:
      return "notice";
    case StopAction::Kind::kTerm:
      return "term";
    case StopAction::Kind::kKill:
      return "kill";
  }
  return "unknown";
}

std::string_view stop_phase_name(StopSequence::Phase phase) {
  switch (phase) {
    case StopSequence::Phase::kRequested:
      return "requested";
    case StopSequence::Phase::kNotice:
      return "notice";
    case StopSequence::Phase::kTerm:
      return "term";
    case StopSequence::Phase::kKilled:
      return "killed";
    case StopSequence::Phase::kDone:
      return "done";
  }
  return "unknown";
}

Result<StopSequence> StopSequence::start(const StopPlan& plan, std::int64_t now_ms) {
  if (plan.notice_ms < 0) {
    return fail("notice_ms", fmt::format("must be 0 or more (got {})", plan.notice_ms));
  }
  if (plan.grace_ms < 0) {
    return fail("grace_ms", fmt::format("must be 0 or more (got {})", plan.grace_ms));
  }
  if (plan.give_notice) {
    if (plan.notice_signal < 1 || plan.notice_signal >= NSIG) {
      return fail("notice_signal", fmt::format("{} is not a signal", plan.notice_signal));
    }
    if (plan.notice_signal == SIGKILL || plan.notice_signal == SIGSTOP) {
      return fail("notice_signal",
                  "SIGKILL and SIGSTOP cannot be caught, so they cannot give notice; use one the "
                  "job can handle, such as SIGUSR1");
    }
  }
  return StopSequence(plan, now_ms);
}

StopSequence::StopSequence(const StopPlan& plan, std::int64_t now_ms)
    : plan_(plan), latest_ms_(now_ms) {
  times_.requested_ms = now_ms;
}

std::int64_t StopSequence::advance(std::int64_t now_ms) {
  latest_ms_ = std::max(latest_ms_, now_ms);
  return latest_ms_;
}

void StopSequence::send_term(std::int64_t now_ms, std::vector<StopAction>& actions) {
  actions.push_back(StopAction{.kind = StopAction::Kind::kTerm, .signal = SIGTERM});
  times_.term_ms = now_ms;
  phase_ = Phase::kTerm;
}

std::vector<StopAction> StopSequence::on_tick(std::int64_t now_ms) {
  const std::int64_t now = advance(now_ms);
  std::vector<StopAction> actions;
  // One step per turn, as long as the deadline of the phase reached is due too.
  for (auto deadline = next_deadline_ms(); deadline && now >= *deadline;
       deadline = next_deadline_ms()) {
    switch (phase_) {
      case Phase::kRequested:
        if (plan_.give_notice && plan_.notice_ms > 0) {
          actions.push_back(
              StopAction{.kind = StopAction::Kind::kNotice, .signal = plan_.notice_signal});
          times_.notice_ms = now;
          phase_ = Phase::kNotice;
        } else {
          send_term(now, actions);
        }
        break;
      case Phase::kNotice:
        send_term(now, actions);
        break;
      case Phase::kTerm:
        actions.push_back(StopAction{.kind = StopAction::Kind::kKill, .signal = SIGKILL});
        times_.kill_ms = now;
        phase_ = Phase::kKilled;
        break;
      case Phase::kKilled:
      case Phase::kDone:
        return actions;  // no deadline: not reached
    }
  }
  return actions;
}

std::vector<StopAction> StopSequence::on_checkpoint(std::int64_t now_ms) {
  const std::int64_t now = advance(now_ms);
  std::vector<StopAction> actions;
  // Only a checkpoint after the notice answers it.
  if (phase_ == Phase::kRequested || phase_ == Phase::kDone || !times_.notice_ms) return actions;
  if (!times_.checkpoint_ms) times_.checkpoint_ms = now;
  if (phase_ == Phase::kNotice) send_term(now, actions);
  return actions;
}

std::vector<StopAction> StopSequence::on_exited(std::int64_t now_ms) {
  const std::int64_t now = advance(now_ms);
  if (phase_ != Phase::kDone) {
    times_.exited_ms = now;
    phase_ = Phase::kDone;
  }
  return {};
}

std::optional<std::int64_t> StopSequence::next_deadline_ms() const {
  switch (phase_) {
    case Phase::kRequested:
      return times_.requested_ms;
    case Phase::kNotice:
      return deadline_after(*times_.notice_ms, plan_.notice_ms);
    case Phase::kTerm:
      return deadline_after(*times_.term_ms, plan_.grace_ms);
    case Phase::kKilled:
    case Phase::kDone:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tidepool
