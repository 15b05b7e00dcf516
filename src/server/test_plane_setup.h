// The control plane's setup that the server's unit tests share: the example cluster, tenants
// vision (every H100 guaranteed) and search (none), nodes that take jobs without agents.
// Header only; tests only.
#pragma once

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

#include "config/cluster_file.h"
#include "config/tenants_file.h"
#include "config/test_source_dir.h"
#include "server/plane_state.h"

namespace tidepool::test_support {

inline ControlPlaneSetup example_setup(std::string_view policy = "tidepool") {
  ControlPlaneSetup setup;
  auto cluster = load_cluster_yaml(test_support::test_source_dir() + "/data/clusters/example.yaml");
  EXPECT_TRUE(cluster.has_value());
  setup.cluster = std::move(*cluster);
  // vision may use every H100 (128) on its own; search has no guarantee.
  auto tenants = read_tenants_yaml(R"(orgs:
  - name: lab
    tenants:
      - name: vision
        quota:
          H100: {guaranteed_gpus: 128}
        queues: [default, detection]
      - name: search
)",
                                   "tenants.yaml", setup.cluster.models);
  EXPECT_TRUE(tenants.has_value());
  setup.tenants = std::move(*tenants);
  setup.scheduler = *scheduler_policy(policy);
  // Most tests drive the plane without agents; AJobWaitsForANodeWhoseAgentRegistered does not.
  setup.simulate_unregistered_nodes = true;
  return setup;
}

}  // namespace tidepool::test_support
