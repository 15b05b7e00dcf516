// The pre-warm planner (prewarm.h).
#include "core/prewarm.h"

#include <algorithm>

namespace tidepool {

std::optional<PrewarmCall> PrewarmPlanner::call(const ExpectedStart& next, Seconds at) {
  expected_called_ = true;
  PrewarmCall made{next.job, {}, next.start, at};
  std::map<NodeId, Seconds>& called = called_[next.job];
  for (NodeId node : next.nodes) {
    if (called.emplace(node, at).second) made.nodes.push_back(node);
  }
  if (made.nodes.empty()) return std::nullopt;
  return made;
}

std::optional<Seconds> PrewarmPlanner::due_at() const {
  if (!expected_ || expected_called_) return std::nullopt;
  return std::max(expected_since_, expected_->start - config_.lead);
}

std::optional<PrewarmCall> PrewarmPlanner::advance(Seconds now) {
  const std::optional<Seconds> due = due_at();
  if (!due || *due > now) return std::nullopt;
  return call(*expected_, *due);
}

std::optional<PrewarmCall> PrewarmPlanner::expect(std::optional<ExpectedStart> next, Seconds now) {
  if (next != expected_) {
    expected_ = std::move(next);
    expected_since_ = now;
    expected_called_ = false;
  }
  return advance(now);
}

PrewarmedStart PrewarmPlanner::started(JobId job, std::span<const NodeId> nodes, Seconds now) {
  if (expected_ && expected_->job == job) {
    expected_.reset();
    expected_called_ = false;
  }
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
  if (expected_ && expected_->job == job) {
    expected_.reset();
    expected_called_ = false;
  }
}

}  // namespace tidepool
