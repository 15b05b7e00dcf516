#include "config/cluster_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "config/test_source_dir.h"
#include "core/pool.h"

namespace tidepool {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

const NodeSpec* find_node(const ClusterSpec& spec, std::string_view name) {
  for (const NodeSpec& node : spec.nodes) {
    if (node.name == name) return &node;
  }
  return nullptr;
}

// A one-node cluster whose node entry is `node_yaml` (indented as a list item under nodes:).
std::string one_leaf(const std::string& node_yaml) {
  return "site: s\n"
         "spines:\n"
         "  - name: sp\n"
         "    leaves:\n"
         "      - name: lf\n"
         "        nodes:\n" +
         node_yaml;
}

// The error for `text`, which must not parse.
Error cluster_error(const std::string& text) {
  auto spec = read_cluster_yaml(text, "test.yaml");
  EXPECT_FALSE(spec.has_value()) << text;
  return spec ? Error{} : spec.error();
}

TEST(ClusterFileTest, ReadsTheExampleFile) {
  auto spec = load_cluster_yaml(test_support::test_source_dir() + "/data/clusters/example.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->topology.site, "dc-west");
  ASSERT_EQ(spec->topology.spines.size(), 2U);
  ASSERT_EQ(spec->topology.leaves.size(), 4U);
  EXPECT_EQ(spec->topology.leaves[2].name, "leaf-3");
  EXPECT_EQ(spec->topology.leaves[2].spine, SpineId{1});
  ASSERT_EQ(spec->nodes.size(), 23U);
  ASSERT_EQ(spec->models.size(), 2);
  EXPECT_EQ(spec->models.name(GpuModelId{0}), "H100");
  EXPECT_EQ(spec->models.name(GpuModelId{1}), "A100");

  // Nodes in file order, named by count.
  EXPECT_EQ(spec->nodes.front().name, "h100-a-01");
  EXPECT_EQ(spec->nodes[3].name, "h100-a-04");
  EXPECT_EQ(spec->nodes.back().name, "cpu-login");

  const NodeSpec* h100 = find_node(*spec, "h100-b-02");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->leaf, LeafId{1});
  EXPECT_EQ(spec->topology.leaves[h100->leaf.value].spine, SpineId{0});
  EXPECT_EQ(h100->gpu_count, 8);
  EXPECT_EQ(h100->milli_cpu, 96000);         // cpus: 96
  EXPECT_EQ(h100->memory_mib, 1024 * 1024);  // memory_gib: 1024
  for (int g = 0; g < 8; ++g) EXPECT_EQ(h100->nvlink_domain[g], g < 4 ? 0 : 1) << g;

  const NodeSpec* a100 = find_node(*spec, "a100-b-03");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->leaf, LeafId{3});
  EXPECT_EQ(spec->topology.leaves[a100->leaf.value].spine, SpineId{1});
  EXPECT_EQ(a100->model, GpuModelId{1});
  for (int g = 0; g < 8; ++g) EXPECT_EQ(a100->nvlink_domain[g], 0) << g;

  const NodeSpec* cpu = find_node(*spec, "cpu-login");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->gpu_count, 0);
  EXPECT_EQ(cpu->milli_cpu, 64000);

  auto pool =
      Pool::create(std::move(spec->models), std::move(spec->topology), std::move(spec->nodes));
  ASSERT_TRUE(pool.has_value()) << pool.error().message();
  EXPECT_EQ(pool->node_count(), 23);
  EXPECT_EQ(pool->total_gpus(), 176);
}

