// Gang placement without topology, as the baselines place work: each task in turn goes to one
// node, chosen by a node-local rule, and the gang is placed all-or-nothing.
//
//   first fit (a plain Slurm partition): the first node in pool order (NodeId) that fits the
//     task now; a task's GPUs are the node's lowest-index whole free GPUs.
//   best fit (Kueue's default packing in our baselines): the fitting node with the fewest whole
//     free GPUs left after the task (then the least free CPU, then Pool::tie_rank), so nodes fill
//     up before others are opened; lowest-index GPUs.
//
// Tasks of one gang may share a node. Earlier tasks' choices are seen by later ones. Neither rule
// looks at NVLink domains, leaves or spines; the topology requirement of the request is ignored
// (baselines do not know it). A single task with a GPU fraction goes to the node with the
// fitting GPU of least free share (best fit) or the first fitting GPU (first fit).
//
// Both read the pool and change nothing; the answer is a GangPlacement (with its span) that
// Pool::allocate accepts in order, or an Unplaceable reason with numbers. Cost: O(nodes x tasks).
#pragma once

#include <tuple>

#include "core/gang_placement.h"
#include "core/pool.h"

namespace tidepool {

enum class NodeRule : std::uint8_t { kFirstFit, kBestFit };

GangResult place_gang_by_node_rule(const Pool& pool, const GangRequest& request, NodeRule rule);

// The GPUs `task` takes on a node (`state`: what is free there) where it fits: for a fraction the
// GPU of least free share that holds it (best fit) or the first (first fit); otherwise the
// lowest-index whole free GPUs; none for a CPU-only task.
[[nodiscard]] GpuSet task_gpus_on_node(const NodeSpec& spec, const NodeState& state,
                                       const TaskShape& task, NodeRule rule);

// Best fit's order of the nodes where `task` fits, the least first: the whole free GPUs left
// after it, then the free CPU left, then the pool's tie rank.
using BestFitKey = std::tuple<int, MilliCpu, std::uint32_t>;
[[nodiscard]] BestFitKey best_fit_key(const Pool& pool, NodeId node, const NodeState& state,
                                      const TaskShape& task);

}  // namespace tidepool
