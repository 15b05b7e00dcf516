#include "agent/stop_sequence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const StopAction kNoticeUsr1{.kind = StopAction::Kind::kNotice, .signal = SIGUSR1};
const StopAction kTerm{.kind = StopAction::Kind::kTerm, .signal = SIGTERM};
const StopAction kKill{.kind = StopAction::Kind::kKill, .signal = SIGKILL};

// A preemptible job that checkpoints: 30 s of notice, then 10 s of grace.
StopPlan with_notice() {
  return StopPlan{.reason = StopReason::kPreempted,
                  .give_notice = true,
                  .notice_signal = SIGUSR1,
                  .notice_ms = 30'000,
                  .grace_ms = 10'000};
}

// A job that does not checkpoint: 10 s of grace.
StopPlan without_notice() {
  return StopPlan{.reason = StopReason::kCancelled,
                  .give_notice = false,
                  .notice_signal = SIGUSR1,
                  .notice_ms = 30'000,
                  .grace_ms = 10'000};
}

// The sequence of a valid plan (value() fails the test by exception otherwise).
StopSequence begin(const StopPlan& plan, std::int64_t now_ms) {
  return StopSequence::start(plan, now_ms).value();
}

TEST(StopSequence, NoticeThenCheckpointThenTermThenExit) {
  StopSequence stop = begin(with_notice(), 1'000);
  EXPECT_EQ(stop.phase(), StopSequence::Phase::kRequested);
  EXPECT_EQ(stop.next_deadline_ms(), 1'000);  // the first action is due at once

  EXPECT_THAT(stop.on_tick(1'000), ElementsAre(kNoticeUsr1));
  EXPECT_EQ(stop.phase(), StopSequence::Phase::kNotice);
  EXPECT_EQ(stop.next_deadline_ms(), 31'000);
  EXPECT_THAT(stop.on_tick(5'000), IsEmpty());

  EXPECT_THAT(stop.on_checkpoint(12'000), ElementsAre(kTerm));
  EXPECT_EQ(stop.phase(), StopSequence::Phase::kTerm);
  EXPECT_EQ(stop.next_deadline_ms(), 22'000);
  EXPECT_THAT(stop.on_tick(21'999), IsEmpty());
  EXPECT_THAT(stop.on_checkpoint(21'999), IsEmpty());  // a second checkpoint changes nothing

  EXPECT_THAT(stop.on_exited(21'999), IsEmpty());
  EXPECT_TRUE(stop.done());
  EXPECT_EQ(stop.next_deadline_ms(), std::nullopt);
  EXPECT_EQ(stop.times(), (StopTimes{.requested_ms = 1'000,
                                     .notice_ms = 1'000,
                                     .checkpoint_ms = 12'000,
                                     .term_ms = 12'000,
                                     .kill_ms = std::nullopt,
                                     .exited_ms = 21'999}));
  EXPECT_THAT(stop.on_tick(1'000'000), IsEmpty());  // nothing after the group is gone
}

TEST(StopSequence, NoticeTimeoutThenTermThenGraceTimeoutThenKill) {
  StopSequence stop = begin(with_notice(), 0);
  EXPECT_THAT(stop.on_tick(0), ElementsAre(kNoticeUsr1));
  EXPECT_THAT(stop.on_tick(29'999), IsEmpty());
  EXPECT_THAT(stop.on_tick(30'000), ElementsAre(kTerm));
  EXPECT_EQ(stop.next_deadline_ms(), 40'000);
  EXPECT_THAT(stop.on_tick(39'999), IsEmpty());
  EXPECT_THAT(stop.on_tick(40'000), ElementsAre(kKill));
  EXPECT_EQ(stop.phase(), StopSequence::Phase::kKilled);
  EXPECT_EQ(stop.next_deadline_ms(), std::nullopt);
  EXPECT_FALSE(stop.done());
  EXPECT_THAT(stop.on_tick(40'100), IsEmpty());  // KILL once

  EXPECT_THAT(stop.on_exited(40'250), IsEmpty());
  EXPECT_TRUE(stop.done());
  EXPECT_EQ(stop.times(), (StopTimes{.requested_ms = 0,
                                     .notice_ms = 0,
                                     .checkpoint_ms = std::nullopt,
                                     .term_ms = 30'000,
                                     .kill_ms = 40'000,
                                     .exited_ms = 40'250}));
}

TEST(StopSequence, NoNoticeForAJobThatDoesNotCheckpoint) {
  StopSequence stop = begin(without_notice(), 500);
  EXPECT_THAT(stop.on_checkpoint(500), IsEmpty());  // before anything: not an answer to a notice
  EXPECT_THAT(stop.on_tick(500), ElementsAre(kTerm));
  EXPECT_EQ(stop.next_deadline_ms(), 10'500);
  EXPECT_THAT(stop.on_checkpoint(600), IsEmpty());
  EXPECT_THAT(stop.on_tick(10'500), ElementsAre(kKill));
  EXPECT_EQ(stop.times().notice_ms, std::nullopt);
  EXPECT_EQ(stop.times().checkpoint_ms, std::nullopt);
  EXPECT_EQ(stop.times().term_ms, 500);
  EXPECT_EQ(stop.times().kill_ms, 10'500);
}

TEST(StopSequence, NoNoticeWhenTheNoticePeriodIsZero) {
  StopPlan plan = with_notice();
  plan.notice_ms = 0;
  StopSequence stop = begin(plan, 0);
  EXPECT_THAT(stop.on_tick(0), ElementsAre(kTerm));
}

TEST(StopSequence, SendsTheConfiguredNoticeSignal) {
  StopPlan plan = with_notice();
  plan.notice_signal = SIGUSR2;
  StopSequence stop = begin(plan, 0);
  EXPECT_THAT(stop.on_tick(0),
              ElementsAre(StopAction{.kind = StopAction::Kind::kNotice, .signal = SIGUSR2}));
}

TEST(StopSequence, ExitDuringTheNoticeEndsIt) {
  StopSequence stop = begin(with_notice(), 0);
  EXPECT_THAT(stop.on_tick(0), ElementsAre(kNoticeUsr1));
  EXPECT_THAT(stop.on_exited(5'000), IsEmpty());
  EXPECT_TRUE(stop.done());
  EXPECT_THAT(stop.on_tick(100'000), IsEmpty());
  EXPECT_THAT(stop.on_checkpoint(100'000), IsEmpty());
  EXPECT_EQ(stop.times(), (StopTimes{.requested_ms = 0,
                                     .notice_ms = 0,
                                     .checkpoint_ms = std::nullopt,
                                     .term_ms = std::nullopt,
                                     .kill_ms = std::nullopt,
                                     .exited_ms = 5'000}));
}

TEST(StopSequence, ExitBeforeTheFirstActionSendsNothing) {
  StopSequence stop = begin(with_notice(), 0);
  EXPECT_THAT(stop.on_exited(0), IsEmpty());
  EXPECT_TRUE(stop.done());
  EXPECT_THAT(stop.on_tick(0), IsEmpty());
  EXPECT_EQ(stop.times().notice_ms, std::nullopt);
  EXPECT_EQ(stop.times().exited_ms, 0);
}

TEST(StopSequence, ExitAfterKillIsRecordedOnce) {
  StopSequence stop = begin(without_notice(), 0);
  stop.on_tick(0);
  stop.on_tick(10'000);
  EXPECT_THAT(stop.on_exited(10'100), IsEmpty());
  EXPECT_THAT(stop.on_exited(20'000), IsEmpty());
  EXPECT_EQ(stop.times().exited_ms, 10'100);
}

TEST(StopSequence, ZeroGraceGivesTermAndKillInOneTick) {
  StopPlan plan = without_notice();
  plan.grace_ms = 0;
  StopSequence stop = begin(plan, 7);
  EXPECT_THAT(stop.on_tick(7), ElementsAre(kTerm, kKill));
  EXPECT_EQ(stop.times().term_ms, 7);
  EXPECT_EQ(stop.times().kill_ms, 7);
}

TEST(StopSequence, ALateTickTakesOneStepPerPeriod) {
  StopPlan plan = with_notice();
  plan.notice_ms = 1'000;
  plan.grace_ms = 1'000;
  StopSequence stop = begin(plan, 0);
  EXPECT_THAT(stop.on_tick(0), ElementsAre(kNoticeUsr1));
  // Long past both periods: the grace period starts when TERM is sent, not when it was due.
  EXPECT_THAT(stop.on_tick(5'000), ElementsAre(kTerm));
  EXPECT_EQ(stop.next_deadline_ms(), 6'000);
  EXPECT_THAT(stop.on_tick(5'999), IsEmpty());
  EXPECT_THAT(stop.on_tick(6'000), ElementsAre(kKill));
}

TEST(StopSequence, RecordsACheckpointThatCameAfterTerm) {
  StopSequence stop = begin(with_notice(), 0);
  stop.on_tick(0);
  EXPECT_THAT(stop.on_tick(30'000), ElementsAre(kTerm));
  EXPECT_THAT(stop.on_checkpoint(31'000), IsEmpty());
  EXPECT_EQ(stop.times().checkpoint_ms, 31'000);
  EXPECT_EQ(stop.next_deadline_ms(), 40'000);  // the grace period is not cut short
}

TEST(StopSequence, TakesATimeThatGoesBackAsTheLatestSeen) {
  StopSequence stop = begin(with_notice(), 1'000);
  EXPECT_THAT(stop.on_tick(1'000), ElementsAre(kNoticeUsr1));
  EXPECT_THAT(stop.on_checkpoint(400), ElementsAre(kTerm));
  EXPECT_EQ(stop.times().checkpoint_ms, 1'000);
  EXPECT_EQ(stop.times().term_ms, 1'000);
  EXPECT_THAT(stop.on_tick(0), IsEmpty());
  EXPECT_THAT(stop.on_tick(11'000), ElementsAre(kKill));
}

TEST(StopSequence, APeriodTooLongToEndNeverEnds) {
  StopPlan plan = with_notice();
  plan.notice_ms = INT64_MAX;
  StopSequence stop = begin(plan, 5);
  EXPECT_THAT(stop.on_tick(5), ElementsAre(kNoticeUsr1));
  EXPECT_EQ(stop.next_deadline_ms(), INT64_MAX);
  EXPECT_THAT(stop.on_tick(INT64_MAX - 1), IsEmpty());
}

TEST(StopSequence, RejectsPlansItCannotCarryOut) {
  StopPlan negative_notice = with_notice();
  negative_notice.notice_ms = -1;
  auto notice = StopSequence::start(negative_notice, 0);
  ASSERT_FALSE(notice.has_value());
  EXPECT_EQ(notice.error().field, "notice_ms");
  EXPECT_EQ(notice.error().reason, "must be 0 or more (got -1)");

  StopPlan negative_grace = without_notice();
  negative_grace.grace_ms = -5;
  auto grace = StopSequence::start(negative_grace, 0);
  ASSERT_FALSE(grace.has_value());
  EXPECT_EQ(grace.error().field, "grace_ms");

  StopPlan kill_notice = with_notice();
  kill_notice.notice_signal = SIGKILL;
  auto kill = StopSequence::start(kill_notice, 0);
  ASSERT_FALSE(kill.has_value());
  EXPECT_EQ(kill.error().field, "notice_signal");
  EXPECT_THAT(kill.error().reason, HasSubstr("cannot be caught"));

  StopPlan no_signal = with_notice();
  no_signal.notice_signal = 0;
  auto zero = StopSequence::start(no_signal, 0);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().field, "notice_signal");
  EXPECT_EQ(zero.error().reason, "0 is not a signal");

  no_signal.give_notice = false;  // a signal never sent is not checked
  EXPECT_TRUE(StopSequence::start(no_signal, 0).has_value());
}

TEST(StopSequence, NamesReasonsActionsAndPhases) {
  EXPECT_EQ(stop_reason_name(StopReason::kPreempted), "preempted");
  EXPECT_EQ(stop_reason_name(StopReason::kCancelled), "cancelled");
  EXPECT_EQ(stop_reason_name(StopReason::kMaxRuntime), "max_runtime");
  EXPECT_EQ(stop_reason_name(StopReason::kNodeDrain), "node_drain");
  EXPECT_EQ(stop_action_name(StopAction::Kind::kNotice), "notice");
  EXPECT_EQ(stop_action_name(StopAction::Kind::kTerm), "term");
  EXPECT_EQ(stop_action_name(StopAction::Kind::kKill), "kill");
  EXPECT_EQ(stop_phase_name(StopSequence::Phase::kRequested), "requested");
  EXPECT_EQ(stop_phase_name(StopSequence::Phase::kKilled), "killed");
  EXPECT_EQ(stop_phase_name(StopSequence::Phase::kDone), "done");
}

// --- Property: random interleavings of events ---------------------------------------------------

enum class Event { kTick, kCheckpoint, kExited };

struct Step {
  Event event = Event::kTick;
  std::int64_t time_ms = 0;
};

// What one event returned, and the time the sequence took it at (the latest seen).
struct Outcome {
  std::vector<StopAction> actions;
  std::int64_t effective_ms = 0;

  friend bool operator==(const Outcome&, const Outcome&) = default;
};

StopPlan random_plan(std::mt19937& random) {
  const int signals[] = {SIGUSR1, SIGUSR2, SIGINT, SIGTERM};
  auto period = [&] {
    const int kind = std::uniform_int_distribution<int>(0, 3)(random);
    return kind == 0 ? 0 : std::uniform_int_distribution<std::int64_t>(1, 5'000)(random);
  };
  StopPlan plan;
  plan.reason = static_cast<StopReason>(std::uniform_int_distribution<int>(0, 3)(random));
  plan.give_notice = std::bernoulli_distribution(0.6)(random);
  plan.notice_signal = signals[std::uniform_int_distribution<int>(0, 3)(random)];
  plan.notice_ms = period();
  plan.grace_ms = period();
  return plan;
}

// Events at times that mostly go forward, often land exactly on a deadline, sometimes repeat a
// time and sometimes go back.
std::vector<Step> random_steps(std::mt19937& random, std::int64_t start_ms, const StopPlan& plan) {
  const int count = std::uniform_int_distribution<int>(1, 40)(random);
  std::vector<Step> steps;
  std::int64_t time = start_ms;
  for (int i = 0; i < count; ++i) {
    const int pick = std::uniform_int_distribution<int>(0, 99)(random);
    const Event event = pick < 70 ? Event::kTick : pick < 92 ? Event::kCheckpoint : Event::kExited;
    const int when = std::uniform_int_distribution<int>(0, 9)(random);
    if (when == 0) {
      time -= std::uniform_int_distribution<std::int64_t>(1, 2'000)(random);
    } else if (when <= 2) {
      // the same time again
    } else if (when <= 4) {
      time += when == 3 ? plan.notice_ms : plan.grace_ms;  // on a deadline, or near one
    } else {
      time += std::uniform_int_distribution<std::int64_t>(1, 3'000)(random);
    }
    steps.push_back(Step{.event = event, .time_ms = time});
  }
  return steps;
}

std::vector<Outcome> run(StopSequence& stop, const std::vector<Step>& steps) {
  std::vector<Outcome> outcomes;
  std::int64_t latest = stop.times().requested_ms;
  for (const Step& step : steps) {
    latest = std::max(latest, step.time_ms);
    Outcome outcome{.actions = {}, .effective_ms = latest};
    switch (step.event) {
      case Event::kTick:
        outcome.actions = stop.on_tick(step.time_ms);
        break;
      case Event::kCheckpoint:
        outcome.actions = stop.on_checkpoint(step.time_ms);
        break;
      case Event::kExited:
        outcome.actions = stop.on_exited(step.time_ms);
        break;
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

TEST(StopSequenceProperty, RandomInterleavingsKeepTheProtocol) {
  int with_kill = 0;
  int with_checkpoint_term = 0;
  int exited_early = 0;
  for (std::uint32_t seed = 1; seed <= 2'000; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);
    const StopPlan plan = random_plan(random);
    const std::int64_t start_ms = std::uniform_int_distribution<std::int64_t>(0, 1'000'000)(random);
    std::vector<Step> steps = random_steps(random, start_ms, plan);
    const std::int64_t end_ms = start_ms + 1'000'000;
    // Time runs on long enough for every period to end (periods are at most 5 s): a tick for each
    // step that may be left.
    for (const std::int64_t later_ms : {0, 10'000, 20'000}) {
      steps.push_back(Step{.event = Event::kTick, .time_ms = end_ms + later_ms});
    }

    StopSequence stop = begin(plan, start_ms);
    const std::vector<Outcome> outcomes = run(stop, steps);
    const bool gives_notice = plan.give_notice && plan.notice_ms > 0;

    std::vector<StopAction::Kind> sent;
    std::optional<std::int64_t> exited;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      const Outcome& outcome = outcomes[i];
      if (steps[i].event == Event::kExited) {
        EXPECT_THAT(outcome.actions, IsEmpty());
        if (!exited) exited = outcome.effective_ms;
      }
      if (steps[i].event == Event::kCheckpoint) {
        EXPECT_LE(outcome.actions.size(), 1U);
      }
      if (exited) {
        EXPECT_THAT(outcome.actions, IsEmpty()) << "an action after the exit";
      }
      for (const StopAction& action : outcome.actions) {
        switch (action.kind) {
          case StopAction::Kind::kNotice:
            EXPECT_EQ(action.signal, plan.notice_signal);
            EXPECT_EQ(stop.times().notice_ms, outcome.effective_ms);
            break;
          case StopAction::Kind::kTerm:
            EXPECT_EQ(action.signal, SIGTERM);
            EXPECT_EQ(stop.times().term_ms, outcome.effective_ms);
            break;
          case StopAction::Kind::kKill:
            EXPECT_EQ(action.signal, SIGKILL);
            EXPECT_EQ(stop.times().kill_ms, outcome.effective_ms);
            break;
        }
        sent.push_back(action.kind);
      }
    }

    // Each action at most once, in protocol order, the notice only when the plan gives one.
    std::vector<StopAction::Kind> expected_order;
    if (gives_notice) expected_order.push_back(StopAction::Kind::kNotice);
    expected_order.push_back(StopAction::Kind::kTerm);
    expected_order.push_back(StopAction::Kind::kKill);
    ASSERT_LE(sent.size(), expected_order.size());
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), expected_order.begin()));

    const StopTimes& times = stop.times();
    EXPECT_EQ(times.requested_ms, start_ms);
    EXPECT_EQ(times.exited_ms, exited);
    EXPECT_EQ(stop.done(), exited.has_value());
    EXPECT_EQ(times.notice_ms.has_value(),
              !sent.empty() && sent.front() == StopAction::Kind::kNotice);
    if (!gives_notice) {
      EXPECT_EQ(times.checkpoint_ms, std::nullopt);
    }
    if (times.notice_ms) {
      EXPECT_GE(*times.notice_ms, times.requested_ms);
      if (times.checkpoint_ms) {
        EXPECT_GE(*times.checkpoint_ms, *times.notice_ms);
      }
    }
    if (times.term_ms) {
      EXPECT_GE(*times.term_ms, times.requested_ms);
      if (times.notice_ms) {
        // Never before the notice period ends, unless a checkpoint came in, and then at it.
        const bool period_over = *times.term_ms >= *times.notice_ms + plan.notice_ms;
        const bool at_checkpoint = times.checkpoint_ms && *times.term_ms == *times.checkpoint_ms;
        EXPECT_TRUE(period_over || at_checkpoint);
        if (!period_over) ++with_checkpoint_term;
      }
    }
    if (times.kill_ms) {
      ++with_kill;
      ASSERT_TRUE(times.term_ms.has_value()) << "KILL without TERM";
      EXPECT_GE(*times.kill_ms, *times.term_ms + plan.grace_ms);
    }
    if (exited) {
      for (const auto& time : {times.notice_ms, times.term_ms, times.kill_ms}) {
        if (time) {
          EXPECT_LE(*time, *exited);
        }
      }
      if (*exited < end_ms) ++exited_early;
    } else {
      // Left to run, every stop ends in KILL, waiting for the group to be gone.
      EXPECT_EQ(stop.phase(), StopSequence::Phase::kKilled);
      EXPECT_TRUE(times.kill_ms.has_value());
      EXPECT_EQ(stop.next_deadline_ms(), std::nullopt);
    }

    // Deterministic: the same plan and calls give the same actions at the same times.
    StopSequence again = begin(plan, start_ms);
    EXPECT_EQ(run(again, steps), outcomes);
    EXPECT_EQ(again.times(), times);
  }
  // The random runs reached every branch that matters.
  EXPECT_GT(with_kill, 100);
  EXPECT_GT(with_checkpoint_term, 100);
  EXPECT_GT(exited_early, 100);
}

TEST(StopSequenceProperty, AfterATickTheNextDeadlineIsInTheFuture) {
  for (std::uint32_t seed = 1; seed <= 500; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);
    const StopPlan plan = random_plan(random);
    StopSequence stop = begin(plan, 0);
    std::int64_t latest = 0;
    for (const Step& step : random_steps(random, 0, plan)) {
      if (step.event != Event::kTick) continue;
      stop.on_tick(step.time_ms);
      latest = std::max(latest, step.time_ms);
      const auto deadline = stop.next_deadline_ms();
      if (deadline) {
        EXPECT_GT(*deadline, latest);
      }
    }
  }
}

}  // namespace
}  // namespace tidepool
