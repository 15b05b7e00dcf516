// Data pre-warming: stage a waiting job's data on the nodes it is expected to start on, a lead
// time before it starts, so that it computes from its first second instead of reading its data
// while its GPUs wait. The rule both the server (which calls the `prewarm` hook) and the
// simulator (which measures it) follow.
//
// What is expected (Scheduler::expected_starts): the nodes that free up next, as the running jobs
// end at the runtime predictor's predicted ends, and the waiting jobs that go there: the jobs the
// last pass left waiting for room, in the order it considered them, each placed (by the
// scheduler's own placement) on a copy of the pool at the first predicted end after which it
// fits, up to PrewarmConfig::horizon ahead.
//
// The planner (PrewarmPlanner):
//   - expect(next, now) remembers the expected starts after a pass; each one's call is due at
//     predicted start - lead (PrewarmConfig::lead), at once when that is past. A job is called
//     once per node: a later expectation for the same job on other nodes calls for those nodes.
//   - advance(now) makes the calls of the remembered expectations that fell due by `now`, dated
//     when they fell due (a driver that runs a pass at every due time, as the server does with
//     due_at, dates them `now`; one that runs passes only at events, as the simulator does, gets
//     the calls it would have made at the due times, for starts expected within the horizon).
//   - started(job, nodes, now): a job that starts is pre-warmed when every node it starts on was
//     called for it; how long before the start the last of them was called is its staging lead.
//     A job started without a call on every node counts as not pre-warmed.
//   - forget(job) when a job leaves without starting. What a job was called for is dropped when
//     it starts or leaves, so the planner holds only waiting jobs that were called.
//
// The drivers (the server's control plane and the simulator) call prewarm_after_pass() after each
// scheduling pass: one sequence, so that what the server does is what the simulator measures.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/pool.h"
#include "core/resources.h"

namespace tidepool {

// The most expected starts a scheduler keeps candidates for, and a config may ask for.
inline constexpr int kMaxExpectedStarts = 4096;

struct PrewarmConfig {
  Seconds lead = 600;  // call this long before the predicted start (10 minutes)
  // How far ahead starts are expected: twice the lead, so that a driver running passes only at
  // events still sees a start whose call falls due before its next pass.
  Seconds horizon = 1200;
  // At most this many expected starts (jobs) at a time.
  int max_expected = 64;
  // Expectations are asked for at most this often (they cost a walk of the predicted ends with
  // placements on a copy of the pool, too much for every pass of a busy pool).
  Seconds refresh = 60;
};

// Checks each field (lead >= 0, horizon >= lead, max_expected 1..kMaxExpectedStarts,
// refresh >= 0), naming the first bad.
Result<void> validate(const PrewarmConfig& config);

// A start the scheduler expects.
struct ExpectedStart {
  JobId job;
  Seconds start = 0;
  std::vector<NodeId> nodes;  // sorted, each once

  friend bool operator==(const ExpectedStart&, const ExpectedStart&) = default;
};

// A call of the pre-warm hook: stage `job`'s data on `nodes`.
struct PrewarmCall {
  JobId job;
  std::vector<NodeId> nodes;  // the nodes not called for it before, sorted
  Seconds predicted_start = 0;
  Seconds at = 0;  // when it fell due

  friend bool operator==(const PrewarmCall&, const PrewarmCall&) = default;
};

// How a start stood with its pre-warm.
struct PrewarmedStart {
  bool prewarmed = false;  // every node it starts on was called for it
  Seconds lead = 0;        // start - the latest call among its nodes (0 when not pre-warmed)

  friend bool operator==(const PrewarmedStart&, const PrewarmedStart&) = default;
};

class PrewarmPlanner {
 public:
  explicit PrewarmPlanner(PrewarmConfig config = {}) : config_(config) {}

  [[nodiscard]] const PrewarmConfig& config() const { return config_; }

  // The calls the remembered expectations made due by `now`, by due time, then job.
  std::vector<PrewarmCall> advance(Seconds now);
  // Remembers `next` (in place of the last expectations) and returns the calls due at `now`.
  std::vector<PrewarmCall> expect(std::vector<ExpectedStart> next, Seconds now);
  // As expect(), for starts expected up to `covered_until` (covered_until() remembers it).
  std::vector<PrewarmCall> expect(std::vector<ExpectedStart> next, Seconds now,
                                  Seconds covered_until);
  // How far the last expectations looked: the starts expected by then are known.
  [[nodiscard]] Seconds covered_until() const { return covered_until_; }
  // Whether expectations are due to be asked for again (PrewarmConfig::refresh since the last).
  [[nodiscard]] bool wants_expectations(Seconds now) const {
    return !last_expect_ || now >= *last_expect_ + config_.refresh;
  }
  // When the next call of the remembered expectations falls due, if one has not been made.
  [[nodiscard]] std::optional<Seconds> due_at() const;
  // A job started on `nodes` at `now`.
  PrewarmedStart started(JobId job, std::span<const NodeId> nodes, Seconds now);
  // A job left without starting.
  void forget(JobId job);

  // Jobs with calls made and not yet started (for bounds and tests).
  [[nodiscard]] std::size_t called_jobs() const { return called_.size(); }

 private:
  struct Expectation {
    ExpectedStart start;
    Seconds since = 0;  // when expect() first saw it so
    bool called = false;
  };
  [[nodiscard]] Seconds due(const Expectation& e) const;
  std::optional<PrewarmCall> call(Expectation& e, Seconds at);
  void drop_expectation(JobId job);

  PrewarmConfig config_;
  std::vector<Expectation> expected_;
  std::optional<Seconds> last_expect_;  // when expect() was last called
  Seconds covered_until_ = 0;
  // Per waiting job called: when each of its nodes was called.
  std::map<JobId, std::map<NodeId, Seconds>> called_;
};

class Scheduler;    // core/scheduler.h
struct PassResult;  // core/scheduler.h

// The nodes of `assignments`, sorted, each once: as an expected start, started() and a call name
// them.
[[nodiscard]] std::vector<NodeId> distinct_nodes(std::span<const Assignment> assignments);

// What pre-warming made of one scheduling pass.
struct PrewarmPass {
  std::vector<PrewarmCall> calls;       // in the order they were made
  std::vector<PrewarmedStart> started;  // one per pass.started, in its order
};

// After `scheduler`'s pass `pass` at `now`, in this order: the calls the remembered expectations
// made due since the last pass (advance), each start of the pass (started, on distinct_nodes), and,
// when they are due (wants_expectations), the scheduler's new expectations (expected_starts, the
// planner's horizon and max_expected) with the calls due at once (expect). The scheduler's
// state must be as the pass left it; the call changes only the planner.
//
// `next_look`: when the driver will next call it, if it knows (the simulator: its next event).
// Expectations are then asked for early enough, and far enough ahead (to next_look + lead), that
// every call falling due before then is made, dated when it fell due: what a server asking every
// refresh would have called.
PrewarmPass prewarm_after_pass(PrewarmPlanner& planner, const Scheduler& scheduler,
                               const PassResult& pass, Seconds now,
                               std::optional<Seconds> next_look = std::nullopt);

}  // namespace tidepool
