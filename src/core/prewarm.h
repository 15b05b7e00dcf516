// Data pre-warming: stage a waiting job's data on the nodes it is expected to start on, a lead
// time before it starts, so that it computes from its first second instead of reading its data
// while its GPUs wait. The rule both the server (which calls the `prewarm` hook) and the
// simulator (which measures it) follow.
//
// What is expected: the scheduler's reservation (Scheduler::expected_start): with backfill on,
// the first waiting job that does not fit gets the earliest time at which it fits as the running
// jobs end at the runtime predictor's predicted ends, and the nodes it would take then.
//
// The planner (PrewarmPlanner):
//   - expect(next, now) remembers the expected start after a pass; a call is due at
//     predicted start - lead (PrewarmConfig::lead), at once when that is past. A job is called
//     once per node: a later expectation for the same job on other nodes calls for those nodes.
//   - advance(now) makes the call of the remembered expectation if it fell due by `now`, dated
//     when it fell due (a driver that runs a pass at every due time, as the server does with
//     due_at, dates it `now`; one that runs passes only at events, as the simulator does, gets
//     the same call it would have made at the due time).
//   - started(job, nodes, now): a job that starts is pre-warmed when every node it starts on was
//     called for it; how long before the start the last of them was called is its staging lead.
//     A job started without a call on every node counts as not pre-warmed.
//   - forget(job) when a job leaves without starting. What a job was called for is dropped when
//     it starts or leaves, so the planner holds only waiting jobs that were called.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/resources.h"

namespace tidepool {

struct PrewarmConfig {
  Seconds lead = 600;  // call this long before the predicted start (10 minutes)
};

// The start the scheduler expects next: its reservation.
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
};

class PrewarmPlanner {
 public:
  explicit PrewarmPlanner(PrewarmConfig config = {}) : config_(config) {}

  [[nodiscard]] const PrewarmConfig& config() const { return config_; }

  // The call the remembered expectation made due by `now`, if any.
  std::optional<PrewarmCall> advance(Seconds now);
  // Remembers `next` (nullopt: nothing expected) and returns its call if it is due at `now`.
  std::optional<PrewarmCall> expect(std::optional<ExpectedStart> next, Seconds now);
  // When the remembered expectation's call falls due, if it has not been made.
  [[nodiscard]] std::optional<Seconds> due_at() const;
  // A job started on `nodes` at `now`.
  PrewarmedStart started(JobId job, std::span<const NodeId> nodes, Seconds now);
  // A job left without starting.
  void forget(JobId job);

  // Jobs with calls made and not yet started (for bounds and tests).
  [[nodiscard]] std::size_t called_jobs() const { return called_.size(); }

 private:
  std::optional<PrewarmCall> call(const ExpectedStart& next, Seconds at);

  PrewarmConfig config_;
  std::optional<ExpectedStart> expected_;
  Seconds expected_since_ = 0;  // when expect() first saw it
  bool expected_called_ = false;
  // Per waiting job called: when each of its nodes was called.
  std::map<JobId, std::map<NodeId, Seconds>> called_;
};

}  // namespace tidepool
