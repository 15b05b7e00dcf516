// An index of a pool's nodes by score, for scoring rules whose score of a node depends only on the
// node (its spec and state) and the task's shape, as FGD's and Tidepool's do: per task shape, the
// nodes where the task fits, ordered by score (highest first) then by the pool's tie rank. A
// decision takes the first; the nodes changed since the shape's last decision (Pool::changes_since)
// are scored again and moved, the others are not looked at. So the index answers exactly what the
// scan pick_highest_score (node_choice.h) answers, node and GPUs, in O(changed nodes x (score +
// log nodes)) rather than O(nodes).
//
// It follows one pool: the first it is asked about, until that pool is gone (PoolIdentity). Asked
// about another (a copy the scheduler tries placements on), it answers "not indexed" and the
// caller scans. It indexes as many shapes as kMemoryBudget holds for the pool's node count
// (max_shapes(): 10,000 nodes, 67 shapes; 100,000 nodes, 6), the first asked about first (the
// workload's usual ones); for another it answers "not indexed" too.
//
// Memory: per indexed shape and node, its key in the order (a std::set node with its key, about
// 64 bytes) and its scored choice and key (about 33 bytes): kBytesPerEntry, about 100 bytes x
// nodes x shapes, at most kMemoryBudget.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/policies/node_choice.h"
#include "core/policies/score_cache.h"
#include "core/pool.h"
#include "core/task.h"

namespace tidepool {

class NodeScoreIndex {
 public:
  static constexpr std::size_t kBytesPerEntry = 100;
  static constexpr std::size_t kMemoryBudget = std::size_t{64} << 20;
  // How many shapes the index keeps for a pool of `nodes`: as many as kMemoryBudget holds, at
  // least 4 and at most 256.
  [[nodiscard]] static std::size_t max_shapes(std::size_t nodes) {
    const std::size_t fit = kMemoryBudget / (kBytesPerEntry * std::max<std::size_t>(nodes, 1));
    return std::clamp<std::size_t>(fit, 4, 256);
  }

  struct Answer {
    bool indexed = false;                                 // false: scan instead
    std::optional<std::pair<NodeId, ScoredChoice>> best;  // none: the task fits nowhere
  };

  // The node of highest score (lowest tie rank among equals) where `task` fits, with the choice
  // `evaluate(NodeId)` made there (a ScoredChoice; called only for nodes where the task fits).
  template <class Evaluate>
  Answer best(const Pool& pool, const TaskShape& task, Evaluate&& evaluate) {
    Shape* shape = shape_for(pool, task);
    if (shape == nullptr) return {};
    const auto update = [&](NodeId node) {
      const std::size_t n = node.value;
      if (shape->listed[n] != 0) shape->order.erase(shape->keys[n]);
      shape->listed[n] = 0;
      if (!fits(pool.spec(node), pool.state(node), task)) return;
      shape->choices[n] = evaluate(node);
      shape->keys[n] = Key{-shape->choices[n].score, pool.tie_rank(node), node.value};
      shape->order.insert(shape->keys[n]);
      shape->listed[n] = 1;
    };
    follow(pool, *shape, update);
    if (shape->order.empty()) return {.indexed = true, .best = std::nullopt};
    const NodeId node{std::get<2>(*shape->order.begin())};
    return {.indexed = true, .best = std::pair{node, shape->choices[node.value]}};
  }

 private:
  using Key = std::tuple<std::int64_t, std::uint32_t, std::uint32_t>;  // -score, tie rank, node
  struct Shape {
    std::set<Key> order;
    std::vector<Key> keys;              // per node: its key in `order`, when listed
    std::vector<ScoredChoice> choices;  // per node: its choice, when listed
    std::vector<std::uint8_t> listed;   // per node
    std::uint64_t synced = 0;           // the pool's change_count() when last brought up to date
    bool built = false;
  };

  // The shape's index for `pool`, or null when this index does not follow that pool or has no
  // room for another shape.
  Shape* shape_for(const Pool& pool, const TaskShape& task);

  // Brings `shape` up to date with `pool`: `update` for every node changed since (every node when
  // it is new or too far behind).
  template <class Update>
  void follow(const Pool& pool, Shape& shape, Update&& update) {
    const auto changes = shape.built ? pool.changes_since(shape.synced) : std::nullopt;
    if (!changes) {
      shape.order.clear();
      const auto nodes = static_cast<std::size_t>(pool.node_count());
      shape.keys.assign(nodes, Key{});
      shape.choices.assign(nodes, ScoredChoice{});
      shape.listed.assign(nodes, 0);
      for (std::uint32_t n = 0; n < nodes; ++n) update(NodeId{n});
      shape.built = true;
    } else {
      // A node changed several times is scored once.
      ++stamp_;
      for (const std::uint32_t n : *changes) {
        if (seen_[n] == stamp_) continue;
        seen_[n] = stamp_;
        update(NodeId{n});
      }
    }
    shape.synced = pool.change_count();
  }

  std::weak_ptr<const char> pool_;
  bool following_ = false;
  std::unordered_map<TaskShape, Shape, TaskShapeHash> shapes_;
  std::vector<std::uint64_t> seen_;  // per node: the stamp of the last follow() that scored it
  std::uint64_t stamp_ = 0;
};

// Whether a scoring policy looks its nodes up in an index or scans them all (the same choices).
enum class ScoreLookup : std::uint8_t { kIndex, kScan };

// A scoring policy's choice for `task`: by `index` when it follows the pool (and is given), else by
// the scan with `cache` (each node's choice kept for its state); nullopt when the task fits
// nowhere. `evaluate(NodeId)` scores a node where the task fits (a ScoredChoice).
template <class Evaluate>
std::optional<Assignment> place_by_score(const Pool& pool, const TaskShape& task,
                                         NodeScoreIndex* index, NodeScoreCache& cache,
                                         Evaluate&& evaluate) {
  if (index != nullptr) {
    const NodeScoreIndex::Answer answer = index->best(pool, task, evaluate);
    if (answer.indexed) {
      if (!answer.best) return std::nullopt;
      return Assignment{answer.best->first, answer.best->second.gpus};
    }
  }
  const int slot = cache.slot_for(task, pool.node_count());
  const auto node = pick_highest_score(pool, task, [&](NodeId n) {
    const NodeState& state = pool.state(n);
    if (const ScoredChoice* hit = cache.find(slot, n, state)) return hit->score;
    const ScoredChoice choice = evaluate(n);
    cache.store(slot, n, state, choice);
    return choice.score;
  });
  if (!node) return std::nullopt;
  return Assignment{*node, cache.find(slot, *node, pool.state(*node))->gpus};
}

}  // namespace tidepool
