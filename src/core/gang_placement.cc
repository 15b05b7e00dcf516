#include "core/gang_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "core/mig_placement.h"
#include "core/policies/node_choice.h"

namespace tidepool {
namespace {

constexpr std::uint32_t kNoRank = std::numeric_limits<std::uint32_t>::max();

// A node, leaf or spine as the greedy fill sees it.
struct Unit {
  std::uint32_t index = 0;
  std::int64_t room = 0;        // tasks it can host
  std::int64_t whole_free = 0;  // whole free GPUs of any model: the leftover a fit leaves
  std::uint32_t rank = kNoRank;
};

// Splits `need` tasks among `units` using as few units as possible: the roomiest units while no
// single one holds the rest, then the tightest one that does. Returns (unit index, tasks).
std::vector<std::pair<std::uint32_t, std::int64_t>> split_among(std::vector<Unit> units,
                                                                std::int64_t need) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> picks;
  std::vector<bool> used(units.size(), false);
  while (need > 0) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(units.size()); ++i) {
      const Unit& u = units[i];
      if (used[i] || u.room == 0) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const Unit& b = units[best];
      const bool u_holds = u.room >= need;
      const bool b_holds = b.room >= need;
      bool better = false;
      if (u_holds != b_holds) {
        better = u_holds;
      } else if (u_holds) {
        better = std::tie(u.whole_free, u.room, u.rank) < std::tie(b.whole_free, b.room, b.rank);
      } else {
        better = std::make_tuple(-u.room, u.whole_free, u.rank) <
                 std::make_tuple(-b.room, b.whole_free, b.rank);
      }
      if (better) best = i;
    }
    if (best < 0) break;  // callers only ask for what the units hold
    used[best] = true;
    const std::int64_t take = std::min(units[best].room, need);
    picks.emplace_back(units[best].index, take);
    need -= take;
  }
  return picks;
}

// Whole free GPUs of `state` within NVLink domain `domain`.
GpuSet free_in_domain(const NodeSpec& spec, GpuSet free, int domain) {
  GpuSet in = 0;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (gpu_set_contains(free, g) && spec.nvlink_domain[g] == domain) in |= single_gpu(g);
  }
  return in;
}

GpuSet lowest_bits(GpuSet set, int count) {
  GpuSet chosen = 0;
  for (int g = 0; g < kMaxGpusPerNode && count > 0; ++g) {
    if (gpu_set_contains(set, g)) {
      chosen |= single_gpu(g);
      --count;
    }
  }
  return chosen;
}

int domain_count(const NodeSpec& spec) {
  int highest = -1;
  for (int g = 0; g < spec.gpu_count; ++g) highest = std::max<int>(highest, spec.nvlink_domain[g]);
  return highest + 1;
}

// The NVLink domains (bit d: domain d) that `gpus` of a node of `spec` fall in.
std::uint32_t nvlink_domains_of(const NodeSpec& spec, GpuSet gpus) {
  std::uint32_t domains = 0;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (gpu_set_contains(gpus, g)) domains |= std::uint32_t{1} << spec.nvlink_domain[g];
  }
  return domains;
}

// What decides between candidates: the objective of the header, in order.
using Key = std::tuple<int, int, int, int, int, std::int64_t, std::int64_t,
                       std::vector<std::pair<std::uint32_t, GpuSet>>>;

class GangPlanner {
 public:
  GangPlanner(const Pool& pool, const GangRequest& request,
              std::span<const std::uint8_t> allowed = {})
      : pool_(pool),
        task_(request.task),
        need_(request.task_count),
        gpus_(request.task.gpu_count),
        nvlink_(request.topology.requires_level(TopologyLevel::kNvlink)),
        topology_(request.topology) {
    const Topology& topology = pool.topology();
    leaf_nodes_.resize(topology.leaves.size());
    spine_leaves_.resize(topology.spines.size());
    for (std::uint32_t l = 0; l < topology.leaves.size(); ++l) {
      spine_leaves_[topology.leaves[l].spine.value].push_back(l);
    }
    room_.resize(pool.node_count());
    leaf_free_.assign(topology.leaves.size(), 0);
    for (std::uint32_t n = 0; n < room_.size(); ++n) {
      room_[n] = allowed.empty() || allowed[n] != 0 ? node_room(NodeId{n}) : 0;
      const std::uint32_t leaf = pool.spec(NodeId{n}).leaf.value;
      leaf_nodes_[leaf].push_back(n);
      leaf_free_[leaf] += pool.state(NodeId{n}).whole_free_gpus;
    }
  }

