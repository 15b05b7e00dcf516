// Memo of per-node scores for scoring rules that depend only on the node's state and the task's
// shape. An entry holds the state it was scored in and answers only for that state, so after a
// placement only the one changed node is scored again, and a policy asked about copies of a pool
// that changed apart (the scheduler's trial pools) never answers for the wrong one (a version
// number alone cannot tell such copies apart).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/node.h"
#include "core/task.h"

namespace tidepool {

struct ScoredChoice {
  std::int64_t score = 0;
  GpuSet gpus = 0;  // the GPUs the rule picked on that node
};

class NodeScoreCache {
 public:
  // The slot of `task`'s shape, creating it if new. Memory grows with shapes x nodes; past
  // kMaxSlots distinct shapes the memo starts afresh.
  int slot_for(const TaskShape& task, int node_count);

  [[nodiscard]] const ScoredChoice* find(int slot, NodeId node, const NodeState& state) const {
    const Entry& e = entries_[index(slot, node)];
    return e.filled && e.state == state ? &e.choice : nullptr;
  }
  void store(int slot, NodeId node, const NodeState& state, ScoredChoice choice) {
    entries_[index(slot, node)] = Entry{true, state, choice};
  }

  static constexpr int kMaxSlots = 4096;

 private:
  struct Entry {
    bool filled = false;
    NodeState state;  // scored in
    ScoredChoice choice;
  };
  [[nodiscard]] std::size_t index(int slot, NodeId node) const {
    return static_cast<std::size_t>(slot) * static_cast<std::size_t>(node_count_) + node.value;
  }

  int node_count_ = 0;
  std::unordered_map<TaskShape, int, TaskShapeHash> slots_;
  std::vector<Entry> entries_;
};

}  // namespace tidepool
