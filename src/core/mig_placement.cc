#include "core/mig_placement.h"

#include <utility>

namespace tidepool {

std::optional<MigNodeChoice> mig_choice_on_node(const Pool& pool, NodeId node,
                                                const TaskShape& task) {
  if (!task.mig || !fits(pool.spec(node), pool.state(node), task)) return std::nullopt;
  std::optional<MigNodeChoice> best;
  for (int g = 0; g < pool.spec(node).gpu_count; ++g) {
    if (!pool.mig_usable(node, g)) continue;
    const std::optional<MigChoice> choice = mig_choice(*pool.mig_layout(node, g), *task.mig);
    if (!choice || (best && !(choice->lost < best->lost))) continue;  // ties: the lower GPU
    best = MigNodeChoice{choice->lost, Assignment{node, GpuSet{1} << g, choice->start}};
  }
  return best;
}

namespace {

bool allowed(std::span<const std::uint8_t> allowed_nodes, NodeId node) {
  return allowed_nodes.empty() ||
         (node.value < allowed_nodes.size() && allowed_nodes[node.value] != 0);
}

}  // namespace

std::optional<Assignment> pack_mig_task(const Pool& pool, const TaskShape& task,
                                        std::span<const std::uint8_t> allowed_nodes) {
  std::optional<std::pair<MigRoom, std::uint32_t>> best;  // what the GPU loses, the tie rank
  std::optional<Assignment> where;
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    if (!allowed(allowed_nodes, node)) continue;
    const std::optional<MigNodeChoice> choice = mig_choice_on_node(pool, node, task);
    if (!choice) continue;
    const std::pair key{choice->lost, pool.tie_rank(node)};
    if (best && !(key < *best)) continue;
    best = key;
    where = choice->where;
  }
  return where;
}

std::optional<Assignment> first_fit_mig_task(const Pool& pool, const TaskShape& task,
                                             std::span<const std::uint8_t> allowed_nodes) {
  if (!task.mig) return std::nullopt;
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    if (!allowed(allowed_nodes, node) || !fits(pool.spec(node), pool.state(node), task)) continue;
    for (int g = 0; g < pool.spec(node).gpu_count; ++g) {
      if (!pool.mig_usable(node, g)) continue;
      if (auto start = pool.mig_layout(node, g)->first_start(*task.mig)) {
        return Assignment{node, GpuSet{1} << g, *start};
      }
    }
  }
  return std::nullopt;
}

GangResult place_mig_gang(const Pool& pool, const GangRequest& request,
                          std::span<const std::uint8_t> allowed_nodes, MigRule rule) {
  const std::optional<Assignment> where =
      rule == MigRule::kPack ? pack_mig_task(pool, request.task, allowed_nodes)
                             : first_fit_mig_task(pool, request.task, allowed_nodes);
  if (!where) return std::unexpected(Unplaceable{explain_unplaceable(pool, request.task)});
  GangPlacement placement;
  placement.assignments.push_back(*where);
  placement.span = gang_span(pool, placement.assignments);
  return placement;
}

}  // namespace tidepool
