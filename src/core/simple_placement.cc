#include "core/simple_placement.h"

#include <fmt/format.h>

#include <limits>
#include <tuple>
#include <vector>

#include "core/mig_placement.h"

namespace tidepool {
namespace {

// The lowest-index `count` whole free GPUs of `state`.
GpuSet lowest_whole_free(const NodeSpec& spec, const NodeState& state, int count) {
  GpuSet chosen = 0;
  for (int g = 0; g < spec.gpu_count && count > 0; ++g) {
    if (state.free_milli[g] == kMilliPerGpu) {
      chosen |= GpuSet{1} << g;
      --count;
    }
  }
  return chosen;
}

// The GPU of `state` that holds `milli` with the least free share (best fit) or the first one.
int fraction_gpu(const NodeSpec& spec, const NodeState& state, MilliGpu milli, NodeRule rule) {
  int chosen = -1;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (state.free_milli[g] < milli) continue;
    if (rule == NodeRule::kFirstFit) return g;
    if (chosen < 0 || state.free_milli[g] < state.free_milli[chosen]) chosen = g;
  }
  return chosen;
}

void take(NodeState& state, const NodeSpec& spec, const TaskShape& task, GpuSet gpus) {
  state.free_cpu -= task.milli_cpu;
  state.free_memory -= task.memory_mib;
  for (int g = 0; g < spec.gpu_count; ++g) {
    if (gpus & (GpuSet{1} << g)) state.free_milli[g] -= task.milli_per_gpu;
  }
  refresh_summary(state, spec.gpu_count);
}

}  // namespace

GpuSet task_gpus_on_node(const NodeSpec& spec, const NodeState& state, const TaskShape& task,
                         NodeRule rule) {
  if (task.is_fractional()) return GpuSet{1} << fraction_gpu(spec, state, task.milli_per_gpu, rule);
  if (task.needs_gpu()) return lowest_whole_free(spec, state, task.gpu_count);
  return 0;
}

BestFitKey best_fit_key(const Pool& pool, NodeId node, const NodeState& state,
                        const TaskShape& task) {
  return {state.whole_free_gpus - (task.is_fractional() ? 0 : task.gpu_count),
          state.free_cpu - task.milli_cpu, pool.tie_rank(node)};
}

GangResult place_gang_by_node_rule(const Pool& pool, const GangRequest& request, NodeRule rule) {
  if (auto valid = validate_gang_request(request); !valid) {
    return std::unexpected(Unplaceable{"invalid gang: " + valid.error().message()});
  }
  if (request.task.mig) {
    return place_mig_gang(pool, request, {},
                          rule == NodeRule::kFirstFit ? MigRule::kFirstFit : MigRule::kPack);
  }
  const TaskShape& task = request.task;
  std::vector<NodeState> states(pool.states().begin(), pool.states().end());
  GangPlacement placement;
  placement.assignments.reserve(static_cast<std::size_t>(request.task_count));
  for (int t = 0; t < request.task_count; ++t) {
    int chosen = -1;
    BestFitKey best{std::numeric_limits<int>::max(), 0, 0};
    for (int n = 0; n < pool.node_count(); ++n) {
      const NodeId node{static_cast<std::uint32_t>(n)};
      const NodeSpec& spec = pool.spec(node);
      if (!fits(spec, states[n], task)) continue;
      if (rule == NodeRule::kFirstFit) {
        chosen = n;
        break;
      }
      const BestFitKey key = best_fit_key(pool, node, states[n], task);
      if (chosen < 0 || key < best) {
        chosen = n;
        best = key;
      }
    }
    if (chosen < 0) {
      return std::unexpected(Unplaceable{fmt::format(
          "{} of {} tasks fit ({}); task {} fits no node: {}", t, request.task_count,
          describe(task, pool.models()), t + 1,
          t == 0 ? explain_unplaceable(pool, task) : "the gang's earlier tasks took the room")});
    }
    const NodeId node{static_cast<std::uint32_t>(chosen)};
    const NodeSpec& spec = pool.spec(node);
    const GpuSet gpus = task_gpus_on_node(spec, states[chosen], task, rule);
    take(states[chosen], spec, task, gpus);
    placement.assignments.push_back({node, gpus});
  }
  placement.span = gang_span(pool, placement.assignments);
  return placement;
}

}  // namespace tidepool
