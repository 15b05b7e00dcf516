#include "sim/scaled_pool.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/tenants_file.h"
#include "config/test_source_dir.h"
#include "core/pool.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// Nodes per leaf, in leaf order.
std::vector<int> leaf_sizes(const ClusterSpec& spec) {
  std::vector<int> sizes(spec.topology.leaves.size(), 0);
  for (const NodeSpec& node : spec.nodes) ++sizes[node.leaf.value];
  return sizes;
}

TEST(ScaleClusterTest, TemplateSizeKeepsTheShape) {
  const ClusterSpec philly = test_support::shipped_cluster("philly-512");
  auto scaled = scale_cluster(philly, 64);
  ASSERT_TRUE(scaled.has_value()) << scaled.error().message();
  EXPECT_EQ(scaled->nodes.size(), 64U);
  EXPECT_EQ(leaf_sizes(*scaled), leaf_sizes(philly));
  ASSERT_EQ(scaled->topology.spines.size(), 1U);
  EXPECT_EQ(scaled->topology.spines[0].oversubscription, 2);
  EXPECT_EQ(scaled->topology.site, philly.topology.site);
  EXPECT_EQ(scaled->topology.links.spine_gbps, philly.topology.links.spine_gbps);
  EXPECT_EQ(gpus_per_model(*scaled), gpus_per_model(philly));
  EXPECT_EQ(scaled->nodes[9].name, "node-2-02");
  EXPECT_EQ(scaled->nodes[9].gpu_count, 8);
  EXPECT_EQ(scaled->nodes[9].milli_cpu, philly.nodes[9].milli_cpu);
  EXPECT_EQ(scaled->nodes[9].memory_mib, philly.nodes[9].memory_mib);
}

TEST(ScaleClusterTest, GrowsLeafByLeafAndSpineBySpine) {
  auto scaled = scale_cluster(test_support::shipped_cluster("philly-512"), 83);
  ASSERT_TRUE(scaled.has_value()) << scaled.error().message();
  EXPECT_EQ(leaf_sizes(*scaled), (std::vector<int>{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 3}));
  ASSERT_EQ(scaled->topology.spines.size(), 2U);  // the template's spine holds 8 leaves
  EXPECT_EQ(scaled->topology.leaves[7].spine, SpineId{0});
  EXPECT_EQ(scaled->topology.leaves[8].spine, SpineId{1});
  EXPECT_EQ(scaled->topology.spines[1].oversubscription, 2);
  EXPECT_EQ(scaled->nodes.back().name, "node-11-03");
  EXPECT_EQ(gpus_per_model(*scaled), (std::vector<std::int64_t>{83 * 8}));
  auto pool = Pool::create(scaled->models, scaled->topology, scaled->nodes);
  ASSERT_TRUE(pool.has_value()) << pool.error().message();
  EXPECT_EQ(pool->total_gpus(), 664);
}

TEST(ScaleClusterTest, ShrinksAndCyclesAMixedTemplate) {
  auto pattern = read_cluster_yaml(
      "site: s\n"
      "spines:\n"
      "  - name: a\n"
      "    oversubscription: 3\n"
      "    leaves:\n"
      "      - name: l1\n"
      "        nodes:\n"
      "          - {name: big, count: 2, gpu_model: H100, gpus: 8, cpus: 96, memory_gib: 1024}\n"
      "      - name: empty\n"
      "        nodes: []\n"
      "      - name: l2\n"
      "        nodes:\n"
      "          - {name: small, gpu_model: A100, gpus: 4, cpus: 32, memory_gib: 256}\n",
      "mixed.yaml");
  ASSERT_TRUE(pattern.has_value()) << pattern.error().message();
  auto one = scale_cluster(*pattern, 1);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->nodes.size(), 1U);
  EXPECT_EQ(one->nodes[0].gpu_count, 8);
  auto seven = scale_cluster(*pattern, 7);
  ASSERT_TRUE(seven.has_value());
  EXPECT_EQ(leaf_sizes(*seven), (std::vector<int>{2, 1, 2, 1, 1}));
  EXPECT_EQ(gpus_per_model(*seven), (std::vector<std::int64_t>{5 * 8, 2 * 4}));
  ASSERT_EQ(seven->topology.spines.size(), 3U);  // 2 leaves per spine, empty leaves left out
  EXPECT_EQ(seven->topology.spines[2].oversubscription, 3);
  EXPECT_TRUE(Pool::create(seven->models, seven->topology, seven->nodes).has_value());
}

TEST(ScaleClusterTest, RefusesBadSizes) {
  const ClusterSpec philly = test_support::shipped_cluster("philly-512");
  EXPECT_FALSE(scale_cluster(philly, 0).has_value());
  EXPECT_FALSE(scale_cluster(philly, kMaxClusterNodes + 1).has_value());
  EXPECT_FALSE(scale_cluster(ClusterSpec{}, 4).has_value());
}

