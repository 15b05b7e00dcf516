// Where an inference service's next replica goes. A replica is one task, placed on its own (never
// with the others as a gang); a service spreads its replicas so that one node or one leaf going
// down takes few of them.
//
// The rule: among the nodes where the replica fits now and that hold fewer than `max_per_node`
// of the service's replicas (0: no limit), those with the fewest of them in the spread domain
// (the node itself for kNode, its leaf for kLeaf); among those, best fit (the fewest whole GPUs
// left after it, then the least CPU, then the pool's tie rank), so that replicas pack onto
// partly used nodes rather than opening whole ones (for a MIG instance: the packing of
// core/mig_placement.h, then the tie rank). Hence, with kNode, no node gets a second
// replica while a node without one has room, and with kLeaf no leaf while another leaf without
// one has room.
//
// Reads the pool, changes nothing: the answer is an Assignment that Pool::allocate accepts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/error.h"
#include "core/pool.h"

namespace tidepool {

enum class SpreadLevel : std::uint8_t { kNode, kLeaf };
// "node", "leaf"
[[nodiscard]] std::string_view spread_level_name(SpreadLevel level);
[[nodiscard]] Result<SpreadLevel> parse_spread_level(std::string_view name);

struct ReplicaSpread {
  SpreadLevel level = SpreadLevel::kNode;
  int max_per_node = 0;  // 0: no limit
};

// The place of the next replica of a service whose replicas run on `replicas` (a node once per
// replica), or nullopt when it fits nowhere allowed.
[[nodiscard]] std::optional<Assignment> place_replica(const Pool& pool, const TaskShape& replica,
                                                      std::span<const NodeId> replicas,
                                                      const ReplicaSpread& spread);

}  // namespace tidepool
