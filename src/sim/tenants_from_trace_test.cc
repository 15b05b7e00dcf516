#include "sim/tenants_from_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "config/tenants_file.h"
#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

PhillyJob job(std::string tenant, Seconds duration, int gpus) {
  return PhillyJob{"", 0, duration, gpus, std::move(tenant)};
}

// A catalog with P100 (model 0) and V100 (model 1).
GpuModelCatalog two_models() {
  GpuModelCatalog models;
  EXPECT_TRUE(models.intern("P100").has_value());
  EXPECT_TRUE(models.intern("V100").has_value());
  return models;
}

std::vector<std::string> names(const TraceTenants& tenants) {
  std::vector<std::string> out;
  for (const TraceTenant& t : tenants.tenants) out.push_back(t.name);
  return out;
}

std::vector<std::int64_t> guarantees(const TraceTenants& tenants, std::size_t model) {
  std::vector<std::int64_t> out;
  for (const TraceTenant& t : tenants.tenants) out.push_back(t.guaranteed_milli[model]);
  return out;
}

void expect_same_spec(const TenantsSpec& a, const TenantsSpec& b) {
  ASSERT_EQ(a.orgs.size(), b.orgs.size());
  for (std::size_t o = 0; o < a.orgs.size(); ++o) {
    const OrgSpec& x = a.orgs[o];
    const OrgSpec& y = b.orgs[o];
    EXPECT_EQ(x.name, y.name);
    ASSERT_EQ(x.caps.size(), y.caps.size());
    for (std::size_t c = 0; c < x.caps.size(); ++c) {
      EXPECT_EQ(x.caps[c].model, y.caps[c].model);
      EXPECT_EQ(x.caps[c].guaranteed_milli, y.caps[c].guaranteed_milli);
      EXPECT_EQ(x.caps[c].borrowing_limit_milli, y.caps[c].borrowing_limit_milli);
      EXPECT_EQ(x.caps[c].lending_limit_milli, y.caps[c].lending_limit_milli);
    }
    ASSERT_EQ(x.tenants.size(), y.tenants.size());
    for (std::size_t t = 0; t < x.tenants.size(); ++t) {
      const TenantSpec& p = x.tenants[t];
      const TenantSpec& q = y.tenants[t];
      EXPECT_EQ(p.name, q.name);
      EXPECT_EQ(p.weight, q.weight);
      EXPECT_EQ(p.queues, q.queues);
      ASSERT_EQ(p.quotas.size(), q.quotas.size()) << p.name;
      for (std::size_t m = 0; m < p.quotas.size(); ++m) {
        EXPECT_EQ(p.quotas[m].model, q.quotas[m].model);
        EXPECT_EQ(p.quotas[m].guaranteed_milli, q.quotas[m].guaranteed_milli) << p.name;
        EXPECT_EQ(p.quotas[m].borrowing_limit_milli, q.quotas[m].borrowing_limit_milli);
        EXPECT_EQ(p.quotas[m].lending_limit_milli, q.quotas[m].lending_limit_milli);
      }
    }
  }
}