  GangResult place() {
    if (gpus_ > 0 && std::none_of(pool_.specs().begin(), pool_.specs().end(),
                                  [&](const NodeSpec& spec) { return accepts(spec); })) {
      return unplaceable(fmt::format("no node has {}", gpu_words()));
    }
    if (gpus_ > 0 && nvlink_) {
      int largest = 0;
      for (const NodeSpec& spec : pool_.specs()) {
        if (!accepts(spec)) continue;
        for (int d = 0; d < domain_count(spec); ++d) {
          largest = std::max(largest, gpu_set_size(free_in_domain(spec, all_gpus(spec), d)));
        }
      }
      if (largest < gpus_) {
        return unplaceable(
            fmt::format("needs {} {} in one NVLink domain; the largest NVLink "
                        "domain of an accepted node has {}",
                        gpus_, gpu_words(), largest));
      }
    }

    // One node, if any can host the whole gang. Every such candidate spans one spine, leaf and
    // node, and tie ranks are unique per node, so the objective's remaining terms decide
    // between them: split tasks, NVLink domains, the leaf's and node's whole free GPUs, and
    // the node's tie rank (what the general key compares, without building it per node).
    std::optional<SingleNodeKey> best_single;
    std::vector<Assignment> scratch;
    for (std::uint32_t n = 0; n < room_.size(); ++n) {
      if (room_[n] < need_) continue;
      // No split task and one NVLink domain is the best a fill can do: a node that would lose
      // even then is not filled.
      if (best_single && !(lower_bound_key(NodeId{n}) < *best_single)) continue;
      scratch.clear();
      fill_node(NodeId{n}, need_, scratch);
      const SingleNodeKey key = single_node_key(NodeId{n}, scratch);
      if (!best_single || key < *best_single) {
        best_single = key;
        best_ = scratch;
      }
    }
    if (best_) return finish();
    if (topology_.requires_level(TopologyLevel::kNode)) return scope_failure(TopologyLevel::kNode);

    for (std::uint32_t l = 0; l < leaf_nodes_.size(); ++l) {
      if (leaf_unit(l).room < need_) continue;
      std::vector<Assignment> out;
      fill_leaf(l, need_, out);
      consider(std::move(out));
    }
    if (best_) return finish();
    if (topology_.requires_level(TopologyLevel::kLeaf)) return scope_failure(TopologyLevel::kLeaf);

    for (std::uint32_t s = 0; s < spine_leaves_.size(); ++s) {
      if (spine_unit(s).room < need_) continue;
      std::vector<Assignment> out;
      fill_spine(s, need_, out);
      consider(std::move(out));
    }
    if (best_) return finish();
    if (topology_.requires_level(TopologyLevel::kSpine))
      return scope_failure(TopologyLevel::kSpine);

    std::vector<Unit> spines;
    std::int64_t total = 0;
    for (std::uint32_t s = 0; s < spine_leaves_.size(); ++s) {
      spines.push_back(spine_unit(s));
      total += spines.back().room;
    }
    if (total < need_) return scope_failure(std::nullopt);
    std::vector<Assignment> out;
    for (const auto& [s, take] : split_among(std::move(spines), need_)) fill_spine(s, take, out);
    consider(std::move(out));
    return finish();
  }

 private:
  [[nodiscard]] bool accepts(const NodeSpec& spec) const {
    return gpus_ == 0 || (spec.gpu_count > 0 && task_.models.accepts(spec.model));
  }

  static GpuSet all_gpus(const NodeSpec& spec) {
    return static_cast<GpuSet>((std::uint64_t{1} << spec.gpu_count) - 1);
  }