TEST(ClusterFileTest, CountNamesArePaddedToTheDigitsOfTheCount) {
  auto spec = read_cluster_yaml(one_leaf("          - {name: n, count: 120, gpus: 0, cpus: 1, "
                                         "memory_mib: 1}\n"
                                         "          - {name: m, count: 1, gpus: 0, cpus: 1, "
                                         "memory_mib: 1}\n"),
                                "t.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  ASSERT_EQ(spec->nodes.size(), 121U);
  EXPECT_EQ(spec->nodes[0].name, "n-001");
  EXPECT_EQ(spec->nodes[9].name, "n-010");
  EXPECT_EQ(spec->nodes[119].name, "n-120");
  EXPECT_EQ(spec->nodes[120].name, "m-01");
}

TEST(ClusterFileTest, ReadsDecimalCoresAndExplicitUnits) {
  auto spec = read_cluster_yaml(
      one_leaf("          - {name: a, gpus: 2, gpu_model: T4, cpus: 95.5, memory_mib: 300,\n"
               "             nvlink_domains: [[1], [0]]}\n"
               "          - {name: b, gpus: 0, cpu_millicores: 1500, memory_gib: 2}\n"),
      "t.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->nodes[0].milli_cpu, 95500);
  EXPECT_EQ(spec->nodes[0].memory_mib, 300);
  EXPECT_EQ(spec->nodes[0].nvlink_domain[0], 1);
  EXPECT_EQ(spec->nodes[0].nvlink_domain[1], 0);
  EXPECT_EQ(spec->nodes[1].milli_cpu, 1500);
  EXPECT_EQ(spec->nodes[1].memory_mib, 2048);
}

TEST(ClusterFileTest, ErrorsNameThePathPositionAndReason) {
  const std::string text = one_leaf(
      "          - {name: a, gpus: 8, gpu_model: H100, cpus: 8, memory_gib: 8}\n"
      "          - name: b\n"
      "            gpus: 20\n"
      "            gpu_model: H100\n"
      "            cpus: 8\n"
      "            memory_gib: 8\n");
  const Error error = cluster_error(text);
  EXPECT_EQ(error.field, "test.yaml:9:19 spines[0].leaves[0].nodes[1].gpus");
  EXPECT_EQ(error.reason, "must be 0..16, got 20");
  EXPECT_EQ(error.message(),
            "test.yaml:9:19 spines[0].leaves[0].nodes[1].gpus: must be 0..16, got 20");
}

TEST(ClusterFileTest, RejectsUnknownAndRepeatedKeys) {
  Error error = cluster_error(
      one_leaf("          - {name: a, gpus: 1, gpu_model: T4, cpus: 1, memory_gib: 1, "
               "nvlink_domain: [[0]]}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].nvlink_domain"));
  EXPECT_THAT(error.reason, HasSubstr("unknown key"));
  EXPECT_THAT(error.reason, HasSubstr("nvlink_domains"));

  error = cluster_error("site: s\nsite: t\nspines: []\n");
  EXPECT_EQ(error.field, "test.yaml:2:1 site");
  EXPECT_EQ(error.reason, "the key is given twice");

  error = cluster_error("site: s\nspine: []\n");
  EXPECT_EQ(error.field, "test.yaml:2:1 spine");

  error = cluster_error("site: s\nspines:\n  - name: x\n    leafs: []\n");
  EXPECT_EQ(error.field, "test.yaml:4:5 spines[0].leafs");
}

TEST(ClusterFileTest, RejectsMissingAndConflictingFields) {
  EXPECT_EQ(cluster_error("spines: []\n").field, "test.yaml:1:1 site");
  EXPECT_THAT(cluster_error(one_leaf("          - {gpus: 0, cpus: 1, memory_mib: 1}\n")).field,
              EndsWith(" spines[0].leaves[0].nodes[0].name"));
  EXPECT_THAT(cluster_error(one_leaf("          - {name: a, cpus: 1, memory_mib: 1}\n")).field,
              EndsWith(" spines[0].leaves[0].nodes[0].gpus"));
  Error error = cluster_error(one_leaf("          - {name: a, gpus: 2, cpus: 1, memory_mib: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].gpu_model"));
  EXPECT_THAT(error.reason, HasSubstr("missing"));
  error = cluster_error(
      one_leaf("          - {name: a, gpus: 0, gpu_model: T4, cpus: 1, memory_mib: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].gpu_model"));
  error = cluster_error(one_leaf("          - {name: a, gpus: 0, memory_mib: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].cpu_millicores"));
  error = cluster_error(
      one_leaf("          - {name: a, gpus: 0, cpus: 1, cpu_millicores: 1000, memory_mib: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].cpus"));
  EXPECT_THAT(error.reason, HasSubstr("not both"));
  error = cluster_error(one_leaf("          - {name: a, gpus: 0, cpus: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[0].memory_mib"));
  error = cluster_error("site: s\nspines:\n  - name: sp\n    leaves:\n      - name: lf\n");
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes"));
}

TEST(ClusterFileTest, ReadsMigOnDemandAndPartitionedGpus) {
  auto spec = read_cluster_yaml(
      one_leaf("          - {name: od, gpus: 4, gpu_model: A100, cpus: 8, memory_gib: 64, "
               "mig: on_demand}\n"
               "          - {name: parts, gpus: 4, gpu_model: H100, cpus: 8, memory_gib: 64, "
               "mig: {0: [3g.40gb, 3g.40gb], 2: [1g.10gb@6, 2g.20gb]}}\n"),
      "test.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(find_node(*spec, "od")->mig_on_demand, GpuSet{0b1111});
  const NodeSpec& parts = *find_node(*spec, "parts");
  EXPECT_EQ(parts.mig_on_demand, GpuSet{0});
  ASSERT_EQ(parts.mig_partitions.size(), 2U);
  EXPECT_EQ(parts.mig_partitions[0].gpu, 0);
  // Without a start, packing places them: the high half first for a 3g.40gb.
  EXPECT_EQ(parts.mig_partitions[0].instances,
            (std::vector<MigInstance>{{MigProfile::k3g40gb, 4}, {MigProfile::k3g40gb, 0}}));
  EXPECT_EQ(parts.mig_partitions[1].gpu, 2);
  EXPECT_EQ(parts.mig_partitions[1].instances[0], (MigInstance{MigProfile::k1g10gb, 6}));
  // What reads is what the pool takes.
  auto pool =
      Pool::create(std::move(spec->models), std::move(spec->topology), std::move(spec->nodes));
  ASSERT_TRUE(pool.has_value()) << pool.error().message();
  EXPECT_EQ(pool->state(NodeId{1}).mig_gpus, GpuSet{0b0101});
  EXPECT_EQ(pool->state(NodeId{1}).whole_free_gpus, 2);
}

TEST(ClusterFileTest, RejectsBadValues) {
  struct Case {
    std::string node;
    std::string field;   // the path, after the position
    std::string reason;  // a part of the reason
  };
  const Case cases[] = {
      {"{name: a, gpus: -1, cpus: 1, memory_mib: 1}", "nodes[0].gpus", "must be 0..16, got -1"},
      {"{name: a, gpus: two, cpus: 1, memory_mib: 1}", "nodes[0].gpus", "expected an integer"},
      {"{name: a, gpus: [1], cpus: 1, memory_mib: 1}", "nodes[0].gpus", "got a list"},
      {"{name: a, gpus: , cpus: 1, memory_mib: 1}", "nodes[0].gpus", "got nothing"},
      {"{name: a, gpus: 0, cpus: 1.2345, memory_mib: 1}", "nodes[0].cpus", "up to 3 decimals"},
      {"{name: a, gpus: 0, cpus: -4, memory_mib: 1}", "nodes[0].cpus", "must be 0.."},
      {"{name: a, gpus: 0, cpus: 1, memory_gib: 1.5}", "nodes[0].memory_gib", "an integer"},
      {"{name: a, gpus: 0, cpus: 1, memory_mib: 99999999999999999999}", "nodes[0].memory_mib",
       "must be 0.."},
      {"{name: a, count: 0, gpus: 0, cpus: 1, memory_mib: 1}", "nodes[0].count",
       "must be 1..100000, got 0"},
      {"{name: '', gpus: 0, cpus: 1, memory_mib: 1}", "nodes[0].name", "must not be empty"},
      {"{name: [a], gpus: 0, cpus: 1, memory_mib: 1}", "nodes[0].name", "expected a name"},
      {"{name: a, gpus: 4, gpu_model: T4, cpus: 1, memory_mib: 1, nvlink_domains: [[0, 1], [2]]}",
       "nodes[0].nvlink_domains", "GPUs 3 are in no domain"},
      {"{name: a, gpus: 4, gpu_model: T4, cpus: 1, memory_mib: 1, "
       "nvlink_domains: [[0, 1], [1, 2, 3]]}",
       "nodes[0].nvlink_domains[1][0]", "GPU 1 is already in domain 0"},
      {"{name: a, gpus: 2, gpu_model: T4, cpus: 1, memory_mib: 1, nvlink_domains: [[0, 1, 2]]}",
       "nodes[0].nvlink_domains[0][2]", "must be 0..1, got 2"},
      {"{name: a, gpus: 2, gpu_model: T4, cpus: 1, memory_mib: 1, nvlink_domains: [[0, 1], []]}",
       "nodes[0].nvlink_domains[1]", "a domain must list its GPUs"},
      {"{name: a, gpus: 2, gpu_model: T4, cpus: 1, memory_mib: 1, nvlink_domains: [0, 1]}",
       "nodes[0].nvlink_domains[0]", "expected a list"},
      {"{name: a, gpus: 0, cpus: 1, memory_mib: 1, nvlink_domains: [[0]]}",
       "nodes[0].nvlink_domains[0][0]", "the node has no GPUs"},
      {"[name, a]", "nodes[0]", "expected a map, got a list"},
      {"{name: a, gpus: 2, gpu_model: T4, cpus: 1, memory_mib: 1, mig: on_demand}", "nodes[0].mig",
       "T4 GPUs cannot be partitioned"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: sometimes}",
       "nodes[0].mig", "'sometimes' is not on_demand"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {2: [7g.80gb]}}",
       "nodes[0].mig.2", "must be 0..1, got 2"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {0: [5g.50gb]}}",
       "nodes[0].mig.0[0]", "not a MIG profile"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {0: [4g.40gb, 4g.40gb]}}",
       "nodes[0].mig.0[1]", "no room for a 4g.40gb"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {0: [3g.40gb@2]}}",
       "nodes[0].mig.0[0]", "cannot start at memory slice 2"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {0: [1g.10gb@9]}}",
       "nodes[0].mig.0[0]", "a memory slice 0..7"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, mig: {0: []}}",
       "nodes[0].mig.0", "lists its instances"},
      {"{name: a, gpus: 2, gpu_model: A100, cpus: 1, memory_mib: 1, "
       "mig: {all: [7g.80gb], 1: [7g.80gb]}}",
       "nodes[0].mig.1", "GPU 1 is partitioned twice"},
  };
  for (const Case& c : cases) {
    const Error error = cluster_error(one_leaf("          - " + c.node + "\n"));
    EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0]." + c.field)) << c.node;
    EXPECT_THAT(error.reason, HasSubstr(c.reason)) << c.node;
  }
}

