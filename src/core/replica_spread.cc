#include "core/replica_spread.h"

#include <fmt/format.h>

#include <tuple>
#include <vector>

#include "core/mig_placement.h"
#include "core/simple_placement.h"

namespace tidepool {

std::string_view spread_level_name(SpreadLevel level) {
  return level == SpreadLevel::kNode ? "node" : "leaf";
}

Result<SpreadLevel> parse_spread_level(std::string_view name) {
  if (name == "node") return SpreadLevel::kNode;
  if (name == "leaf") return SpreadLevel::kLeaf;
  return fail("spread", fmt::format("'{}' is not one of node, leaf", name));
}

std::optional<Assignment> place_replica(const Pool& pool, const TaskShape& replica,
                                        std::span<const NodeId> replicas,
                                        const ReplicaSpread& spread) {
  // The service's replicas per node and per leaf.
  std::vector<int> on_node(static_cast<std::size_t>(pool.node_count()), 0);
  std::vector<int> on_leaf(pool.topology().leaves.size(), 0);
  for (const NodeId node : replicas) {
    if (node.value >= on_node.size()) continue;
    ++on_node[node.value];
    const LeafId leaf = pool.spec(node).leaf;
    if (leaf.value < on_leaf.size()) ++on_leaf[leaf.value];
  }
  // Of the allowed nodes where the replica fits, the fewest alike first; then best fit, or for a
  // MIG instance the packing of core/mig_placement.h.
  std::optional<std::tuple<int, BestFitKey, std::uint32_t>> best;
  std::optional<std::tuple<int, MigRoom, std::uint32_t>> best_mig;  // alike, lost, tie rank
  std::optional<Assignment> mig_where;
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    const NodeSpec& spec = pool.spec(node);
    const NodeState& state = pool.state(node);
    if (!fits(spec, state, replica)) continue;
    if (spread.max_per_node > 0 && on_node[node.value] >= spread.max_per_node) continue;
    const int alike = spread.level == SpreadLevel::kNode
                          ? on_node[node.value]
                          : (spec.leaf.value < on_leaf.size() ? on_leaf[spec.leaf.value] : 0);
    if (replica.mig) {
      const std::optional<MigNodeChoice> choice = mig_choice_on_node(pool, node, replica);
      if (!choice) continue;
      const std::tuple key{alike, choice->lost, pool.tie_rank(node)};
      if (!best_mig || key < *best_mig) {
        best_mig = key;
        mig_where = choice->where;
      }
      continue;
    }
    const std::tuple key{alike, best_fit_key(pool, node, state, replica), node.value};
    if (!best || key < *best) best = key;
  }
  if (mig_where) return mig_where;
  if (!best) return std::nullopt;
  const NodeId node{std::get<2>(*best)};
  return Assignment{
      node, task_gpus_on_node(pool.spec(node), pool.state(node), replica, NodeRule::kBestFit)};
}

}  // namespace tidepool