  static GpuSet whole_free_set(const NodeSpec& spec, const NodeState& state) {
    GpuSet free = 0;
    for (int g = 0; g < spec.gpu_count; ++g) {
      if (state.free_milli[g] == kMilliPerGpu) free |= single_gpu(g);
    }
    return free;
  }

  // Tasks the node can host now, at most N.
  [[nodiscard]] std::int64_t node_room(NodeId node) const {
    const NodeSpec& spec = pool_.spec(node);
    const NodeState& state = pool_.state(node);
    if (!accepts(spec) || state.cordoned) return 0;
    std::int64_t room = std::min<std::int64_t>(need_, kMaxTasksPerNode - state.running_tasks());
    if (gpus_ > 0) {
      std::int64_t by_gpu = 0;
      if (nvlink_) {
        const GpuSet free = whole_free_set(spec, state);
        for (int d = 0; d < domain_count(spec); ++d) {
          by_gpu += gpu_set_size(free_in_domain(spec, free, d)) / gpus_;
        }
      } else {
        by_gpu = state.whole_free_gpus / gpus_;
      }
      room = std::min(room, by_gpu);
    }
    if (task_.milli_cpu > 0) room = std::min(room, state.free_cpu / task_.milli_cpu);
    if (task_.memory_mib > 0) room = std::min(room, state.free_memory / task_.memory_mib);
    return std::max<std::int64_t>(room, 0);
  }

  [[nodiscard]] Unit node_unit(std::uint32_t n) const {
    const NodeId id{n};
    return Unit{n, room_[n], pool_.state(id).whole_free_gpus,
                room_[n] > 0 ? pool_.tie_rank(id) : kNoRank};
  }

  [[nodiscard]] Unit leaf_unit(std::uint32_t l) const {
    Unit unit{l, 0, 0, kNoRank};
    for (std::uint32_t n : leaf_nodes_[l]) {
      const Unit node = node_unit(n);
      unit.room += node.room;
      unit.whole_free += node.whole_free;
      unit.rank = std::min(unit.rank, node.rank);
    }
    return unit;
  }

  [[nodiscard]] Unit spine_unit(std::uint32_t s) const {
    Unit unit{s, 0, 0, kNoRank};
    for (std::uint32_t l : spine_leaves_[s]) {
      const Unit leaf = leaf_unit(l);
      unit.room += leaf.room;
      unit.whole_free += leaf.whole_free;
      unit.rank = std::min(unit.rank, leaf.rank);
    }
    return unit;
  }

  // Places `count` tasks on the node (which has room for them), one NVLink domain each where it
  // can: the tightest domain that holds the task, lowest-index GPUs first.
  void fill_node(NodeId node, std::int64_t count, std::vector<Assignment>& out) const {
    const NodeSpec& spec = pool_.spec(node);
    GpuSet free = whole_free_set(spec, pool_.state(node));
    const int domains = domain_count(spec);
    for (std::int64_t t = 0; t < count; ++t) {
      GpuSet chosen = 0;
      if (gpus_ > 0) {
        int tightest = -1, tightest_size = 0;
        for (int d = 0; d < domains; ++d) {
          const int size = gpu_set_size(free_in_domain(spec, free, d));
          if (size >= gpus_ && (tightest < 0 || size < tightest_size)) {
            tightest = d;
            tightest_size = size;
          }
        }
        if (tightest >= 0) {
          chosen = lowest_bits(free_in_domain(spec, free, tightest), gpus_);
        } else {
          // No single domain holds the task: the fewest domains, the fullest first.
          std::vector<std::pair<int, int>> by_size;  // (-free GPUs, domain)
          for (int d = 0; d < domains; ++d) {
            by_size.emplace_back(-gpu_set_size(free_in_domain(spec, free, d)), d);
          }
          std::sort(by_size.begin(), by_size.end());
          int left = gpus_;
          for (const auto& [minus_size, d] : by_size) {
            const GpuSet take = lowest_bits(free_in_domain(spec, free, d), left);
            chosen |= take;
            left -= gpu_set_size(take);
            if (left == 0) break;
          }
        }
        free &= ~chosen;
      }
      out.push_back(Assignment{node, chosen});
    }
  }