TEST(ClusterFileTest, RejectsDuplicateNames) {
  Error error =
      cluster_error(one_leaf("          - {name: n, count: 3, gpus: 0, cpus: 1, memory_mib: 1}\n"
                             "          - {name: n-02, gpus: 0, cpus: 1, memory_mib: 1}\n"));
  EXPECT_THAT(error.field, EndsWith(" spines[0].leaves[0].nodes[1].name"));
  EXPECT_EQ(error.reason, "node 'n-02' is already defined at spines[0].leaves[0].nodes[0]");

  error = cluster_error(
      "site: s\nspines:\n"
      "  - {name: a, leaves: [{name: l, nodes: [{name: x, gpus: 0, cpus: 1, memory_mib: 1}]}]}\n"
      "  - {name: b, leaves: [{name: l, nodes: []}]}\n");
  EXPECT_THAT(error.field, EndsWith(" spines[1].leaves[0].name"));
  EXPECT_THAT(error.reason, HasSubstr("spines[0].leaves[0]"));

  error = cluster_error("site: s\nspines:\n  - {name: a, leaves: []}\n  - {name: a, leaves: []}\n");
  EXPECT_EQ(error.field, "test.yaml:4:12 spines[1].name");
}

TEST(ClusterFileTest, RejectsFilesWithoutNodes) {
  EXPECT_EQ(cluster_error("site: s\nspines: []\n").field, "test.yaml:2:9 spines");
  EXPECT_THAT(cluster_error("").reason, HasSubstr("empty"));
  EXPECT_THAT(cluster_error("# only a comment\n").reason, HasSubstr("empty"));
}

