#include "core/mig_placement.h"

#include <tuple>

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
  std::optional<std::tuple<MigRoom, std::uint32_t, Assignment>> best;
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    if (!allowed(allowed_nodes, node)) continue;
    const std::optional<MigNodeChoice> choice = mig_choice_on_node(pool, node, task);
    if (!choice) continue;
    const std::uint32_t rank = pool.tie_rank(node);
    if (best && std::tie(choice->lost, rank) >= std::tie(std::get<0>(*best), std::get<1>(*best))) {
      continue;
    }
    best = {choice->lost, rank, choice->where};
  }
  if (!best) return std::nullopt;
  return std::get<2>(*best);
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
