// An index of a pool's nodes by score, for scoring rules whose score of a node depends only on the
// node (its spec and state) and the task's shape, as FGD's and Tidepool's do: per task shape, the
// nodes where the task fits, ordered by score (highest first) then by the pool's tie rank. A
// decision takes the first; the nodes changed since the shape's last decision (Pool::changes_since)
// are scored again and moved, the others are not looked at. So the index answers exactly what the
// scan pick_highest_score (node_choice.h) answers, node and GPUs, in O(changed nodes x score)
// rather than O(nodes).
//
// The order of a shape is a few buckets, one per score value in use (at most kMaxScores), each a
// bit set over tie ranks with a summary level per 64 bits, so moving a node and finding the first
// are a few word operations. Scores must take few distinct values (FGD's and Tidepool's are
// 0..100): a shape whose nodes need more than kMaxScores at once is not indexed (the caller scans).
//
// A rule whose score reads all of the shape but its memory (TaskInScore::kAllButMemory: FGD and
// Tidepool, where memory only decides where a task fits) shares one order between the shapes that
// differ only in memory: the nodes where the shape fits but for memory, scored once per change;
// a decision walks the order to the first of them that has the memory too (where memory is what
// the best nodes lack, a walk as long as a scan).
//
// It follows one pool: the first it is asked about, until that pool is gone (PoolIdentity). Asked
// about another (a copy the scheduler tries placements on), it answers "not indexed" and the
// caller scans. It indexes as many shapes as kMemoryBudget holds for the pool's node count
// (max_shapes(): 10,000 nodes, 256; 100,000 nodes, 41), the first asked about first (the
// workload's usual ones); for another it answers "not indexed" too.
//
// Memory, per indexed shape and node: 8 bytes (its bucket, GPUs and tie rank) and one bit per
// bucket in use plus 1/63 of that for the summaries (kBytesPerEntry, 16 bytes, counts 64
// buckets); per node, 8 bytes more (the rank-to-node table and a stamp). The placement bench
// reports what the index takes at 1,000 to 100,000 nodes (bench/README.md): about 250 bytes per
// node for FGD's 28 memoryless shapes of its openb-like workload.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/node.h"
#include "core/policies/node_choice.h"
#include "core/policies/score_cache.h"
#include "core/pool.h"
#include "core/task.h"

namespace tidepool {

// What a scoring rule's score of a node reads of the task: its whole shape, or all of it but its
// memory (the rule gives the same score and GPUs to shapes that differ only in memory_mib).
enum class TaskInScore : std::uint8_t { kWholeShape, kAllButMemory };

// A set of ranks 0..size-1 with its first member at or after a rank in a few word operations: a
// bit per rank and, above it, a bit per nonempty word of the level below, up to one word.
class RankSet {
 public:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  explicit RankSet(std::uint32_t size);

  void insert(std::uint32_t rank) {
    std::uint64_t pos = rank;
    for (std::size_t level = 0; level + 1 < starts_.size(); ++level) {
      std::uint64_t& word = words_[starts_[level] + (pos >> 6)];
      const bool was_empty = word == 0;
      word |= std::uint64_t{1} << (pos & 63);
      if (!was_empty) return;
      pos >>= 6;
    }
  }
  void erase(std::uint32_t rank) {
    std::uint64_t pos = rank;
    for (std::size_t level = 0; level + 1 < starts_.size(); ++level) {
      std::uint64_t& word = words_[starts_[level] + (pos >> 6)];
      word &= ~(std::uint64_t{1} << (pos & 63));
      if (word != 0) return;
      pos >>= 6;
    }
  }
  // The lowest member >= `from`, or kNone.
  [[nodiscard]] std::uint32_t next(std::uint32_t from) const;
  [[nodiscard]] std::size_t memory_bytes() const {
    return words_.capacity() * sizeof(std::uint64_t) + starts_.capacity() * sizeof(std::size_t);
  }

