#include "core/policies/score_index.h"

namespace tidepool {

NodeScoreIndex::Shape* NodeScoreIndex::shape_for(const Pool& pool, const TaskShape& task) {
  if (!following_ || pool_.expired()) {
    // The first pool asked about, or a new one once the last is gone.
    pool_ = pool.identity().reference();
    following_ = true;
    shapes_.clear();
    seen_.assign(static_cast<std::size_t>(pool.node_count()), 0);
    stamp_ = 0;
  }
  if (!pool.identity().is(pool_)) return nullptr;
  const auto it = shapes_.find(task);
  if (it != shapes_.end()) return &it->second;
  if (shapes_.size() >= max_shapes(static_cast<std::size_t>(pool.node_count()))) return nullptr;
  return &shapes_[task];
}

}  // namespace tidepool
