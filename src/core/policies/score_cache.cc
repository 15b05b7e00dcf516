#include "core/policies/score_cache.h"

namespace tidepool {

int NodeScoreCache::slot_for(const TaskShape& task, int node_count) {
  if (node_count != node_count_ || static_cast<int>(slots_.size()) >= kMaxSlots) {
    if (node_count != node_count_ || !slots_.contains(task)) {
      slots_.clear();
      entries_.clear();
      node_count_ = node_count;
    }
  }
  auto [it, inserted] = slots_.try_emplace(task, static_cast<int>(slots_.size()));
  if (inserted) entries_.resize(entries_.size() + static_cast<std::size_t>(node_count_));
  return it->second;
}

}  // namespace tidepool
