// What the placement and scheduler benchmarks share: failing loudly on an unexpected error, and
// the synthetic pool they run on.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/node.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/topology.h"

namespace tidepool::bench_support {

// A benchmark's fixture cannot go on: says why on stderr and aborts.
[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "benchmark fixture: %s\n", what.c_str());
  std::abort();
}

template <class T>
T take(Result<T> result, const char* what) {
  if (!result) die(std::string(what) + ": " + result.error().message());
  return std::move(*result);
}

inline constexpr int kGpusPerNode = 8;
inline constexpr int kNodesPerLeaf = 32;
inline constexpr int kSpines = 8;
inline constexpr std::uint64_t kPoolSeed = 7;

// `node_count` nodes of 8 GPUs: 60% H100, 30% A100, 10% T4 (with `t4_domains`, two NVLink domains
// of 4 on a T4 node), 96-128 cores, 1-2 TiB memory; 32 nodes per leaf switch, the leaves spread
// over 8 spine switches. The same for a node count and seed, run after run.
inline Pool make_synthetic_pool(int node_count, bool t4_domains) {
  GpuModelCatalog models;
  const GpuModelId h100 = take(models.intern("H100"), "model");
  const GpuModelId a100 = take(models.intern("A100"), "model");
  const GpuModelId t4 = take(models.intern("T4"), "model");
  Topology topology;
  topology.site = "bench";
  for (int s = 0; s < kSpines; ++s) topology.spines.push_back({"spine-" + std::to_string(s)});
  const int leaves = (node_count + kNodesPerLeaf - 1) / kNodesPerLeaf;
  for (int l = 0; l < leaves; ++l) {
    topology.leaves.push_back(
        {"leaf-" + std::to_string(l), SpineId{static_cast<std::uint32_t>(l * kSpines / leaves)}});
  }
  Rng rng(kPoolSeed);
  std::vector<NodeSpec> nodes(static_cast<std::size_t>(node_count));
  for (int i = 0; i < node_count; ++i) {
    NodeSpec& node = nodes[static_cast<std::size_t>(i)];
    node.name = "node-" + std::to_string(i);
    const std::uint64_t kind = rng.below(10);
    node.model = kind < 6 ? h100 : kind < 9 ? a100 : t4;
    node.gpu_count = kGpusPerNode;
    node.milli_cpu = (96 + 16 * static_cast<MilliCpu>(rng.below(3))) * 1000;
    node.memory_mib = (1024 + 512 * static_cast<MemoryMib>(rng.below(3))) * 1024;
    node.leaf = LeafId{static_cast<std::uint32_t>(i / kNodesPerLeaf)};
    if (t4_domains && node.model == t4) {
      for (int g = 4; g < kGpusPerNode; ++g) node.nvlink_domain[g] = 1;
    }
  }
  return take(Pool::create(std::move(models), std::move(topology), std::move(nodes)), "pool");
}

}  // namespace tidepool::bench_support