TEST(ScaleTenantsTest, PhillySharesSumToTheScaledPool) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("P100").has_value());
  auto spec = load_tenants_yaml(
      test_support::test_source_dir() + "/data/tenants/philly-2017-09-10.yaml", models);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  const std::vector<std::int64_t> from = {512};
  for (std::int64_t to : {8, 512, 664, 4096}) {
    auto scaled = scale_tenants(*spec, from, std::vector<std::int64_t>{to});
    ASSERT_TRUE(scaled.has_value()) << scaled.error().message();
    std::int64_t sum = 0;
    for (std::size_t t = 0; t < spec->orgs[0].tenants.size(); ++t) {
      const std::int64_t before = spec->orgs[0].tenants[t].quotas[0].guaranteed_milli;
      const std::int64_t after = scaled->orgs[0].tenants[t].quotas[0].guaranteed_milli;
      // Within one milli-GPU of the exact share.
      EXPECT_LE(after * 512, before * to + 512) << to;
      EXPECT_GE(after * 512, before * to - 512) << to;
      sum += after;
    }
    EXPECT_EQ(sum, to * 1000);
    EXPECT_TRUE(TenantBook::create(*scaled, models).has_value());
  }
}

TEST(ScaleTenantsTest, LargestRemainderAndLimits) {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "o";
  org.caps.push_back(OrgModelCaps{.model = GpuModelId{0},
                                  .guaranteed_milli = 3000,
                                  .borrowing_limit_milli = 1001,
                                  .lending_limit_milli = std::nullopt});
  for (int i = 0; i < 3; ++i) {
    TenantSpec t;
    t.name = fmt::format("t{}", i);
    t.quotas.push_back(ModelQuota{
        .model = GpuModelId{0},
        .guaranteed_milli = 1000,
        .borrowing_limit_milli = i == 0 ? std::optional<std::int64_t>(500) : std::nullopt,
        .lending_limit_milli = i == 1 ? std::optional<std::int64_t>(1000) : std::nullopt});
    org.tenants.push_back(std::move(t));
  }
  // A second model the pool does not scale.
  org.tenants[2].quotas.push_back(ModelQuota{.model = GpuModelId{1},
                                             .guaranteed_milli = 7,
                                             .borrowing_limit_milli = std::nullopt,
                                             .lending_limit_milli = std::nullopt});
  spec.orgs.push_back(std::move(org));
  // 3 GPUs to 2: each 666.67 m; 2000 m to hand out: the earliest tenant gets the extra one.
  auto scaled =
      scale_tenants(spec, std::vector<std::int64_t>{3, 0}, std::vector<std::int64_t>{2, 5});
  ASSERT_TRUE(scaled.has_value()) << scaled.error().message();
  const auto& tenants = scaled->orgs[0].tenants;
  EXPECT_EQ(tenants[0].quotas[0].guaranteed_milli, 667);
  EXPECT_EQ(tenants[1].quotas[0].guaranteed_milli, 667);
  EXPECT_EQ(tenants[2].quotas[0].guaranteed_milli, 666);
  EXPECT_EQ(tenants[0].quotas[0].borrowing_limit_milli, 333);  // 333.3 rounded
  EXPECT_EQ(tenants[1].quotas[0].borrowing_limit_milli, std::nullopt);
  EXPECT_EQ(tenants[1].quotas[0].lending_limit_milli, 667);  // capped at the new guarantee
  EXPECT_EQ(tenants[0].quotas[0].lending_limit_milli, std::nullopt);
  EXPECT_EQ(tenants[2].quotas[1].guaranteed_milli, 7);  // model 1: template had none
  EXPECT_EQ(scaled->orgs[0].caps[0].guaranteed_milli, 2000);
  EXPECT_EQ(scaled->orgs[0].caps[0].borrowing_limit_milli, 667);  // 667.3 rounded

  // An overflowing factor is refused.
  spec.orgs[0].tenants[0].quotas[0].guaranteed_milli = kMaxQuotaMilli;
  auto huge = scale_tenants(spec, std::vector<std::int64_t>{1}, std::vector<std::int64_t>{2});
  ASSERT_FALSE(huge.has_value());
  EXPECT_THAT(huge.error().message(), HasSubstr("tenant t0"));
}

TEST(CompressSubmitTimesTest, GrowsTheLoad) {
  std::vector<SimJob> jobs(4);
  const Seconds submits[] = {0, 5, 6, 1'000'000'000};
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].job.submit_time = submits[i];
    jobs[i].duration = 100;
  }
  jobs[1].job.deadline = 6;
  ASSERT_TRUE(compress_submit_times(jobs, 200'000).has_value());  // +20%: t / 1.2
  EXPECT_EQ(jobs[0].job.submit_time, 0);
  EXPECT_EQ(jobs[1].job.submit_time, 4);
  EXPECT_EQ(jobs[2].job.submit_time, 5);
  EXPECT_EQ(jobs[3].job.submit_time, 833'333'333);
  EXPECT_EQ(jobs[1].job.deadline, 5);
  EXPECT_EQ(jobs[3].duration, 100);
  ASSERT_TRUE(compress_submit_times(jobs, 0).has_value());
  EXPECT_EQ(jobs[3].job.submit_time, 833'333'333);
  EXPECT_FALSE(compress_submit_times(jobs, -1).has_value());
  EXPECT_FALSE(compress_submit_times(jobs, kMaxGrowthPpm + 1).has_value());
}

}  // namespace
}  // namespace tidepool
