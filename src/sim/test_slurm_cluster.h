// The cluster the shadow-mode tests observe: two nodes of 4 GPUs of one model, named as the
// test Slurm cluster names them (tp1, tp2), under one leaf (header only; for tests).
#pragma once

#include <cstdint>

#include "config/cluster_file.h"
#include "core/topology.h"

namespace tidepool::test_support {

inline ClusterSpec two_slurm_nodes(std::int64_t milli_cpu, std::int64_t memory_mib = 0) {
  ClusterSpec spec;
  const GpuModelId gpu = spec.models.intern("GPU").value();
  for (const char* name : {"tp1", "tp2"}) {
    NodeSpec node;
    node.name = name;
    node.model = gpu;
    node.gpu_count = 4;
    node.milli_cpu = milli_cpu;
    node.memory_mib = memory_mib;
    spec.nodes.push_back(node);
  }
  spec.topology = Topology::single_leaf();
  return spec;
}

}  // namespace tidepool::test_support
