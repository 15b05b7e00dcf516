#include "config/tenants_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "config/test_source_dir.h"
#include "core/tenants.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The error for `text`, which must not parse.
Error tenants_error(const std::string& text) {
  GpuModelCatalog models;
  auto spec = read_tenants_yaml(text, "t.yaml", models);
  EXPECT_FALSE(spec.has_value()) << text;
  return spec ? Error{} : spec.error();
}

// A file with one org holding one tenant whose entry is `tenant_yaml` (keys at 8 spaces).
std::string one_tenant(const std::string& tenant_yaml) {
  return "orgs:\n"
         "  - name: o\n"
         "    tenants:\n"
         "      - name: t\n" +
         tenant_yaml;
}

TEST(TenantsFileTest, ReadsTheExampleFile) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("H100").has_value());  // as the cluster file would have them
  ASSERT_TRUE(models.intern("A100").has_value());
  auto spec =
      load_tenants_yaml(test_support::test_source_dir() + "/data/tenants/example.yaml", models);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(models.size(), 2);
  ASSERT_EQ(spec->orgs.size(), 2U);
  EXPECT_EQ(spec->orgs[0].name, "research");
  ASSERT_EQ(spec->orgs[0].caps.size(), 1U);
  EXPECT_EQ(spec->orgs[0].caps[0].guaranteed_milli, 96000);
  EXPECT_EQ(spec->orgs[0].caps[0].borrowing_limit_milli, 32000);
  EXPECT_EQ(spec->orgs[0].caps[0].lending_limit_milli, std::nullopt);

  const TenantSpec& search = spec->orgs[0].tenants[0];
  EXPECT_EQ(search.name, "search");
  EXPECT_EQ(search.weight, 2);
  EXPECT_THAT(search.queues, ElementsAre("ranking", "retrieval"));
  ASSERT_EQ(search.quotas.size(), 2U);
  EXPECT_EQ(search.quotas[0].model, GpuModelId{0});
  EXPECT_EQ(search.quotas[0].guaranteed_milli, 64000);
  EXPECT_EQ(search.quotas[0].borrowing_limit_milli, 32000);
  EXPECT_EQ(search.quotas[0].lending_limit_milli, 64000);
  EXPECT_EQ(search.quotas[1].model, GpuModelId{1});
  EXPECT_EQ(search.quotas[1].borrowing_limit_milli, std::nullopt);

  const TenantSpec& ads = spec->orgs[1].tenants[0];
  EXPECT_EQ(ads.quotas[1].guaranteed_milli, 16500);  // 16.5 GPUs
  const TenantSpec& interns = spec->orgs[1].tenants[2];
  EXPECT_EQ(interns.weight, 1);
  EXPECT_TRUE(interns.quotas.empty());
  EXPECT_TRUE(interns.queues.empty());

  auto book = TenantBook::create(std::move(*spec), models);
  ASSERT_TRUE(book.has_value()) << book.error().message();
  EXPECT_EQ(book->tenant_count(), 5);
  const auto interns_id = book->find_tenant("interns");
  ASSERT_TRUE(interns_id.has_value());
  EXPECT_TRUE(book->find_queue(*interns_id, "default").has_value());
  const auto vision = book->find_tenant("vision");
  ASSERT_TRUE(vision.has_value());
  EXPECT_EQ(book->lending_limit(*vision, GpuModelId{0}), 16000);
  EXPECT_EQ(book->borrowing_limit(*vision, GpuModelId{0}), 0);
}

TEST(TenantsFileTest, ReadsATenantsAdmissionLimits) {
  GpuModelCatalog models;
  auto spec = read_tenants_yaml(
      one_tenant("        max_pending_jobs: 40\n        submissions_per_second: 5\n"), "t.yaml",
      models);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  const TenantSpec& t = spec->orgs.at(0).tenants.at(0);
  EXPECT_EQ(t.max_pending_jobs, 40);
  EXPECT_EQ(t.submissions_per_second, 5);
  auto plain = read_tenants_yaml(one_tenant(""), "t.yaml", models);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->orgs.at(0).tenants.at(0).max_pending_jobs, 0);  // the server's default
}

