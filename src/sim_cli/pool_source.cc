#include "sim_cli/pool_source.h"

#include "core/topology.h"
#include "sim/openb_trace.h"

namespace tidepool {

void add_pool_options(CLI::App& command, PoolSource& source) {
  CLI::Option* nodes =
      command
          .add_option("--nodes", source.nodes,
                      "GPU node list (openb format: sn,cpu_milli,memory_mib,gpu,model); each node "
                      "is one NVLink domain under a single leaf switch")
          ->check(CLI::ExistingFile);
  CLI::Option* cluster =
      command
          .add_option("--cluster", source.cluster,
                      "cluster file (YAML: site > spines > leaves > nodes, with GPU models and "
                      "NVLink domains); instead of --nodes")
          ->check(CLI::ExistingFile);
  nodes->excludes(cluster);
  cluster->excludes(nodes);
}

Result<ClusterSpec> load_pool_source(const PoolSource& source) {
  if (!source.cluster.empty()) return load_cluster_yaml(source.cluster);
  if (source.nodes.empty()) return fail("--nodes", "give the pool with --nodes or --cluster");
  ClusterSpec spec;
  auto nodes = load_openb_nodes(source.nodes, spec.models);
  if (!nodes) return std::unexpected(nodes.error());
  spec.nodes = std::move(*nodes);
  spec.topology = Topology::single_leaf();
  return spec;
}

}  // namespace tidepool
