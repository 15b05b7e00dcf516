// Gang placement: all-or-nothing placement of N tasks that each need G whole GPUs on one node,
// kept as close together in the network as the pool allows.
//
// Contract
//   place_gang() reads the pool and never changes it. It returns either one Assignment per task
//   (tasks may share a node that has room for several) that Pool::allocate accepts when applied
//   in order to the pool as it is now, or an Unplaceable reason naming the level that binds, with
//   numbers ("no leaf switch with 16 free H100 GPUs for 2 tasks x 8 GPUs; best has 12 (room for 1
//   task)", "needs 4 GPUs in one NVLink domain; largest free domain has 2"). Nothing is ever
//   partly placed. The same pool and request give the same answer.
//
// Topology requirement
//   A level (nvlink, node, leaf, spine) and a strength (required, preferred).
//   - required node / leaf / spine: every task on one node / under one leaf switch / under one
//     spine switch (one node implies one leaf and one spine, one leaf implies one spine);
//   - required nvlink: each task's GPUs lie in one NVLink domain of its node (tasks of a gang may
//     use different domains and nodes);
//   - preferred: no limit. The objective below already makes every level as compact as the pool
//     allows, so a preferred level is met whenever some placement meets it.
//
// Objective (lexicographic, smaller first)
//   1. spine switches spanned, 2. leaf switches, 3. nodes, 4. tasks split over several NVLink
//   domains, 5. NVLink domains;
//   then, to keep large free blocks whole for later gangs (HiveD's buddy cells, KAI's
//   consolidation): 6. whole free GPUs (any model) left in the leaves used, 7. whole free GPUs
//   left on the nodes used; 8. the nodes' Pool::tie_rank (with the GPU sets), so the order is
//   total.
//   Outer levels come first because a ring all-reduce runs at the speed of the slowest link it
//   crosses: one more NVLink domain inside a leaf costs less than leaving the leaf.
//
// Search (greedy, exact for feasibility at each level)
//   A node's room is how many tasks it can host: whole free GPUs / G (with nvlink required: the
//   sum over domains of the domain's whole free GPUs / G), bounded by free CPU and memory, for
//   nodes whose GPU model the task accepts. If some node has room for the whole gang, every such
//   node is a candidate; otherwise every leaf with room, otherwise every spine, otherwise the
//   pool. A leaf (spine, pool) is filled by choosing its nodes (leaves, spines) greedily: while no
//   single unit holds what is left, the unit with the most room (fewest whole free GPUs on ties);
//   then the best-fitting unit that holds the rest (fewest whole free GPUs). This uses the fewest
//   units at each level. Within a node each task takes the NVLink domain with the fewest whole
//   free GPUs that still hold it, lowest-index GPUs first; a task that fits no single domain
//   (nvlink not required) takes GPUs from the domains with most free GPUs first.
//   Candidates are compared by the objective. Cost: O(nodes x N) per call.
//
// Tasks without GPUs (G == 0) are placed the same way by CPU and memory (they span no domain). A
// single task with a GPU fraction is delegated to a PlacementPolicy (see the overload below).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/policies/placement_policy.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/task.h"

namespace tidepool {

enum class TopologyLevel : std::uint8_t { kNvlink, kNode, kLeaf, kSpine };
enum class TopologyStrength : std::uint8_t { kRequired, kPreferred };

// "nvlink", "node", "leaf", "spine"
std::string_view topology_level_name(TopologyLevel level);

struct TopologyRequirement {
  TopologyLevel level = TopologyLevel::kSpine;
  TopologyStrength strength = TopologyStrength::kPreferred;

  // Whether `at` is a hard limit: the required level, or an outer level implied by it (a required
  // node implies one leaf and one spine). A required nvlink implies nothing beyond the task.
  [[nodiscard]] bool requires_level(TopologyLevel at) const {
    if (strength != TopologyStrength::kRequired) return false;
    if (level == TopologyLevel::kNvlink) return at == TopologyLevel::kNvlink;
    return at >= level;
  }
};

struct GangRequest {
  int task_count = 1;  // N >= 1; exactly 1 for a fractional task
  TaskShape task;      // each task's shape: whole GPUs, no GPU, or (N == 1) a GPU fraction
  TopologyRequirement topology;
};

// How far a set of assignments reaches: distinct NVLink domains (node, domain) holding its GPUs,
// nodes, leaf switches and spine switches, and the tasks whose GPUs lie in more than one domain
// (a task larger than its node's domains always does).
struct GangSpan {
  int nvlink_domains = 0;
  int nodes = 0;
  int leaves = 0;
  int spines = 0;
  int split_tasks = 0;

  friend bool operator==(const GangSpan&, const GangSpan&) = default;
};

struct GangPlacement {
  std::vector<Assignment> assignments;  // one per task, in the order to allocate them
  GangSpan span;
};

using GangResult = std::expected<GangPlacement, Unplaceable>;

// Checks the request itself: N >= 1, a fractional task only alone, G within a node's bounds.
Result<void> validate_gang_request(const GangRequest& request);

// Places a gang of whole-GPU (or CPU-only) tasks as described above. A request that fails
// validation, or a fractional task (use the overload with a policy), is answered Unplaceable with
// the reason.
GangResult place_gang(const Pool& pool, const GangRequest& request);

// As above, on the nodes n with allowed_nodes[n] != 0 only (one flag per node of the pool; empty:
// all nodes). Callers use it to state a preference and retry on all nodes when it fails.
GangResult place_gang(const Pool& pool, const GangRequest& request,
                      std::span<const std::uint8_t> allowed_nodes);

// As above, except that a single fractional task goes to `fraction_policy` (which draws from
// `rng` if it is randomised); its topology requirement is met by any GPU.
GangResult place_gang(const Pool& pool, const GangRequest& request,
                      PlacementPolicy& fraction_policy, Rng& rng);

// A gang placed by `policy` wherever the objective above leaves a choice: the planner finds the
// most compact placement; then the policy places the tasks one by one (a single task anywhere,
// several on the nodes of the leaves the planner used), and its placement is taken when it is as
// compact as the planner's on levels 1-5 of the objective (so it meets the requirement too); the
// planner's otherwise. A single fractional task goes to the policy as in the overload above. So a
// policy (FGD's fragmentation, packing, ...) decides whole-GPU placements as well, never at the
// cost of compactness.
GangResult place_gang_by_policy(const Pool& pool, const GangRequest& request,
                                PlacementPolicy& policy, Rng& rng);
// As above, on the nodes n with allowed_nodes[n] != 0 only (empty: all nodes).
GangResult place_gang_by_policy(const Pool& pool, const GangRequest& request,
                                std::span<const std::uint8_t> allowed_nodes,
                                PlacementPolicy& policy, Rng& rng);

// The span of `assignments` on `pool` (see GangSpan); used by the communication model.
GangSpan gang_span(const Pool& pool, std::span<const Assignment> assignments);

}  // namespace tidepool