 private:
  std::vector<std::uint64_t> words_;  // level 0 (a bit per rank), then each summary level
  std::vector<std::size_t> starts_;   // where each level starts in words_, then words_.size()
};

class NodeScoreIndex {
 public:
  static constexpr std::size_t kBytesPerEntry = 16;
  static constexpr std::size_t kMemoryBudget = std::size_t{64} << 20;
  static constexpr std::size_t kMaxScores = 255;
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
  // `evaluate(NodeId)` made there (a ScoredChoice; called only for nodes where the task fits, but
  // for its memory with TaskInScore::kAllButMemory). With `allowed` (one flag per node), among the
  // nodes n with allowed[n] != 0 only: the walk down the order passes over the others, so it costs
  // up to the listed nodes ranked ahead of the first allowed one.
  template <class Evaluate>
  Answer best(const Pool& pool, const TaskShape& task, Evaluate&& evaluate,
              TaskInScore in_score = TaskInScore::kWholeShape,
              std::span<const std::uint8_t> allowed = {}) {
    TaskShape key = task;
    if (in_score == TaskInScore::kAllButMemory) key.memory_mib = 0;
    Shape* shape = shape_for(pool, key);
    if (shape == nullptr) return {};
    const auto unlist = [&](NodeId node) {
      Entry& entry = shape->entries[node.value];
      if (entry.bucket == kUnlisted) return;
      Bucket& old = shape->buckets[entry.bucket];
      old.ranks.erase(entry.rank);
      --old.count;
      entry.bucket = kUnlisted;
    };
    const auto list = [&](NodeId node) {
      if (shape->overflowed || !fits(pool.spec(node), pool.state(node), key)) return;
      const ScoredChoice choice = evaluate(node);
      const std::optional<std::uint8_t> bucket = bucket_for(pool, *shape, choice.score);
      if (!bucket) {
        shape->overflowed = true;
        return;
      }
      const std::uint32_t rank = pool.tie_rank(node);
      if (node_at_rank_[rank] != node.value) learn_tie_order(pool);
      shape->buckets[*bucket].ranks.insert(rank);
      ++shape->buckets[*bucket].count;
      shape->entries[node.value] = Entry{rank, static_cast<std::uint16_t>(choice.gpus), *bucket};
    };
    follow(pool, *shape, unlist, list);
    if (shape->overflowed) {
      release(*shape);
      return {};
    }
    // The first node of the highest bucket (that has the memory, when the order is shared).
    const bool check_memory = key.memory_mib != task.memory_mib;
    for (const std::uint8_t id : shape->by_score) {
      const Bucket& bucket = shape->buckets[id];
      if (bucket.count == 0) continue;
      for (std::uint32_t rank = bucket.ranks.next(0); rank != RankSet::kNone;
           rank = bucket.ranks.next(rank + 1)) {
        const NodeId node{node_at_rank_[rank]};
        if (!allowed.empty() && allowed[node.value] == 0) continue;
        if (check_memory && !fits(pool.spec(node), pool.state(node), task)) continue;
        const ScoredChoice choice{bucket.score, shape->entries[node.value].gpus};
        return {.indexed = true, .best = std::pair{node, choice}};
      }
    }
    return {.indexed = true, .best = std::nullopt};
  }

  // The bytes the index holds now (its vectors' capacities; the hash table's nodes estimated).
  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  static constexpr std::uint8_t kUnlisted = 255;
  static_assert(kMaxGpusPerNode <= 16, "Entry keeps a node's GPU set in 16 bits");
  static_assert(kMaxScores <= kUnlisted, "a bucket id is 8 bits, kUnlisted aside");

  struct Entry {
    std::uint32_t rank = 0;  // the node's tie rank when listed: its bit in its bucket
    std::uint16_t gpus = 0;  // the GPUs of its choice
    std::uint8_t bucket = kUnlisted;
  };
  struct Bucket {
    std::int64_t score = 0;
    std::uint32_t count = 0;  // members of `ranks`; an empty bucket may take another score
    RankSet ranks;
  };
  struct Shape {
    std::vector<Entry> entries;          // per node
    std::vector<Bucket> buckets;         // at most kMaxScores
    std::vector<std::uint8_t> by_score;  // the buckets' ids, highest score first
    std::uint64_t synced = 0;            // the pool's change_count() when last brought up to date
    bool built = false;
    bool overflowed = false;  // more than kMaxScores scores at once: not indexed from then on
  };