TEST(ClusterFileTest, TurnsMalformedYamlIntoErrorsWithAPosition) {
  Error error = cluster_error("site: s\nspines: [\n  {name: a\n");
  EXPECT_THAT(error.field, ::testing::StartsWith("test.yaml:"));
  EXPECT_THAT(error.reason, HasSubstr("malformed YAML"));

  error = cluster_error("site: s\n  spines: x\n");
  EXPECT_EQ(error.field, "test.yaml:2:9");
  EXPECT_THAT(error.reason, HasSubstr("malformed YAML"));

  error = cluster_error("site: [s\n");
  EXPECT_THAT(error.reason, HasSubstr("malformed YAML"));

  error = cluster_error("site: *undefined\nspines: []\n");
  EXPECT_THAT(error.reason, HasSubstr("malformed YAML"));

  error = cluster_error("site: s\nspines: []\n---\nsite: t\n");
  EXPECT_EQ(error.field, "test.yaml:3:1");
  EXPECT_THAT(error.reason, HasSubstr("a second YAML document"));

  // yaml-cpp 0.7's LoadAll loops forever on this (jbeder/yaml-cpp#1319); found by fuzzing.
  error = cluster_error("- a\n,");
  EXPECT_EQ(error.field, "test.yaml:2:1");

  EXPECT_EQ(cluster_error("- a\n- b\n").reason, "expected a map, got a list");
  EXPECT_EQ(cluster_error("- a\n- b\n").field, "test.yaml:1:1");
}

