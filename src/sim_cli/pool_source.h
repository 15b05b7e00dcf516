// Where a command's pool comes from: an openb node list (--nodes, no topology) or a cluster file
// with its topology (--cluster). Shared by the sim commands.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "config/cluster_file.h"
#include "core/error.h"

namespace tidepool {

struct PoolSource {
  std::string nodes;    // openb node list
  std::string cluster;  // YAML cluster file
};

// Adds --nodes and --cluster to `command`; they exclude each other, and load_pool_source fails
// if neither is given.
void add_pool_options(CLI::App& command, PoolSource& source);

// Reads the pool's nodes, models and topology from whichever option was given.
Result<ClusterSpec> load_pool_source(const PoolSource& source);

}  // namespace tidepool
