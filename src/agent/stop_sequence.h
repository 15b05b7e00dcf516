// How the node agent stops a running task: the preemption protocol as a state machine. Pure and
// deterministic: it sends no signal, reads no clock and writes no file; the agent passes the time
// in (milliseconds of a monotonic clock), reports what happened (a checkpoint, the task's exit),
// and carries out the actions it gets back. The same plan and the same calls give the same actions
// at the same times.
//
// The protocol:
//   1. A stop is requested, with a reason (preempted, cancelled, max_runtime, node_drain).
//   2. NOTICE, when the plan gives notice (a preemptible job that checkpoints) and its notice
//      period is over 0: the agent sends the notice signal (SIGUSR1 unless configured) to the
//      task's group and writes the notice file. Then it waits for the first of: the job reports a
//      checkpoint, or the notice period ends.
//   3. TERM: SIGTERM to the group. Then it waits for the grace period.
//   4. KILL: SIGKILL to the group, when the grace period ends with the group still there.
//   5. The stop is done when the group is gone (on_exited); the task's GPUs are free from then.
// The group going away ends the stop at any step, even before the first action.
//
// Transitions (each event at time t; "due" means t >= the deadline of the current phase):
//   phase      event                          actions         next phase   deadline of next phase
//   requested  tick (due at once), notice     NOTICE          notice       t + notice_ms
//   requested  tick (due at once), no notice  TERM            term         t + grace_ms
//   notice     checkpoint                     TERM            term         t + grace_ms
//   notice     tick, due                      TERM            term         t + grace_ms
//   term       tick, due                      KILL            killed       none
//   any        exited                         none            done         none
// Any other event changes nothing and returns no action. A tick takes every step that is due, in
// order: with a grace period of 0, one tick returns TERM and KILL. A checkpoint counts only as an
// answer to the notice: before the notice it is ignored, after TERM its time is still recorded.
//
// Guarantees, whatever the order of calls: NOTICE, TERM and KILL each at most once and in this
// order; never KILL before TERM, nor sooner than grace_ms after it; never TERM sooner than
// notice_ms after NOTICE unless a checkpoint arrived; nothing after the group is gone.
#pragma once

#include <csignal>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

// Why a task is stopped. Reported with the stop; the protocol is the same for every reason.
enum class StopReason {
  kPreempted,   // the scheduler reclaims its GPUs for other work
  kCancelled,   // a user cancelled the job
  kMaxRuntime,  // the job ran out of its time limit
  kNodeDrain,   // the node is being drained for maintenance
};

// "preempted", "cancelled", "max_runtime", "node_drain".
std::string_view stop_reason_name(StopReason reason);

// How one task is to be stopped, composed by the agent from the job and the reason.
struct StopPlan {
  StopReason reason = StopReason::kCancelled;
  // Whether to give notice first: the job is preemptible and checkpoints. No notice either way
  // when notice_ms is 0.
  bool give_notice = false;
  int notice_signal = SIGUSR1;  // sent with the notice; any signal but SIGKILL and SIGSTOP
  std::int64_t notice_ms = 0;   // how long the job may take to checkpoint after the notice
  std::int64_t grace_ms = 0;    // how long after SIGTERM before SIGKILL
};

// One thing for the agent to do, to the task's whole process group.
struct StopAction {
  enum class Kind {
    kNotice,  // send `signal` (the plan's notice signal) and write the notice file
    kTerm,    // send `signal` (SIGTERM)
    kKill,    // send `signal` (SIGKILL)
  };
  Kind kind = Kind::kTerm;
  int signal = SIGTERM;

  friend bool operator==(const StopAction&, const StopAction&) = default;
};

// "notice", "term", "kill".
std::string_view stop_action_name(StopAction::Kind kind);

// What the agent reports about a stop: when each step happened, in the milliseconds passed in.
// A step that did not happen (yet) is empty.
struct StopTimes {
  std::int64_t requested_ms = 0;              // when the stop was asked for
  std::optional<std::int64_t> notice_ms;      // NOTICE sent
  std::optional<std::int64_t> checkpoint_ms;  // the first checkpoint reported after the notice
  std::optional<std::int64_t> term_ms;        // TERM sent
  std::optional<std::int64_t> kill_ms;        // KILL sent
  std::optional<std::int64_t> exited_ms;      // the group was gone: the GPUs are free from then

  friend bool operator==(const StopTimes&, const StopTimes&) = default;
};

class StopSequence {
 public:
  enum class Phase {
    kRequested,  // nothing sent yet; the first action is due at once
    kNotice,     // NOTICE sent; waiting for a checkpoint or the end of the notice period
    kTerm,       // TERM sent; waiting for the end of the grace period
    kKilled,     // KILL sent; waiting for the group to be gone
    kDone,       // the group is gone
  };

  // A stop of `plan` requested at `now_ms`. Errors name the field of the plan: "notice_ms" or
  // "grace_ms" below 0; "notice_signal" not a signal, or SIGKILL or SIGSTOP (when notice is given).
  // The first action is due at once: call on_tick(now_ms).
  static Result<StopSequence> start(const StopPlan& plan, std::int64_t now_ms);

  // Time has come to `now_ms`: the actions that are due, in order (none, one, or TERM and KILL
  // with a grace period of 0). Call it at once after start() and whenever next_deadline_ms()
  // passes; calling it more often does no harm. Times passed in must not go back; an earlier one
  // is taken as the latest seen.
  std::vector<StopAction> on_tick(std::int64_t now_ms);
  // The job reported a checkpoint (by the notice file, say): TERM at once when it answers the
  // notice, otherwise no action.
  std::vector<StopAction> on_checkpoint(std::int64_t now_ms);
  // The task's group is gone (its leader reaped and no member left), on its own or after a
  // signal: the stop is done. Never an action.
  std::vector<StopAction> on_exited(std::int64_t now_ms);

  // When on_tick has something to do next; empty while nothing is due by time alone (after KILL,
  // only the group going away ends the stop) and once done.
  [[nodiscard]] std::optional<std::int64_t> next_deadline_ms() const;
  [[nodiscard]] bool done() const { return phase_ == Phase::kDone; }
  [[nodiscard]] Phase phase() const { return phase_; }
  [[nodiscard]] const StopPlan& plan() const { return plan_; }
  [[nodiscard]] const StopTimes& times() const { return times_; }

 private:
  StopSequence(const StopPlan& plan, std::int64_t now_ms);
  // `now_ms`, or the latest time seen when it is earlier; remembers it.
  std::int64_t advance(std::int64_t now_ms);
  void send_term(std::int64_t now_ms, std::vector<StopAction>& actions);

  StopPlan plan_;
  Phase phase_ = Phase::kRequested;
  StopTimes times_;
  std::int64_t latest_ms_ = 0;
};

// "requested", "notice", "term", "killed", "done".
std::string_view stop_phase_name(StopSequence::Phase phase);

}  // namespace tidepool
