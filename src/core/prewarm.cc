// The pre-warm planner (prewarm.h).
#include "core/prewarm.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <tuple>

#include "core/scheduler.h"

namespace tidepool {

Result<void> validate(const PrewarmConfig& config) {
  if (config.lead < 0)
    return fail("lead", fmt::format("must not be negative, got {}", config.lead));
  if (config.horizon < config.lead) {
    return fail("horizon", fmt::format("must be at least the lead ({}s), got {}s", config.lead,
                                       config.horizon));
  }
  if (config.max_expected < 1 || config.max_expected > kMaxExpectedStarts) {
    return fail("max_expected",
                fmt::format("must be 1..{}, got {}", kMaxExpectedStarts, config.max_expected));
  }
  if (config.refresh < 0) {
    return fail("refresh", fmt::format("must not be negative, got {}", config.refresh));
  }
  return {};
}

Seconds PrewarmPlanner::due(const Expectation& e) const {
  return std::max(e.since, e.start.start - config_.lead);
}

std::optional<PrewarmCall> PrewarmPlanner::call(Expectation& e, Seconds at) {
  e.called = true;
  PrewarmCall made{e.start.job, {}, e.start.start, at};
  std::map<NodeId, Seconds>& called = called_[e.start.job];
  for (NodeId node : e.start.nodes) {
    if (called.emplace(node, at).second) made.nodes.push_back(node);
  }
  if (made.nodes.empty()) return std::nullopt;
  return made;
}

std::optional<Seconds> PrewarmPlanner::due_at() const {
  std::optional<Seconds> first;
  for (const Expectation& e : expected_) {
    if (!e.called && (!first || due(e) < *first)) first = due(e);
  }
  return first;
}

std::vector<PrewarmCall> PrewarmPlanner::advance(Seconds now) {
  std::vector<PrewarmCall> calls;
  for (Expectation& e : expected_) {
    if (e.called || due(e) > now) continue;
    if (std::optional<PrewarmCall> made = call(e, due(e))) calls.push_back(std::move(*made));
  }
  std::sort(calls.begin(), calls.end(), [](const PrewarmCall& a, const PrewarmCall& b) {
    return std::tie(a.at, a.job) < std::tie(b.at, b.job);
  });
  return calls;
}

std::vector<PrewarmCall> PrewarmPlanner::expect(std::vector<ExpectedStart> next, Seconds now) {
  return expect(std::move(next), now, now + config_.horizon);
}

std::vector<PrewarmCall> PrewarmPlanner::expect(std::vector<ExpectedStart> next, Seconds now,
                                                Seconds covered_until) {
  std::vector<Expectation> kept;
  kept.reserve(next.size());
  for (ExpectedStart& start : next) {
    const auto same = std::find_if(expected_.begin(), expected_.end(),
                                   [&](const Expectation& e) { return e.start == start; });
    if (same != expected_.end()) {
      kept.push_back(*same);
    } else {
      kept.push_back(Expectation{std::move(start), now, false});
    }
  }
  expected_ = std::move(kept);
  last_expect_ = now;
  covered_until_ = covered_until;
  return advance(now);
}

void PrewarmPlanner::drop_expectation(JobId job) {
  std::erase_if(expected_, [&](const Expectation& e) { return e.start.job == job; });
}

PrewarmedStart PrewarmPlanner::started(JobId job, std::span<const NodeId> nodes, Seconds now) {
  drop_expectation(job);
  const auto it = called_.find(job);
  if (it == called_.end()) return {};
  PrewarmedStart result;
  result.prewarmed = !nodes.empty();
  Seconds last = 0;
  for (NodeId node : nodes) {
    const auto at = it->second.find(node);
    if (at == it->second.end()) {
      result.prewarmed = false;
      break;
    }
    last = std::max(last, at->second);
  }
  if (result.prewarmed) result.lead = std::max<Seconds>(0, now - last);
  called_.erase(it);
  return result;
}

void PrewarmPlanner::forget(JobId job) {
  called_.erase(job);
  drop_expectation(job);
}

std::vector<NodeId> distinct_nodes(std::span<const Assignment> assignments) {
  std::vector<NodeId> nodes;
  nodes.reserve(assignments.size());
  for (const Assignment& a : assignments) nodes.push_back(a.node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

PrewarmPass prewarm_after_pass(PrewarmPlanner& planner, const Scheduler& scheduler,
                               const PassResult& pass, Seconds now,
                               std::optional<Seconds> next_look) {
  PrewarmPass out;
  // Calls that fell due between the passes were made then (advance dates them), before the
  // starts of this pass are counted against them.
  out.calls = planner.advance(now);
  out.started.reserve(pass.started.size());
  for (const StartedJob& s : pass.started) {
    out.started.push_back(planner.started(s.job, distinct_nodes(s.assignments), now));
  }
  const PrewarmConfig& config = planner.config();
  // A start due to be called before the driver's next look must be expected by now.
  const Seconds needed = next_look ? *next_look + config.lead : now;
  if (planner.wants_expectations(now) || planner.covered_until() < needed) {
    const Seconds horizon = std::max(config.horizon, needed - now);
    std::vector<PrewarmCall> due = planner.expect(
        scheduler.expected_starts(now, horizon, config.max_expected), now, now + horizon);
    out.calls.insert(out.calls.end(), std::make_move_iterator(due.begin()),
                     std::make_move_iterator(due.end()));
  }
  return out;
}

}  // namespace tidepool