  // The shape's index for `pool`, or null when this index does not follow that pool, has no room
  // for another shape, or the shape's scores overflowed.
  Shape* shape_for(const Pool& pool, const TaskShape& key);
  // The bucket of `score` in `shape`, made (or an empty one taken over) if new; none when all
  // kMaxScores are in use.
  std::optional<std::uint8_t> bucket_for(const Pool& pool, Shape& shape, std::int64_t score);
  // Reads the pool's tie order into node_at_rank_ (the pool set a new one).
  void learn_tie_order(const Pool& pool);
  // Frees what an overflowed shape held.
  static void release(Shape& shape);

  // Brings `shape` up to date with `pool`: `unlist` then `list` for every node changed since
  // (every node when it is new or too far behind). All are unlisted before any is listed again:
  // after a new tie order, a node still listed at its old rank may hold another's new rank.
  template <class Unlist, class List>
  void follow(const Pool& pool, Shape& shape, Unlist&& unlist, List&& list) {
    const auto changes = shape.built ? pool.changes_since(shape.synced) : std::nullopt;
    if (!changes) {
      const auto nodes = static_cast<std::size_t>(pool.node_count());
      shape.entries.assign(nodes, Entry{});
      shape.buckets.clear();
      shape.by_score.clear();
      for (std::uint32_t n = 0; n < nodes; ++n) list(NodeId{n});
      shape.built = true;
    } else {
      // A node changed several times is scored once: seen_ is `unlisted` once it is unlisted,
      // `unlisted` + 1 once listed again.
      if (stamp_ >= std::numeric_limits<std::uint32_t>::max() - 2) {
        std::fill(seen_.begin(), seen_.end(), 0);
        stamp_ = 0;
      }
      const std::uint32_t unlisted = stamp_ + 1;
      stamp_ += 2;
      for (const std::uint32_t n : *changes) {
        if (seen_[n] == unlisted) continue;
        seen_[n] = unlisted;
        unlist(NodeId{n});
      }
      for (const std::uint32_t n : *changes) {
        if (seen_[n] != unlisted) continue;
        seen_[n] = unlisted + 1;
        list(NodeId{n});
      }
    }
    shape.synced = pool.change_count();
  }

  std::weak_ptr<const char> pool_;
  bool following_ = false;
  std::unordered_map<TaskShape, Shape, TaskShapeHash> shapes_;
  std::vector<std::uint32_t> seen_;          // per node: the stamp of the last follow() that saw it
  std::vector<std::uint32_t> node_at_rank_;  // the followed pool's tie order, as last read
  std::uint32_t stamp_ = 0;
};

// Whether a scoring policy looks its nodes up in an index or scans them all (the same choices).
enum class ScoreLookup : std::uint8_t { kIndex, kScan };

// A scoring policy's choice for `task`: by `index` when it follows the pool (and is given), else by
// the scan with `cache` (each node's choice kept for its state); nullopt when the task fits
// nowhere. `evaluate(NodeId)` scores a node where the task fits (a ScoredChoice); `in_score` says
// whether that reads the task's memory (the scan does not rely on it). With `allowed` (one flag
// per node), among the nodes n with allowed[n] != 0 only.
template <class Evaluate>
std::optional<Assignment> place_by_score(const Pool& pool, const TaskShape& task,
                                         NodeScoreIndex* index, NodeScoreCache& cache,
                                         Evaluate&& evaluate,
                                         TaskInScore in_score = TaskInScore::kWholeShape,
                                         std::span<const std::uint8_t> allowed = {}) {
  if (index != nullptr) {
    const NodeScoreIndex::Answer answer = index->best(pool, task, evaluate, in_score, allowed);
    if (answer.indexed) {
      if (!answer.best) return std::nullopt;
      return Assignment{answer.best->first, answer.best->second.gpus};
    }
  }
  const int slot = cache.slot_for(task, pool.node_count());
  const auto node = pick_highest_score(
      pool, task,
      [&](NodeId n) {
        const NodeState& state = pool.state(n);
        if (const ScoredChoice* hit = cache.find(slot, n, state)) return hit->score;
        const ScoredChoice choice = evaluate(n);
        cache.store(slot, n, state, choice);
        return choice.score;
      },
      allowed);
  if (!node) return std::nullopt;
  return Assignment{*node, cache.find(slot, *node, pool.state(*node))->gpus};
}

}  // namespace tidepool
