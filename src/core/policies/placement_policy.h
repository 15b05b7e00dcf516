// Placement policies: given the pool (read only) and one task, choose a node and GPUs for it.
// A policy's decision depends only on the pool, the task and the injected random generator;
// policies may memoise per-node computations (keyed by Pool::version), which never changes the
// decision. A policy object serves one pool: make one per pool.
#pragma once

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/fragmentation.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/task.h"

namespace tidepool {

// The normal answer "this task fits nowhere now", with the reason a user would be shown.
struct Unplaceable {
  std::string reason;
};

using PlacementResult = std::expected<Assignment, Unplaceable>;

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Chooses where `task` goes. The assignment is valid for Pool::allocate as the pool is now.
  virtual PlacementResult place(const Pool& pool, const TaskShape& task, Rng& rng) = 0;
  // Whether the policy answers place_among; if not, a caller that must keep to some nodes places
  // on a copy of the pool with the other nodes cordoned.
  [[nodiscard]] virtual bool places_among() const { return false; }
  // Where place() would put `task` on a copy of `pool` with every node n where allowed[n] == 0
  // cordoned (one flag per node), found on `pool` itself: no copy, and an index that follows
  // `pool` serves it. nullopt when the task fits none of the allowed nodes. Only where
  // places_among(); such a policy draws nothing from its random generator.
  virtual std::optional<Assignment> place_among(const Pool& /*pool*/, const TaskShape& /*task*/,
                                                std::span<const std::uint8_t> /*allowed*/) {
    return std::nullopt;
  }
};

struct PolicyInfo {
  std::string_view name;     // as given on the command line, e.g. "fgd"
  std::string_view label;    // as in the FGD results' sc_policy column, e.g. "06-FGD"
  std::string_view summary;  // one line for help texts
};

// Every policy, in label order: the six baselines of the FGD paper, then Tidepool's own.
std::span<const PolicyInfo> placement_policies();

// Finds a policy by name or label, case-insensitively.
Result<PolicyInfo> find_placement_policy(std::string_view name_or_label);

// Builds a policy. `profile` is the workload's task-shape distribution (used by the
// fragmentation-aware policies; copied).
Result<std::unique_ptr<PlacementPolicy>> make_placement_policy(std::string_view name_or_label,
                                                               const WorkloadProfile& profile);

}  // namespace tidepool