TEST(TenantsFromTraceTest, GuaranteesFollowTheShareOfGpuTime) {
  // a: 2 x 100 s = 200 GPU-s; b: 300 GPU-s over two jobs; c: a job of 0 s.
  const std::vector<PhillyJob> jobs = {job("a", 100, 2), job("b", 100, 1), job("c", 0, 8),
                                       job("b", 50, 4)};
  const std::vector<ModelCapacity> capacity = {{GpuModelId{0}, 10'000}};
  auto tenants = derive_tenants_from_trace(jobs, capacity);
  ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
  EXPECT_EQ(tenants->total_gpu_seconds, 500);
  EXPECT_THAT(names(*tenants), ElementsAre("b", "a", "c"));  // by GPU time, largest first
  EXPECT_EQ(tenants->tenants[0].jobs, 2);
  EXPECT_EQ(tenants->tenants[0].gpu_seconds, 300);
  EXPECT_DOUBLE_EQ(tenants->tenants[0].share, 0.6);
  EXPECT_DOUBLE_EQ(tenants->tenants[1].share, 0.4);
  EXPECT_DOUBLE_EQ(tenants->tenants[2].share, 0.0);
  EXPECT_EQ(tenants->tenants[2].jobs, 1);
  EXPECT_THAT(guarantees(*tenants, 0), ElementsAre(6000, 4000, 0));

  ASSERT_EQ(tenants->spec.orgs.size(), 1U);
  const OrgSpec& org = tenants->spec.orgs[0];
  EXPECT_EQ(org.name, "philly");
  EXPECT_TRUE(org.caps.empty());
  ASSERT_EQ(org.tenants.size(), 3U);
  EXPECT_EQ(org.tenants[0].name, "b");
  EXPECT_EQ(org.tenants[0].weight, 1);
  EXPECT_TRUE(org.tenants[0].queues.empty());
  ASSERT_EQ(org.tenants[0].quotas.size(), 1U);
  EXPECT_EQ(org.tenants[0].quotas[0].guaranteed_milli, 6000);
  EXPECT_EQ(org.tenants[0].quotas[0].borrowing_limit_milli, std::nullopt);  // unlimited
  EXPECT_EQ(org.tenants[0].quotas[0].lending_limit_milli, std::nullopt);    // all of it
  EXPECT_TRUE(org.tenants[2].quotas.empty());  // no GPU time, no guarantee
}

TEST(TenantsFromTraceTest, SplitsEveryModelByTheSameShares) {
  const std::vector<PhillyJob> jobs = {job("x", 30, 1), job("y", 10, 1)};
  const std::vector<ModelCapacity> capacity = {{GpuModelId{1}, 4'000}, {GpuModelId{0}, 8'000}};
  auto tenants = derive_tenants_from_trace(jobs, capacity, "lab");
  ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
  EXPECT_THAT(guarantees(*tenants, 0), ElementsAre(3000, 1000));  // V100, as given first
  EXPECT_THAT(guarantees(*tenants, 1), ElementsAre(6000, 2000));  // P100
  EXPECT_EQ(tenants->spec.orgs[0].name, "lab");
  const TenantSpec& x = tenants->spec.orgs[0].tenants[0];
  ASSERT_EQ(x.quotas.size(), 2U);
  EXPECT_EQ(x.quotas[0].model, GpuModelId{1});
  EXPECT_EQ(x.quotas[0].guaranteed_milli, 3000);
  EXPECT_EQ(x.quotas[1].model, GpuModelId{0});
  EXPECT_EQ(x.quotas[1].guaranteed_milli, 6000);
}

TEST(TenantsFromTraceTest, GivesTheLeftOverToTheLargestRemainders) {
  // Shares 0.6, 0.3, 0.1 of 2 milli-GPUs: exact 1.2, 0.6, 0.2; floors 1, 0, 0; the milli left
  // goes to b (remainder 0.6), not to a, which is listed first.
  const std::vector<PhillyJob> jobs = {job("a", 6, 1), job("b", 3, 1), job("c", 1, 1)};
  const std::vector<ModelCapacity> two_milli = {{GpuModelId{0}, 2}};
  auto tenants = derive_tenants_from_trace(jobs, two_milli);
  ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
  EXPECT_THAT(guarantees(*tenants, 0), ElementsAre(1, 1, 0));

  // Equal shares of one GPU: 333.33 each; the left-over milli goes to the first listed (by name).
  const std::vector<PhillyJob> equal = {job("q", 5, 2), job("p", 10, 1), job("r", 1, 10)};
  const std::vector<ModelCapacity> one_gpu = {{GpuModelId{0}, 1000}};
  auto thirds = derive_tenants_from_trace(equal, one_gpu);
  ASSERT_TRUE(thirds.has_value()) << thirds.error().message();
  EXPECT_THAT(names(*thirds), ElementsAre("p", "q", "r"));
  EXPECT_THAT(guarantees(*thirds, 0), ElementsAre(334, 333, 333));
}

TEST(TenantsFromTraceTest, GuaranteesSumExactlyToEachCapacity) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<PhillyJob> jobs;
    const int teams = 1 + static_cast<int>(random() % 20);
    const int count = 1 + static_cast<int>(random() % 200);
    for (int i = 0; i < count; ++i) {
      jobs.push_back(job("team-" + std::to_string(random() % teams),
                         static_cast<Seconds>(random() % kMaxPhillySeconds),
                         1 + static_cast<int>(random() % kMaxPhillyGpus)));
    }
    const std::vector<ModelCapacity> capacity = {
        {GpuModelId{0}, 1 + static_cast<std::int64_t>(random() % 1'000'000)},
        {GpuModelId{1}, kMaxQuotaMilli - static_cast<std::int64_t>(random() % 1000)}};
    auto tenants = derive_tenants_from_trace(jobs, capacity);
    ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
    for (std::size_t k = 0; k < capacity.size(); ++k) {
      std::int64_t sum = 0;
      for (const TraceTenant& t : tenants->tenants) {
        sum += t.guaranteed_milli[k];
        // Within one milli-GPU of the exact share.
        const long double exact = static_cast<long double>(capacity[k].milli) * t.gpu_seconds /
                                  tenants->total_gpu_seconds;
        EXPECT_LT(std::abs(static_cast<long double>(t.guaranteed_milli[k]) - exact),
                  1.0L + 1e-6L * exact);
      }
      EXPECT_EQ(sum, capacity[k].milli) << "round " << round << " model " << k;
    }
    GpuModelCatalog models = two_models();
    EXPECT_TRUE(TenantBook::create(tenants->spec, models).has_value());
  }
}