  void fill_leaf(std::uint32_t leaf, std::int64_t count, std::vector<Assignment>& out) const {
    std::vector<Unit> nodes;
    for (std::uint32_t n : leaf_nodes_[leaf]) nodes.push_back(node_unit(n));
    for (const auto& [n, take] : split_among(std::move(nodes), count)) {
      fill_node(NodeId{n}, take, out);
    }
  }

  void fill_spine(std::uint32_t spine, std::int64_t count, std::vector<Assignment>& out) const {
    std::vector<Unit> leaves;
    for (std::uint32_t l : spine_leaves_[spine]) leaves.push_back(leaf_unit(l));
    for (const auto& [l, take] : split_among(std::move(leaves), count)) fill_leaf(l, take, out);
  }

  // (split tasks, NVLink domains, leaf's whole free GPUs, node's whole free GPUs, tie rank):
  // the terms of Key that differ between gangs placed whole on one node.
  using SingleNodeKey = std::tuple<int, int, std::int64_t, std::int64_t, std::uint32_t>;

  [[nodiscard]] SingleNodeKey lower_bound_key(NodeId node) const {
    return SingleNodeKey{0, gpus_ > 0 ? 1 : 0, leaf_free_[pool_.spec(node).leaf.value],
                         pool_.state(node).whole_free_gpus, pool_.tie_rank(node)};
  }

  [[nodiscard]] SingleNodeKey single_node_key(NodeId node,
                                              std::span<const Assignment> assignments) const {
    const NodeSpec& spec = pool_.spec(node);
    int split = 0;
    std::uint32_t domains = 0;
    for (const Assignment& a : assignments) {
      const std::uint32_t task_domains = nvlink_domains_of(spec, a.gpus);
      if (std::popcount(task_domains) > 1) ++split;
      domains |= task_domains;
    }
    SingleNodeKey key = lower_bound_key(node);
    std::get<0>(key) = split;
    std::get<1>(key) = std::popcount(domains);
    return key;
  }

