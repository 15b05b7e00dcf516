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

// A market for the example cluster with a flat price: the cost base whatever the utilisation and
// time, prices set every hour; vision has a quarterly budget.
inline constexpr std::string_view kExampleMarketYaml = R"(currency: USD
models:
  H100: {purchase_price: 30000, power_watts: 1000, electricity_per_kwh: 0.12,
         operations_per_year: 3000}
  A100: {purchase_price: 15000, power_watts: 500, electricity_per_kwh: 0.12,
         operations_per_year: 2000}
prices: {period: 1h, utilisation_curve: [[0, 1], [1, 1]]}
budgets:
  vision: {quarterly: 30, soft_alert: 0.5}
)";

// Bursting, to follow kExampleMarketYaml: one provider (its hook a path that need not exist) with
// one offer of H100s.
inline constexpr std::string_view kExampleBurstYaml = R"(
burst:
  threshold: 10m
  providers:
    - name: cloud
      hook: /opt/tidepool/rent-cloud
      offers:
        - {name: cloud-h100, model: H100, price_per_gpu_hour: 4, startup_delay: 5m, max_gpus: 64}
)";

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