TEST(TenantsFileTest, ReadsTheOrderOfATenantAndTheFilesDefault) {
  GpuModelCatalog models;
  auto spec =
      read_tenants_yaml("order: srpt\n" + one_tenant("        order: fifo\n"), "t.yaml", models);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->default_order, LaneOrderKind::kShortestRemaining);
  EXPECT_EQ(spec->orgs.at(0).tenants.at(0).order, LaneOrderKind::kFifo);
  auto book = TenantBook::create(*spec, models);
  ASSERT_TRUE(book.has_value());
  EXPECT_EQ(book->order(TenantId{0}), LaneOrderKind::kFifo);
  // A tenant that names none takes the file's default; a file without one leaves it open.
  auto by_default = read_tenants_yaml("order: las\n" + one_tenant(""), "t.yaml", models);
  ASSERT_TRUE(by_default.has_value());
  EXPECT_EQ(TenantBook::create(*by_default, models)->order(TenantId{0}),
            LaneOrderKind::kLeastAttained);
  auto plain = read_tenants_yaml(one_tenant(""), "t.yaml", models);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(TenantBook::create(*plain, models)->order(TenantId{0}).has_value());
}

TEST(TenantsFileTest, InternsModelsInOrderOfAppearance) {
  GpuModelCatalog models;
  auto spec = read_tenants_yaml(one_tenant("        quota:\n"
                                           "          T4: {guaranteed_gpus: 0.25}\n"
                                           "          L4: {}\n"),
                                "t.yaml", models);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  ASSERT_EQ(models.size(), 2);
  EXPECT_EQ(models.name(GpuModelId{0}), "T4");
  EXPECT_EQ(spec->orgs[0].tenants[0].quotas[0].guaranteed_milli, 250);
  EXPECT_EQ(spec->orgs[0].tenants[0].quotas[1].guaranteed_milli, 0);
}