  [[nodiscard]] Key key_of(const std::vector<Assignment>& assignments) const {
    const GangSpan span = gang_span(pool_, assignments);
    std::vector<std::uint32_t> nodes, leaves;
    std::vector<std::pair<std::uint32_t, GpuSet>> ranks;
    for (const Assignment& a : assignments) {
      nodes.push_back(a.node.value);
      leaves.push_back(pool_.spec(a.node).leaf.value);
      ranks.emplace_back(pool_.tie_rank(a.node), a.gpus);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::sort(leaves.begin(), leaves.end());
    leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
    std::sort(ranks.begin(), ranks.end());
    std::int64_t leaf_free = 0, node_free = 0;
    for (std::uint32_t l : leaves) leaf_free += leaf_free_[l];
    for (std::uint32_t n : nodes) node_free += pool_.state(NodeId{n}).whole_free_gpus;
    return Key{span.spines,         span.leaves, span.nodes, span.split_tasks,
               span.nvlink_domains, leaf_free,   node_free,  std::move(ranks)};
  }

  void consider(std::vector<Assignment> assignments) {
    Key key = key_of(assignments);
    if (!best_ || key < best_key_) {
      best_ = std::move(assignments);
      best_key_ = std::move(key);
    }
  }

  GangResult finish() {
    GangPlacement placement;
    placement.span = gang_span(pool_, *best_);
    placement.assignments = std::move(*best_);
    return placement;
  }

  [[nodiscard]] std::string gpu_words() const {
    if (task_.models.is_any()) return "GPUs";
    return describe(task_.models, pool_.models()) + " GPUs";
  }

  [[nodiscard]] std::string tasks_words(std::int64_t n) const {
    return fmt::format("{} task{}", n, n == 1 ? "" : "s");
  }

  static GangResult unplaceable(std::string reason) {
    return std::unexpected(Unplaceable{std::move(reason)});
  }

  // The gang fits in no node / leaf / spine (`level`), or not in the whole pool (nullopt); says
  // so with the figures of the unit that comes closest.
  GangResult scope_failure(std::optional<TopologyLevel> level) const {
    // (room, accepted whole free GPUs) of the closest unit.
    std::pair<std::int64_t, std::int64_t> best{0, 0};
    auto node_figures = [&](std::uint32_t n) {
      const NodeSpec& spec = pool_.spec(NodeId{n});
      return std::pair<std::int64_t, std::int64_t>{
          room_[n], accepts(spec) ? pool_.state(NodeId{n}).whole_free_gpus : 0};
    };
    auto add = [](std::pair<std::int64_t, std::int64_t>& sum,
                  std::pair<std::int64_t, std::int64_t> part) {
      sum.first += part.first;
      sum.second += part.second;
    };
    if (level == TopologyLevel::kNode) {
      for (std::uint32_t n = 0; n < room_.size(); ++n) best = std::max(best, node_figures(n));
    } else {
      for (std::uint32_t s = 0; s < spine_leaves_.size(); ++s) {
        std::pair<std::int64_t, std::int64_t> spine{0, 0};
        for (std::uint32_t l : spine_leaves_[s]) {
          std::pair<std::int64_t, std::int64_t> leaf{0, 0};
          for (std::uint32_t n : leaf_nodes_[l]) add(leaf, node_figures(n));
          if (level == TopologyLevel::kLeaf) best = std::max(best, leaf);
          add(spine, leaf);
        }
        if (level == TopologyLevel::kSpine) best = std::max(best, spine);
        if (!level) add(best, spine);
      }
    }
    if (gpus_ > 0 && nvlink_) {
      int largest = 0;
      for (std::uint32_t n = 0; n < room_.size(); ++n) {
        const NodeSpec& spec = pool_.spec(NodeId{n});
        if (!accepts(spec)) continue;
        const GpuSet free = whole_free_set(spec, pool_.state(NodeId{n}));
        for (int d = 0; d < domain_count(spec); ++d) {
          largest = std::max(largest, gpu_set_size(free_in_domain(spec, free, d)));
        }
      }
      if (largest < gpus_) {
        return unplaceable(
            fmt::format("needs {} {} in one NVLink domain; largest free domain has {}", gpus_,
                        gpu_words(), largest));
      }
    }
    const std::string_view unit = !level                          ? "pool"
                                  : level == TopologyLevel::kNode ? "node"
                                  : level == TopologyLevel::kLeaf ? "leaf switch"
                                                                  : "spine switch";
    const std::string where = level ? fmt::format("one {}", unit) : "the pool";
    if (gpus_ == 0) {
      return unplaceable(fmt::format("no room in {} for {} of {}; room for {}", where,
                                     tasks_words(need_), describe(task_, pool_.models()),
                                     tasks_words(best.first)));
    }
    const std::string shape = fmt::format("{} x {} GPUs{}", tasks_words(need_), gpus_,
                                          nvlink_ ? " each in one NVLink domain" : "");
    if (!level) {
      return unplaceable(fmt::format("not enough free {} for {}: the pool has {} (room for {})",
                                     gpu_words(), shape, best.second, tasks_words(best.first)));
    }
    return unplaceable(fmt::format("no {} with {} free {} for {}; best has {} (room for {})", unit,
                                   need_ * gpus_, gpu_words(), shape, best.second,
                                   tasks_words(best.first)));
  }

  const Pool& pool_;
  const TaskShape& task_;
  std::int64_t need_;
  int gpus_;
  bool nvlink_;
  TopologyRequirement topology_;
  std::vector<std::int64_t> room_;                      // per node
  std::vector<std::vector<std::uint32_t>> leaf_nodes_;  // node ids per leaf, in id order
  std::vector<std::int64_t> leaf_free_;  // whole free GPUs per leaf, of every node in it
  std::vector<std::vector<std::uint32_t>> spine_leaves_;
  std::optional<std::vector<Assignment>> best_;
  Key best_key_;
};

}  // namespace

