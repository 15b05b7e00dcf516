// Typed identifiers: a NodeId cannot be passed where a GpuModelId is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace tidepool {

template <class Tag>
struct Id {
  std::uint32_t value = 0;

  friend constexpr auto operator<=>(Id, Id) = default;
};

using NodeId = Id<struct NodeTag>;
using GpuModelId = Id<struct GpuModelTag>;
using LeafId = Id<struct LeafTag>;
using SpineId = Id<struct SpineTag>;
using OrgId = Id<struct OrgTag>;
using TenantId = Id<struct TenantTag>;
using QueueId = Id<struct QueueTag>;
using JobId = Id<struct JobTag>;

}  // namespace tidepool

template <class Tag>
struct std::hash<tidepool::Id<Tag>> {
  std::size_t operator()(tidepool::Id<Tag> id) const noexcept {
    return std::hash<std::uint32_t>{}(id.value);
  }
};
