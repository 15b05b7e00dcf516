#include "core/topology.h"

#include <utility>

namespace tidepool {

Topology Topology::single_leaf(std::string site) {
  Topology topology;
  topology.site = std::move(site);
  topology.spines.push_back(SpineSpec{.name = "spine-0"});
  topology.leaves.push_back({"leaf-0", SpineId{0}});
  return topology;
}

}  // namespace tidepool
