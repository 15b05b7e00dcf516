// Where a task asking for a MIG instance goes in a pool (core/mig.h has the profiles and the
// packing rule on a set of GPUs).
//
// pack: of the GPUs that may take the instance now (Pool::mig_usable) on nodes where the task
// fits, the one where it takes least from what the GPU could still hold (mig_choice: for each
// profile from the largest down, how many fewer instances of it), so that large profiles stay
// possible; then the pool's tie rank, then the lower GPU. A wholly free on-demand GPU loses the
// most, so an instance goes to a GPU already partitioned when one has room.
// first fit: the first node in pool order, its lowest GPU, the lowest start (the baseline).
//
// Both read the pool and change nothing; the answer is an Assignment Pool::allocate accepts.
// Cost: O(nodes) node checks, then O(GPUs x starts) on the nodes where the task fits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/gang_placement.h"
#include "core/mig.h"
#include "core/pool.h"

namespace tidepool {

// pack's choice on one node, with what the chosen GPU loses; nullopt when the task (a MIG task)
// does not fit the node.
struct MigNodeChoice {
  MigRoom lost{};
  Assignment where;
};
[[nodiscard]] std::optional<MigNodeChoice> mig_choice_on_node(const Pool& pool, NodeId node,
                                                              const TaskShape& task);

// On the nodes n with allowed_nodes[n] != 0 only (empty: all nodes).
[[nodiscard]] std::optional<Assignment> pack_mig_task(
    const Pool& pool, const TaskShape& task, std::span<const std::uint8_t> allowed_nodes = {});
[[nodiscard]] std::optional<Assignment> first_fit_mig_task(
    const Pool& pool, const TaskShape& task, std::span<const std::uint8_t> allowed_nodes = {});

// How every gang placement entry point answers a (valid) gang of one MIG task: pack (or first
// fit), with the reason when no GPU has room.
enum class MigRule : std::uint8_t { kPack, kFirstFit };
GangResult place_mig_gang(const Pool& pool, const GangRequest& request,
                          std::span<const std::uint8_t> allowed_nodes = {},
                          MigRule rule = MigRule::kPack);

}  // namespace tidepool