TEST(TenantsFromTraceTest, RejectsWhatCannotBeShared) {
  const std::vector<ModelCapacity> capacity = {{GpuModelId{0}, 8000}};
  const std::vector<PhillyJob> jobs = {job("a", 10, 1)};
  auto none = derive_tenants_from_trace({}, capacity);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().field, "jobs");

  const std::vector<PhillyJob> idle = {job("a", 0, 1), job("b", 0, 4)};
  auto no_time = derive_tenants_from_trace(idle, capacity);
  ASSERT_FALSE(no_time.has_value());
  EXPECT_THAT(no_time.error().reason, HasSubstr("no GPU time"));

  auto no_gpus = derive_tenants_from_trace(jobs, {});
  ASSERT_FALSE(no_gpus.has_value());
  EXPECT_EQ(no_gpus.error().field, "pool");

  const std::vector<ModelCapacity> twice = {{GpuModelId{0}, 8000}, {GpuModelId{0}, 1000}};
  auto repeated = derive_tenants_from_trace(jobs, twice);
  ASSERT_FALSE(repeated.has_value());
  EXPECT_THAT(repeated.error().reason, HasSubstr("twice"));

  const std::vector<ModelCapacity> zero = {{GpuModelId{0}, 0}};
  EXPECT_FALSE(derive_tenants_from_trace(jobs, zero).has_value());
  EXPECT_FALSE(derive_tenants_from_trace(jobs, capacity, "").has_value());
}

TEST(TenantsFromTraceTest, WritesAFileTheReaderReadsBackToTheSameTenants) {
  // Names a plain YAML scalar would misread or that need escapes.
  const std::vector<PhillyJob> jobs = {job("103959", 70, 1), job("true", 20, 1),
                                       job("say \"hi\"\\", 10, 1), job("7f04ca", 0, 1)};
  const std::vector<ModelCapacity> capacity = {{GpuModelId{0}, 512'000}, {GpuModelId{1}, 1'001}};
  GpuModelCatalog models = two_models();
  auto tenants = derive_tenants_from_trace(jobs, capacity);
  ASSERT_TRUE(tenants.has_value()) << tenants.error().message();
  EXPECT_THAT(guarantees(*tenants, 0), ElementsAre(358400, 102400, 51200, 0));
  EXPECT_THAT(guarantees(*tenants, 1), ElementsAre(701, 200, 100, 0));  // 700.7, 200.2, 100.1

  const std::string text = write_tenants_yaml(tenants->spec, models, "derived\nfrom a trace");
  EXPECT_THAT(text, StartsWith("# derived\n# from a trace\norgs:\n  - name: \"philly\"\n"));
  EXPECT_THAT(text, HasSubstr("      - name: \"103959\"\n        weight: 1\n        quota:\n"
                              "          \"P100\": {guaranteed_gpus: 358.4}\n"
                              "          \"V100\": {guaranteed_gpus: 0.701}\n"));
  GpuModelCatalog read_models = models;
  auto read = read_tenants_yaml(text, "derived.yaml", read_models);
  ASSERT_TRUE(read.has_value()) << read.error().message() << "\n" << text;
  EXPECT_EQ(read_models.size(), 2);
  expect_same_spec(*read, tenants->spec);
  auto book = TenantBook::create(*read, read_models);
  ASSERT_TRUE(book.has_value()) << book.error().message();
  EXPECT_EQ(book->tenant_count(), 4);
  const TenantId top = *book->find_tenant("103959");
  EXPECT_EQ(book->guaranteed(top, GpuModelId{0}), 358400);
  EXPECT_EQ(book->borrowing_limit(top, GpuModelId{0}), std::nullopt);
  EXPECT_EQ(book->lending_limit(top, GpuModelId{0}), 358400);
  EXPECT_EQ(book->weight(top), 1);
  EXPECT_EQ(book->guaranteed(*book->find_tenant("7f04ca"), GpuModelId{0}), 0);
}

TEST(WriteTenantsYamlTest, WritesCapsLimitsAndQueuesBack) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("H100").has_value());
  ASSERT_TRUE(models.intern("A100").has_value());
  auto example =
      load_tenants_yaml(test_support::test_source_dir() + "/data/tenants/example.yaml", models);
  ASSERT_TRUE(example.has_value()) << example.error().message();
  const std::string text = write_tenants_yaml(*example, models, "");
  EXPECT_THAT(text, StartsWith("orgs:\n"));
  GpuModelCatalog read_models = models;
  auto read = read_tenants_yaml(text, "copy.yaml", read_models);
  ASSERT_TRUE(read.has_value()) << read.error().message() << "\n" << text;
  expect_same_spec(*read, *example);
}

}  // namespace
}  // namespace tidepool