std::string_view topology_level_name(TopologyLevel level) {
  switch (level) {
    case TopologyLevel::kNvlink:
      return "nvlink";
    case TopologyLevel::kNode:
      return "node";
    case TopologyLevel::kLeaf:
      return "leaf";
    case TopologyLevel::kSpine:
      return "spine";
  }
  return "spine";
}

Result<void> validate_gang_request(const GangRequest& request) {
  if (request.task_count < 1) {
    return fail("task_count",
                fmt::format("a gang has at least 1 task, got {}", request.task_count));
  }
  const TaskShape& task = request.task;
  if (task.gpu_count < 0 || task.gpu_count > kMaxGpusPerNode) {
    return fail("gpu_count", fmt::format("must be 0..{}, got {}", kMaxGpusPerNode, task.gpu_count));
  }
  if (task.milli_cpu < 0 || task.memory_mib < 0) {
    return fail("task", "CPU and memory must not be negative");
  }
  if (task.needs_gpu() && (task.milli_per_gpu < 1 || task.milli_per_gpu > kMilliPerGpu)) {
    return fail("milli_per_gpu",
                fmt::format("must be 1..{}, got {}", kMilliPerGpu, task.milli_per_gpu));
  }
  if (task.is_fractional() && request.task_count != 1) {
    return fail("task_count", fmt::format("a task with a GPU fraction runs alone, got a gang of {}",
                                          request.task_count));
  }
  return check_mig_task(task, request.task_count);
}

GangResult place_gang(const Pool& pool, const GangRequest& request) {
  if (auto valid = validate_gang_request(request); !valid) {
    return std::unexpected(Unplaceable{"invalid gang: " + valid.error().message()});
  }
  if (request.task.mig) return place_mig_gang(pool, request, {});
  if (request.task.is_fractional()) {
    return std::unexpected(
        Unplaceable{"a task with a GPU fraction is placed by a placement policy"});
  }
  return GangPlanner(pool, request).place();
}

GangResult place_gang(const Pool& pool, const GangRequest& request,
                      std::span<const std::uint8_t> allowed_nodes) {
  if (auto valid = validate_gang_request(request); !valid) {
    return std::unexpected(Unplaceable{"invalid gang: " + valid.error().message()});
  }
  if (request.task.mig) return place_mig_gang(pool, request, allowed_nodes);
  if (request.task.is_fractional()) {
    return std::unexpected(
        Unplaceable{"a task with a GPU fraction is placed by a placement policy"});
  }
  if (!allowed_nodes.empty() &&
      allowed_nodes.size() != static_cast<std::size_t>(pool.node_count())) {
    return std::unexpected(Unplaceable{"the node filter does not match the pool"});
  }
  return GangPlanner(pool, request, allowed_nodes).place();
}

GangResult place_gang(const Pool& pool, const GangRequest& request,
                      PlacementPolicy& fraction_policy, Rng& rng) {
  if (auto valid = validate_gang_request(request); !valid) {
    return std::unexpected(Unplaceable{"invalid gang: " + valid.error().message()});
  }
  if (!request.task.is_fractional()) return place_gang(pool, request);  // MIG tasks too
  PlacementResult one = fraction_policy.place(pool, request.task, rng);
  if (!one) return std::unexpected(std::move(one.error()));
  GangPlacement placement;
  placement.assignments.push_back(*one);
  placement.span = gang_span(pool, placement.assignments);
  return placement;
}

GangResult place_gang_by_policy(const Pool& pool, const GangRequest& request,
                                PlacementPolicy& policy, Rng& rng) {
  return place_gang_by_policy(pool, request, {}, policy, rng);
}