TEST(ClusterFileTest, LinkFiguresDefaultWhenAbsent) {
  auto spec = read_cluster_yaml(
      one_leaf("          - {name: a, gpus: 0, cpus: 1, memory_mib: 1}\n"), "t.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  const LinkSpeeds defaults;
  EXPECT_EQ(spec->topology.links.nvlink_gbps, defaults.nvlink_gbps);
  EXPECT_EQ(spec->topology.links.pcie_gbps, defaults.pcie_gbps);
  EXPECT_EQ(spec->topology.links.leaf_gbps, defaults.leaf_gbps);
  EXPECT_EQ(spec->topology.links.spine_gbps, defaults.spine_gbps);
  ASSERT_EQ(spec->topology.spines.size(), 1U);
  EXPECT_EQ(spec->topology.spines[0].oversubscription, 1);

  // The example file gives none either.
  spec = load_cluster_yaml(test_support::test_source_dir() + "/data/clusters/example.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->topology.links.spine_gbps, 200);
  EXPECT_EQ(spec->topology.spines[1].oversubscription, 1);
}

TEST(ClusterFileTest, ReadsLinkFiguresAndOversubscription) {
  auto spec = read_cluster_yaml(
      "site: s\n"
      "links: {nvlink_gbps: 4800, leaf_gbps: 400}\n"
      "spines:\n"
      "  - name: a\n"
      "    oversubscription: 3\n"
      "    leaves: [{name: l1, nodes: [{name: x, gpus: 0, cpus: 1, memory_mib: 1}]}]\n"
      "  - {name: b, leaves: []}\n",
      "t.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->topology.links.nvlink_gbps, 4800);
  EXPECT_EQ(spec->topology.links.pcie_gbps, 256);  // not given: the default
  EXPECT_EQ(spec->topology.links.leaf_gbps, 400);
  EXPECT_EQ(spec->topology.links.spine_gbps, 200);
  ASSERT_EQ(spec->topology.spines.size(), 2U);
  EXPECT_EQ(spec->topology.spines[0].name, "a");
  EXPECT_EQ(spec->topology.spines[0].oversubscription, 3);
  EXPECT_EQ(spec->topology.spines[1].oversubscription, 1);

  spec = read_cluster_yaml(
      "site: s\n"
      "links: {}\n"
      "spines: [{name: a, leaves: [{name: l, nodes: [{name: x, gpus: 0, cpus: 1, "
      "memory_mib: 1}]}]}]\n",
      "t.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->topology.links.nvlink_gbps, 2400);
}

TEST(ClusterFileTest, RejectsBadLinkFigures) {
  const std::string spines =
      "spines: [{name: a, leaves: [{name: l, nodes: [{name: x, gpus: 0, cpus: 1, "
      "memory_mib: 1}]}]}]\n";
  Error error = cluster_error("site: s\nlinks: {nvlink_gbps: 0}\n" + spines);
  EXPECT_EQ(error.field, "test.yaml:2:22 links.nvlink_gbps");
  EXPECT_EQ(error.reason, "must be 1..1000000, got 0");

  error = cluster_error("site: s\nlinks: {pcie_gbps: 12.5}\n" + spines);
  EXPECT_EQ(error.field, "test.yaml:2:20 links.pcie_gbps");
  EXPECT_THAT(error.reason, HasSubstr("expected an integer"));

  error = cluster_error("site: s\nlinks: {leaf_gbps: 2000000}\n" + spines);
  EXPECT_THAT(error.field, EndsWith(" links.leaf_gbps"));

  error = cluster_error("site: s\nlinks: {spine_bandwidth: 100}\n" + spines);
  EXPECT_EQ(error.field, "test.yaml:2:9 links.spine_bandwidth");
  EXPECT_THAT(error.reason, HasSubstr("unknown key"));
  EXPECT_THAT(error.reason, HasSubstr("spine_gbps"));

  error = cluster_error("site: s\nlinks: {leaf_gbps: 100, leaf_gbps: 200}\n" + spines);
  EXPECT_THAT(error.field, EndsWith(" links.leaf_gbps"));
  EXPECT_EQ(error.reason, "the key is given twice");

  error = cluster_error("site: s\nlinks: [100]\n" + spines);
  EXPECT_EQ(error.field, "test.yaml:2:8 links");
  EXPECT_THAT(error.reason, HasSubstr("expected a map"));

  const std::string leaves =
      "leaves: [{name: l, nodes: [{name: x, gpus: 0, cpus: 1, memory_mib: 1}]}]}]\n";
  error = cluster_error("site: s\nspines: [{name: a, oversubscription: 0, " + leaves);
  EXPECT_EQ(error.field, "test.yaml:2:38 spines[0].oversubscription");
  EXPECT_EQ(error.reason, "must be 1..64, got 0");
  error = cluster_error("site: s\nspines: [{name: a, oversubscription: 1.5, " + leaves);
  EXPECT_THAT(error.field, EndsWith(" spines[0].oversubscription"));
  EXPECT_THAT(error.reason, HasSubstr("expected an integer"));
  error = cluster_error("site: s\nspines: [{name: a, oversubscription: 65, " + leaves);
  EXPECT_THAT(error.field, EndsWith(" spines[0].oversubscription"));
  error = cluster_error("site: s\nspines: [{name: a, oversubscribed: 2, " + leaves);
  EXPECT_THAT(error.field, EndsWith(" spines[0].oversubscribed"));
  EXPECT_THAT(error.reason, HasSubstr("oversubscription"));
  // Link figures belong to the site, oversubscription to a spine.
  error = cluster_error("site: s\noversubscription: 2\n" + spines);
  EXPECT_THAT(error.field, EndsWith(" oversubscription"));
  EXPECT_THAT(error.reason, HasSubstr("unknown key"));
  error = cluster_error("site: s\nspines: [{name: a, links: {}, " + leaves);
  EXPECT_THAT(error.field, EndsWith(" spines[0].links"));
}

TEST(ClusterFileTest, ReadsThePhilly512File) {
  auto spec = load_cluster_yaml(test_support::test_source_dir() + "/data/clusters/philly-512.yaml");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->topology.site, "philly");
  ASSERT_EQ(spec->topology.spines.size(), 1U);
  EXPECT_EQ(spec->topology.spines[0].oversubscription, 2);
  ASSERT_EQ(spec->topology.leaves.size(), 8U);
  ASSERT_EQ(spec->nodes.size(), 64U);
  ASSERT_EQ(spec->models.size(), 1);
  EXPECT_EQ(spec->models.name(GpuModelId{0}), "P100");
  EXPECT_EQ(spec->topology.links.nvlink_gbps, 2400);
  EXPECT_EQ(spec->topology.links.spine_gbps, 200);
  for (std::size_t i = 0; i < spec->nodes.size(); ++i) {
    const NodeSpec& node = spec->nodes[i];
    EXPECT_EQ(node.leaf, LeafId{static_cast<std::uint32_t>(i / 8)}) << node.name;
    EXPECT_EQ(node.gpu_count, 8) << node.name;
    EXPECT_EQ(node.milli_cpu, 48000) << node.name;
    EXPECT_EQ(node.memory_mib, 512 * 1024) << node.name;
    for (int g = 0; g < 8; ++g) EXPECT_EQ(node.nvlink_domain[g], 0) << node.name;
  }
  EXPECT_EQ(spec->nodes.front().name, "node-1-01");
  EXPECT_EQ(spec->nodes.back().name, "node-8-08");

  auto pool =
      Pool::create(std::move(spec->models), std::move(spec->topology), std::move(spec->nodes));
  ASSERT_TRUE(pool.has_value()) << pool.error().message();
  EXPECT_EQ(pool->node_count(), 64);
  EXPECT_EQ(pool->total_gpus(), 512);
  EXPECT_EQ(pool->topology().spines[0].oversubscription, 2);
}

TEST(ClusterFileTest, ReportsAMissingFile) {
  auto spec = load_cluster_yaml("/nonexistent/cluster.yaml");
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().field, "/nonexistent/cluster.yaml");
}

}  // namespace
}  // namespace tidepool
