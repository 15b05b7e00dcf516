// Building blocks shared by the placement policies: the scan over feasible nodes with a total
// choice among equal scores, and the usual ways to pick GPUs within a node.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "core/node.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/task.h"

namespace tidepool {

// Returns the feasible node with the highest score(NodeId) (any totally ordered value: an integer
// or a tuple of them, higher is better). Equal scores go to the node of lowest Pool::tie_rank, so
// the choice is a total order: the same pool and task give the same node. With `allowed` (one
// flag per node), only among the nodes n with allowed[n] != 0.
template <class ScoreFn>
std::optional<NodeId> pick_highest_score(const Pool& pool, const TaskShape& task, ScoreFn&& score,
                                         std::span<const std::uint8_t> allowed = {}) {
  using Score = std::decay_t<decltype(score(NodeId{}))>;
  std::optional<NodeId> chosen;
  Score best{};
  std::uint32_t best_rank = 0;
  const auto specs = pool.specs();
  const auto states = pool.states();
  for (std::uint32_t i = 0; i < specs.size(); ++i) {
    if (!allowed.empty() && allowed[i] == 0) continue;
    if (!fits(specs[i], states[i], task)) continue;
    const NodeId node{i};
    const Score s = score(node);
    const std::uint32_t rank = pool.tie_rank(node);
    if (!chosen || s > best || (s == best && rank < best_rank)) {
      chosen = node;
      best = s;
      best_rank = rank;
    }
  }
  return chosen;
}

// A node drawn uniformly among those where `task` fits. `scratch` is reused storage.
std::optional<NodeId> pick_random_fit(const Pool& pool, const TaskShape& task, Rng& rng,
                                      std::vector<NodeId>& scratch);

[[nodiscard]] inline GpuSet single_gpu(int index) { return GpuSet{1} << index; }

// The `count` lowest-indexed wholly free GPUs; 0 if there are fewer.
GpuSet lowest_whole_free_gpus(const NodeSpec& spec, const NodeState& state, int count);

// The GPU whose free share is the smallest that still holds `share` (lowest index on ties), or
// -1 if none does.
int tightest_gpu(const NodeSpec& spec, const NodeState& state, MilliGpu share);

// A GPU drawn uniformly among those with `share` free, or -1 if none.
int random_gpu_with_share(const NodeSpec& spec, const NodeState& state, MilliGpu share, Rng& rng);

// Best-fit GPU choice: the tightest GPU for a fraction, the lowest wholly free GPUs otherwise,
// none for a CPU-only task. The task must fit the node.
GpuSet best_fit_gpus(const NodeSpec& spec, const NodeState& state, const TaskShape& task);

// Takes `task`'s CPU, memory and per-GPU shares on `gpus` off `state` (summary fields are
// left stale: callers that need them call refresh_summary).
void subtract_task(NodeState& state, const TaskShape& task, GpuSet gpus);

}  // namespace tidepool
