// The cluster file: a pool's hardware as a YAML topology tree, site > spine switch > leaf switch >
// node > NVLink domain > GPU. Reading it gives what Pool::create takes.
//
// Example (data/clusters/example.yaml is a complete one):
//
//   site: dc-west
//   links: {nvlink_gbps: 2400, pcie_gbps: 256, leaf_gbps: 200, spine_gbps: 200}  # optional
//   spines:
//     - name: spine-1
//       oversubscription: 2    # optional: 2:1 (default 1)
//       leaves:
//         - name: leaf-1
//           nodes:
//             - name: h100-a       # with count: N, named h100-a-01 .. h100-a-NN
//               count: 4
//               gpu_model: H100
//               gpus: 8
//               cpu_millicores: 96000               # or cpus: 96 (up to 3 decimals: 95.5)
//               memory_mib: 1048576                 # or memory_gib: 1024
//               nvlink_domains: [[0,1,2,3],[4,5,6,7]]
//             - name: cpu-1          # a node without GPUs: gpus: 0 and no gpu_model
//               gpus: 0
//               cpus: 64
//               memory_gib: 512
//
// Keys:
//   site             required, non-empty.
//   links            optional map of the site's link bandwidths in whole Gbit/s, each key
//                    optional and 1..kMaxLinkGbps (defaults in parentheses; see LinkSpeeds in
//                    core/topology.h): nvlink_gbps (2400, per GPU inside an NVLink domain),
//                    pcie_gbps (256, per GPU between domains of a node), leaf_gbps (200, a
//                    node's NIC to its leaf), spine_gbps (200, a node's share of the leaf-to-spine
//                    uplinks before oversubscription).
//   spines           required; each spine has `name` (unique) and `leaves`, and optionally
//                    `oversubscription`: N for N:1, an integer 1..kMaxOversubscription (default 1).
//   leaves           each leaf has `name` (unique in the site) and `nodes` (may be empty).
//   nodes[].name     required, non-empty. Node names are unique in the site.
//   nodes[].count    optional, 1..kMaxClusterNodes (default 1). With a count, the entry stands for
//                    that many identical nodes named <name>-<i>, i = 1..count zero-padded to the
//                    digits of count, at least two ("-01"); count: 1 also takes the suffix.
//   nodes[].gpus     required, 0..kMaxGpusPerNode.
//   nodes[].gpu_model  required when gpus > 0, not allowed when gpus is 0. Model ids are given in
//                    order of first appearance in the file.
//   nodes[].cpu_millicores | cpus      exactly one of the two; not negative.
//   nodes[].memory_mib | memory_gib    exactly one of the two (integers); not negative.
//   nodes[].nvlink_domains  optional: a list of GPU index lists; every GPU 0..gpus-1 in exactly
//                    one non-empty domain; domains are numbered in list order. Default: all the
//                    node's GPUs form one domain.
// Unknown or repeated keys are errors (a typo must not be ignored), and so are a file with more
// than one YAML document and a file without nodes.
//
// Errors: the Error's field is "<source>:<line>:<column> <path>", the path in the YAML tree of the
// bad value (e.g. "example.yaml:12:18 spines[0].leaves[1].nodes[2].gpus"), line and column
// 1-based; the reason says what is wrong ("must be 0..16, got 20"). Malformed YAML gives the
// position yaml-cpp reports. No exception escapes these functions. A ClusterSpec that reads
// without error is accepted by Pool::create.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/node.h"
#include "core/topology.h"

namespace tidepool {

// The most nodes one cluster file may describe (after count expansion).
inline constexpr int kMaxClusterNodes = 100'000;

// What Pool::create takes: Pool::create(std::move(spec.models), std::move(spec.topology),
// std::move(spec.nodes)). Nodes are in file order, spines and leaves too (SpineId / LeafId are
// their positions).
struct ClusterSpec {
  GpuModelCatalog models;
  Topology topology;
  std::vector<NodeSpec> nodes;
};

// Parses a cluster file's text; `source` names it in errors (a path, or e.g. "<stdin>").
Result<ClusterSpec> read_cluster_yaml(std::string_view text, const std::string& source);

// Reads and parses the file at `path`.
Result<ClusterSpec> load_cluster_yaml(const std::string& path);

}  // namespace tidepool