GangResult place_gang_by_policy(const Pool& pool, const GangRequest& request,
                                std::span<const std::uint8_t> allowed_nodes,
                                PlacementPolicy& policy, Rng& rng) {
  if (request.task.mig) return place_gang(pool, request, allowed_nodes);
  if (request.task.is_fractional()) {
    if (!allowed_nodes.empty()) return place_gang(pool, request, allowed_nodes);
    return place_gang(pool, request, policy, rng);
  }
  if (request.task_count == 1 && request.task.gpu_count == 1 && allowed_nodes.empty()) {
    // One task of one GPU: the policy's node, when it finds one, spans the least any placement
    // can (the planner below finds one exactly when some node fits the task, and would only
    // tie), so the planner is asked only when the policy finds none.
    if (PlacementResult one = policy.place(pool, request.task, rng)) {
      GangPlacement chosen;
      chosen.assignments.push_back(*one);
      chosen.span = gang_span(pool, chosen.assignments);
      return chosen;
    }
    return place_gang(pool, request);
  }
  if (request.task_count == 1 && request.task.gpu_count == 1 && policy.places_among()) {
    // One task of one GPU on some nodes: as the copy below would, but without it (the policy's
    // node, found on the pool itself, is as compact as the planner's; the planner is asked only
    // when the policy finds none, as above).
    if (std::optional<Assignment> one = policy.place_among(pool, request.task, allowed_nodes)) {
      GangPlacement chosen;
      chosen.assignments.push_back(*one);
      chosen.span = gang_span(pool, chosen.assignments);
      return chosen;
    }
    return place_gang(pool, request, allowed_nodes);
  }
  GangResult planned = place_gang(pool, request, allowed_nodes);
  if (!planned) return planned;
  GangPlacement chosen;
  if (request.task_count == 1 && allowed_nodes.empty()) {
    // One task anywhere: the policy on the pool itself.
    PlacementResult one = policy.place(pool, request.task, rng);
    if (!one) return planned;
    chosen.assignments.push_back(*one);
  } else {
    // The policy on a copy of the pool: the nodes not allowed, and (for a gang of several
    // tasks) those outside the planner's leaves closed to it, each task's GPUs taken before the
    // next is placed.
    Pool trial = pool;
    std::vector<std::uint8_t> leaf_used(pool.topology().leaves.size(), 0);
    for (const Assignment& a : planned->assignments) leaf_used[pool.spec(a.node).leaf.value] = 1;
    for (int n = 0; n < pool.node_count(); ++n) {
      const NodeId node{static_cast<std::uint32_t>(n)};
      const bool allowed = allowed_nodes.empty() || allowed_nodes[static_cast<std::size_t>(n)] != 0;
      const bool near = request.task_count == 1 || leaf_used[pool.spec(node).leaf.value];
      if (!allowed || !near) (void)trial.set_schedulable(node, false);
    }
    for (int t = 0; t < request.task_count; ++t) {
      PlacementResult one = policy.place(trial, request.task, rng);
      if (!one || !trial.allocate(request.task, *one)) return planned;
      chosen.assignments.push_back(*one);
    }
  }
  chosen.span = gang_span(pool, chosen.assignments);
  auto levels = [](const GangSpan& s) {
    return std::make_tuple(s.spines, s.leaves, s.nodes, s.split_tasks, s.nvlink_domains);
  };
  if (levels(chosen.span) > levels(planned->span)) return planned;
  return chosen;
}

GangSpan gang_span(const Pool& pool, std::span<const Assignment> assignments) {
  std::vector<std::uint32_t> nodes, leaves, spines;
  std::vector<std::pair<std::uint32_t, int>> domains;
  GangSpan span;
  for (const Assignment& a : assignments) {
    const NodeSpec& spec = pool.spec(a.node);
    const LeafId leaf = spec.leaf;
    nodes.push_back(a.node.value);
    leaves.push_back(leaf.value);
    spines.push_back(pool.topology().leaves[leaf.value].spine.value);
    const std::uint32_t task_domains = nvlink_domains_of(spec, a.gpus);
    for (int d = 0; d < kMaxGpusPerNode; ++d) {
      if ((task_domains >> d) & 1U) domains.emplace_back(a.node.value, d);
    }
    if (std::popcount(task_domains) > 1) ++span.split_tasks;
  }
  auto distinct = [](auto& items) {
    std::sort(items.begin(), items.end());
    return static_cast<int>(std::unique(items.begin(), items.end()) - items.begin());
  };
  span.nodes = distinct(nodes);
  span.leaves = distinct(leaves);
  span.spines = distinct(spines);
  span.nvlink_domains = distinct(domains);
  return span;
}

}  // namespace tidepool
