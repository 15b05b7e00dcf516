#include "core/policies/score_index.h"

namespace tidepool {

RankSet::RankSet(std::uint32_t size) {
  std::size_t words = std::max<std::size_t>((std::size_t{size} + 63) / 64, 1);
  std::size_t total = 0;
  while (true) {
    starts_.push_back(total);
    total += words;
    if (words == 1) break;
    words = (words + 63) / 64;
  }
  starts_.push_back(total);
  words_.assign(total, 0);
}

std::uint32_t RankSet::next(std::uint32_t from) const {
  const std::size_t levels = starts_.size() - 1;
  std::uint64_t pos = from;
  std::size_t level = 0;
  // Up: the first level with a member at or after pos in pos's own word (a word further on is a
  // bit further on in the level above).
  for (;; ++level) {
    if (level == levels) return kNone;
    const std::uint64_t word = pos >> 6;
    if (starts_[level] + word >= starts_[level + 1]) return kNone;
    const std::uint64_t bits = words_[starts_[level] + word] & (~std::uint64_t{0} << (pos & 63));
    if (bits != 0) {
      pos = (word << 6) + static_cast<std::uint64_t>(std::countr_zero(bits));
      break;
    }
    pos = word + 1;
  }
  // Down: the first member of each nonempty word.
  while (level > 0) {
    --level;
    pos = (pos << 6) + static_cast<std::uint64_t>(std::countr_zero(words_[starts_[level] + pos]));
  }
  return static_cast<std::uint32_t>(pos);
}

NodeScoreIndex::Shape* NodeScoreIndex::shape_for(const Pool& pool, const TaskShape& key) {
  if (!following_ || pool_.expired()) {
    // The first pool asked about, or a new one once the last is gone.
    pool_ = pool.identity().reference();
    following_ = true;
    shapes_.clear();
    seen_.assign(static_cast<std::size_t>(pool.node_count()), 0);
    stamp_ = 0;
    learn_tie_order(pool);
  }
  if (!pool.identity().is(pool_)) return nullptr;
  auto it = shapes_.find(key);
  if (it == shapes_.end()) {
    if (shapes_.size() >= max_shapes(static_cast<std::size_t>(pool.node_count()))) return nullptr;
    it = shapes_.try_emplace(key).first;
  }
  return it->second.overflowed ? nullptr : &it->second;
}

std::optional<std::uint8_t> NodeScoreIndex::bucket_for(const Pool& pool, Shape& shape,
                                                       std::int64_t score) {
  auto& order = shape.by_score;
  const auto higher = [&](std::uint8_t id, std::int64_t s) { return shape.buckets[id].score > s; };
  auto at = std::lower_bound(order.begin(), order.end(), score, higher);
  if (at != order.end() && shape.buckets[*at].score == score) return *at;
  std::uint8_t id = 0;
  if (shape.buckets.size() < kMaxScores) {
    id = static_cast<std::uint8_t>(shape.buckets.size());
    shape.buckets.push_back(
        Bucket{score, 0, RankSet(static_cast<std::uint32_t>(pool.node_count()))});
  } else {
    const auto empty = std::find_if(order.begin(), order.end(),
                                    [&](std::uint8_t b) { return shape.buckets[b].count == 0; });
    if (empty == order.end()) return std::nullopt;
    id = *empty;
    order.erase(empty);
    shape.buckets[id].score = score;
  }
  at = std::lower_bound(order.begin(), order.end(), score, higher);
  order.insert(at, id);
  return id;
}

void NodeScoreIndex::learn_tie_order(const Pool& pool) {
  node_at_rank_.assign(static_cast<std::size_t>(pool.node_count()), 0);
  for (std::uint32_t n = 0; n < node_at_rank_.size(); ++n) {
    node_at_rank_[pool.tie_rank(NodeId{n})] = n;
  }
}

void NodeScoreIndex::release(Shape& shape) {
  shape.entries = {};
  shape.buckets = {};
  shape.by_score = {};
}

std::size_t NodeScoreIndex::memory_bytes() const {
  std::size_t bytes = sizeof(*this) + seen_.capacity() * sizeof(std::uint32_t) +
                      node_at_rank_.capacity() * sizeof(std::uint32_t) +
                      shapes_.bucket_count() * sizeof(void*);
  for (const auto& [key, shape] : shapes_) {
    bytes += sizeof(key) + sizeof(shape) + 2 * sizeof(void*);  // a hash node
    bytes += shape.entries.capacity() * sizeof(Entry) + shape.by_score.capacity() +
             shape.buckets.capacity() * sizeof(Bucket);
    for (const Bucket& bucket : shape.buckets) bytes += bucket.ranks.memory_bytes();
  }
  return bytes;
}

}  // namespace tidepool