TEST(TenantsFileTest, EveryErrorNamesItsPath) {
  struct Case {
    std::string text;
    std::string field;
    std::string reason;
  };
  const Case cases[] = {
      {"", "t.yaml", "the file is empty; expected orgs"},
      {"orgs: []\n", "t.yaml:1:7 orgs", "the file has no tenants"},
      {"org: []\n", "t.yaml:1:1 org", "unknown key; expected one of order, orgs"},
      {"order: sjf\norgs: []\n", "t.yaml:1:8 order", "unknown order 'sjf'; known: fifo, las, srpt"},
      {one_tenant("        order: [las]\n"), "t.yaml:5:16 orgs[0].tenants[0].order",
       "expected a name, got a list"},
      {"orgs: {}\n", "t.yaml:1:7 orgs", "expected a list, got a map"},
      {"orgs:\n  - tenants: []\n", "t.yaml:2:5 orgs[0].name", "the key is missing"},
      {one_tenant("        wieght: 2\n"), "t.yaml:5:9 orgs[0].tenants[0].wieght",
       "unknown key; expected one of name, weight, order, quota, queues, max_pending_jobs, "
       "submissions_per_second"},
      {one_tenant("        max_pending_jobs: 0\n"),
       "t.yaml:5:27 orgs[0].tenants[0].max_pending_jobs",
       "expected an integer 1..10000000, got '0'"},
      {one_tenant("        submissions_per_second: [1]\n"),
       "t.yaml:5:33 orgs[0].tenants[0].submissions_per_second",
       "expected an integer 1..10000000, got a list"},
      {one_tenant("        weight: 0\n"), "t.yaml:5:17 orgs[0].tenants[0].weight",
       "expected an integer 1..1000000, got '0'"},
      {one_tenant("        weight: 1.5\n"), "t.yaml:5:17 orgs[0].tenants[0].weight",
       "expected an integer 1..1000000, got '1.5'"},
      {one_tenant("        quota:\n          H100: {guaranteed_gpus: 1.2345}\n"),
       "t.yaml:6:35 orgs[0].tenants[0].quota.H100.guaranteed_gpus",
       "expected a GPU count (up to 3 decimals), got '1.2345'"},
      {one_tenant("        quota:\n          H100: {guaranteed_gpus: -1}\n"),
       "t.yaml:6:35 orgs[0].tenants[0].quota.H100.guaranteed_gpus",
       "expected a GPU count (up to 3 decimals), got '-1'"},
      {one_tenant("        quota:\n          H100: {guaranteed_gpus: 2000000000}\n"),
       "t.yaml:6:35 orgs[0].tenants[0].quota.H100.guaranteed_gpus",
       "must be 0..1000000000, got 2000000000"},
      {one_tenant("        quota:\n          H100: {guaranted_gpus: 1}\n"),
       "t.yaml:6:18 orgs[0].tenants[0].quota.H100.guaranted_gpus",
       "unknown key; expected one of guaranteed_gpus, borrowing_limit_gpus, lending_limit_gpus"},
      {one_tenant(
           "        quota:\n          H100: {guaranteed_gpus: 8, lending_limit_gpus: 8.5}\n"),
       "t.yaml:6:58 orgs[0].tenants[0].quota.H100.lending_limit_gpus",
       "must be at most the guarantee (8 GPUs), got 8.5"},
      {one_tenant("        quota:\n          H100: {}\n          H100: {}\n"),
       "t.yaml:7:11 orgs[0].tenants[0].quota.H100", "the key is given twice"},
      {one_tenant("        quota: [H100]\n"), "t.yaml:5:16 orgs[0].tenants[0].quota",
       "expected a map, got a list"},
      {one_tenant("        queues: [a, b, a]\n"), "t.yaml:5:24 orgs[0].tenants[0].queues[2]",
       "queue 'a' is already listed at orgs[0].tenants[0].queues[0]"},
      {one_tenant("        queues: [a, '']\n"), "t.yaml:5:21 orgs[0].tenants[0].queues[1]",
       "must not be empty"},
      {one_tenant("      - name: t\n"), "t.yaml:5:15 orgs[0].tenants[1].name",
       "tenant 't' is already defined at orgs[0].tenants[0]"},
      {"orgs:\n  - name: o\n    tenants: []\n  - name: o\n    tenants: []\n",
       "t.yaml:4:11 orgs[1].name", "org 'o' is already defined at orgs[0]"},
      {"orgs:\n"
       "  - name: o\n"
       "    quota:\n"
       "      H100: {guaranteed_gpus: 8}\n"
       "    tenants:\n"
       "      - {name: a, quota: {H100: {guaranteed_gpus: 6}}}\n"
       "      - {name: b, quota: {H100: {guaranteed_gpus: 2.5}}}\n",
       "t.yaml:4:31 orgs[0].quota.H100.guaranteed_gpus",
       "the org's tenants are guaranteed 8.5 H100 GPUs in total, more than the org's 8"},
      {"orgs:\n  - name: o\n    tenants: []\n---\norgs: []\n", "t.yaml:4:1",
       "a second YAML document starts here; a tenants file holds one"},
  };
  for (const Case& c : cases) {
    const Error e = tenants_error(c.text);
    EXPECT_EQ(e.field, c.field) << c.text;
    EXPECT_EQ(e.reason, c.reason) << c.text;
  }
}

TEST(TenantsFileTest, MalformedYamlGivesAPositionAndNoException) {
  for (const std::string text :
       {"orgs: [\n", "- a\n,", "orgs:\n  - name: o\n   tenants: x\n", "{{{{", "orgs: *unknown\n"}) {
    const Error e = tenants_error(text);
    EXPECT_THAT(e.field, StartsWith("t.yaml")) << text;
    EXPECT_FALSE(e.reason.empty()) << text;
  }
}

TEST(TenantsFileTest, MissingFileIsAnError) {
  GpuModelCatalog models;
  auto spec = load_tenants_yaml(test_support::test_source_dir() + "/data/tenants/no-such-file.yaml",
                                models);
  ASSERT_FALSE(spec.has_value());
  EXPECT_THAT(spec.error().message(), HasSubstr("cannot open the file"));
}

}  // namespace
}  // namespace tidepool
