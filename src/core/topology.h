// The shape of a pool's network: site > spine switch > leaf switch > node > NVLink domain > GPU.
// Nodes name their leaf; leaves name their spine; GPUs of a node are grouped into NVLink domains
// (NodeSpec::nvlink_domain). A pool without a known topology has one spine and one leaf.
//
// The topology also carries the figures of its links, for the communication model: bandwidths
// in whole Gbit/s (10^9 bit/s, one direction) and each spine's oversubscription as an integer
// ratio N:1. Every figure has a default, so a topology described only by its tree is complete.
#pragma once

#include <string>
#include <vector>

#include "core/ids.h"

namespace tidepool {

// Bounds that readers enforce on link figures (Pool::create does not check them): bandwidths are
// 1..kMaxLinkGbps, oversubscription 1..kMaxOversubscription.
inline constexpr int kMaxLinkGbps = 1'000'000;
inline constexpr int kMaxOversubscription = 64;

struct SpineSpec {
  std::string name;
  // The leaf-to-spine links under this spine are oversubscribed N:1 (2 for 2:1): when every node
  // sends across the spine at once, each gets LinkSpeeds::spine_gbps / oversubscription. At
  // least 1 (1 means no oversubscription).
  int oversubscription = 1;
};

struct LeafSpec {
  std::string name;
  SpineId spine;
};

// A site's link bandwidths, in Gbit/s, all positive. Defaults are those of a current 8-GPU
// server with one 200 Gbit/s NIC per node.
struct LinkSpeeds {
  // Per GPU, between GPUs of one NVLink domain.
  int nvlink_gbps = 2400;
  // Per GPU, between GPUs of one node in different NVLink domains (over PCIe and the host).
  int pcie_gbps = 256;
  // Per node, its NIC to its leaf switch: between nodes of one leaf.
  int leaf_gbps = 200;
  // Per node, its share of the leaf-to-spine uplinks before oversubscription: between nodes of
  // different leaves (divide by SpineSpec::oversubscription for the share under full load).
  int spine_gbps = 200;
};

struct Topology {
  std::string site = "default";
  std::vector<SpineSpec> spines;
  std::vector<LeafSpec> leaves;
  LinkSpeeds links;

  // One spine with one leaf: the topology of a pool described only by a node list.
  static Topology single_leaf(std::string site = "default");
};

}  // namespace tidepool
