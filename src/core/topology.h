// The shape of a pool's network: site > spine switch > leaf switch > node > NVLink domain > GPU.
// Nodes name their leaf; leaves name their spine; GPUs of a node are grouped into NVLink domains
// (NodeSpec::nvlink_domain). A pool without a known topology has one spine and one leaf.
#pragma once

#include <string>
#include <vector>

#include "core/ids.h"

namespace tidepool {

struct SpineSpec {
  std::string name;
};

struct LeafSpec {
  std::string name;
  SpineId spine;
};

struct Topology {
  std::string site = "default";
  std::vector<SpineSpec> spines;
  std::vector<LeafSpec> leaves;

  // One spine with one leaf: the topology of a pool described only by a node list.
  static Topology single_leaf(std::string site = "default");
};

}  // namespace tidepool
