// Pools, GPU model catalogs and tenant books for tests, and the ids the tests know their models and
// tenants by (header only; not part of the core library).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pool.h"
#include "core/tenants.h"

namespace tidepool::test_support {

// GPU models by id in the catalogs below: model 0 is H100 (one_model_catalog("H100"),
// h100_and_a100_catalog()) or T4 (t4_and_a100_catalog()); model 1 is A100.
inline constexpr GpuModelId kH100{0};
inline constexpr GpuModelId kT4{0};
inline constexpr GpuModelId kA100{1};

// Tenants by id, in the order of their book: two_tenant_book's A and B are kA and kB.
inline constexpr TenantId kA{0};
inline constexpr TenantId kB{1};
inline constexpr TenantId kC{2};
inline constexpr TenantId kD{3};

// A catalog that knows one model, `name`, as model 0.
inline GpuModelCatalog one_model_catalog(const std::string& name) {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern(name).has_value());
  return models;
}

// H100 (model 0) and A100 (model 1).
inline GpuModelCatalog h100_and_a100_catalog() {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern("H100").has_value());
  EXPECT_TRUE(models.intern("A100").has_value());
  return models;
}

// T4 (model 0) and A100 (model 1).
inline GpuModelCatalog t4_and_a100_catalog() {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern("T4").has_value());
  EXPECT_TRUE(models.intern("A100").has_value());
  return models;
}

// A node of `gpus` GPUs of `model` with `milli_cpu` and 256 GiB of memory, for single_leaf_pool.
inline NodeSpec model_node(std::string name, int gpus, MilliCpu milli_cpu, GpuModelId model) {
  NodeSpec spec;
  spec.name = std::move(name);
  spec.model = model;
  spec.gpu_count = gpus;
  spec.milli_cpu = milli_cpu;
  spec.memory_mib = 262144;
  return spec;
}

// A pool of `nodes` (models of t4_and_a100_catalog()) under one leaf switch.
inline Pool single_leaf_pool(std::vector<NodeSpec> nodes) {
  auto pool = Pool::create(t4_and_a100_catalog(), Topology::single_leaf(), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

struct TestPoolShape {
  std::string model = "H100";  // every node's GPUs, model 0 of the pool's catalog
  // One entry per spine switch: its oversubscription.
  std::vector<int> spine_oversubscription = {1};
  int leaves_per_spine = 1;
  int nodes_per_leaf = 2;
  int gpus = 8;
  int domains = 1;  // NVLink domains per node, equal in size
};

// Spine s holds leaves s * leaves_per_spine .. ; leaf l holds nodes l * nodes_per_leaf .. ; nodes
// are named "n<i>", leaves "leaf-<l>", spines "spine-<s>"; 64 cores and 512 GiB per node.
inline Pool make_test_pool(const TestPoolShape& shape = {}) {
  Topology topology;
  for (std::size_t s = 0; s < shape.spine_oversubscription.size(); ++s) {
    topology.spines.push_back({"spine-" + std::to_string(s), shape.spine_oversubscription[s]});
    for (int l = 0; l < shape.leaves_per_spine; ++l) {
      topology.leaves.push_back({"leaf-" + std::to_string(topology.leaves.size()),
                                 SpineId{static_cast<std::uint32_t>(s)}});
    }
  }
  std::vector<NodeSpec> nodes;
  for (std::uint32_t l = 0; l < topology.leaves.size(); ++l) {
    for (int i = 0; i < shape.nodes_per_leaf; ++i) {
      NodeSpec spec;
      spec.name = "n" + std::to_string(nodes.size());
      spec.model = GpuModelId{0};
      spec.gpu_count = shape.gpus;
      spec.milli_cpu = 64000;
      spec.memory_mib = 524288;
      spec.leaf = LeafId{l};
      for (int g = 0; g < shape.gpus; ++g) {
        spec.nvlink_domain[g] = static_cast<std::uint8_t>(g / (shape.gpus / shape.domains));
      }
      nodes.push_back(std::move(spec));
    }
  }
  auto pool = Pool::create(one_model_catalog(shape.model), std::move(topology), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

// Four nodes of 8 GPUs, 64 cores and 512 GiB: n0 and n2 of H100 (model 0), n1 and n3 of A100
// (model 1); n0 and n1 under leaf-0, n2 and n3 under leaf-1, one spine.
inline Pool make_two_model_pool() {
  GpuModelCatalog models = h100_and_a100_catalog();
  Topology topology;
  topology.spines.push_back({"spine-0", 1});
  topology.leaves.push_back({"leaf-0", SpineId{0}});
  topology.leaves.push_back({"leaf-1", SpineId{0}});
  std::vector<NodeSpec> nodes;
  for (std::uint32_t i = 0; i < 4; ++i) {
    NodeSpec spec;
    spec.name = "n" + std::to_string(i);
    spec.model = GpuModelId{i % 2};
    spec.gpu_count = 8;
    spec.milli_cpu = 64000;
    spec.memory_mib = 524288;
    spec.leaf = LeafId{i / 2};
    nodes.push_back(std::move(spec));
  }
  auto pool = Pool::create(std::move(models), std::move(topology), std::move(nodes));
  EXPECT_TRUE(pool.has_value()) << pool.error().message();
  return std::move(pool).value();
}

// Tenants "A" (id 0) and "B" (id 1) in one org, each guaranteed `guarantee_gpus` GPUs of model 0
// of `models`; B's borrowing limit is `b_borrowing_gpus` (absent: unlimited).
inline TenantBook two_tenant_book(const GpuModelCatalog& models, std::int64_t guarantee_gpus,
                                  std::optional<std::int64_t> b_borrowing_gpus = std::nullopt) {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (const std::string name : {"A", "B"}) {
    TenantSpec t;
    t.name = name;
    std::optional<std::int64_t> borrowing;
    if (name == "B" && b_borrowing_gpus) borrowing = *b_borrowing_gpus * kMilliPerGpu;
    t.quotas.push_back({GpuModelId{0}, guarantee_gpus * kMilliPerGpu, borrowing, std::nullopt});
    org.tenants.push_back(std::move(t));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), models);
  EXPECT_TRUE(book.has_value()) << book.error().message();
  return std::move(book).value();
}

}  // namespace tidepool::test_support
