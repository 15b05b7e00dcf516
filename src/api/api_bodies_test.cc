#include "api/api_bodies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "api/job_spec.h"
#include "api/test_bodies.h"

namespace tidepool {
namespace {

using test_support::json;
using test_support::refused;
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(TenantUpdateTest, ReadsTheTenantsFileEntry) {
  auto update = tenant_update_from_json(json(R"({"weight": 2, "queues": ["ranking", "retrieval"],
      "quota": {"H100": {"guaranteed_gpus": 64, "borrowing_limit_gpus": "32.5",
                         "lending_limit_gpus": 0.25},
                "A100": {}}})"));
  ASSERT_TRUE(update.has_value()) << update.error().message();
  EXPECT_EQ(update->weight, 2);
  EXPECT_EQ(update->queues, (std::vector<std::string>{"ranking", "retrieval"}));
  ASSERT_EQ(update->quota.size(), 2U);
  const QuotaSpec& h100 = update->quota.at("H100");
  EXPECT_EQ(h100.guaranteed_milli, 64'000);
  EXPECT_EQ(h100.borrowing_limit_milli, 32'500);
  EXPECT_EQ(h100.lending_limit_milli, 250);
  const QuotaSpec& a100 = update->quota.at("A100");
  EXPECT_EQ(a100.guaranteed_milli, 0);
  EXPECT_FALSE(a100.borrowing_limit_milli.has_value());
  EXPECT_FALSE(a100.lending_limit_milli.has_value());
}

TEST(TenantUpdateTest, DefaultsAndYaml) {
  auto empty = tenant_update_from_json(Json());
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->weight, 1);
  EXPECT_EQ(empty->queues, std::vector<std::string>{"default"});
  EXPECT_TRUE(empty->quota.empty());

  auto yaml = parse_body("weight: 3\nquota:\n  H100: {guaranteed_gpus: 12.5}\n", BodyFormat::kYaml);
  ASSERT_TRUE(yaml.has_value());
  auto update = tenant_update_from_json(*yaml);
  ASSERT_TRUE(update.has_value()) << update.error().message();
  EXPECT_EQ(update->quota.at("H100").guaranteed_milli, 12'500);
}

TEST(TenantUpdateTest, NamesTheFieldThatIsWrong) {
  const auto read = tenant_update_from_json;
  EXPECT_EQ(refused(read, R"({"weight": 0})").reason, "0 is out of range 1..1000000");
  EXPECT_EQ(refused(read, R"({"queues": []})").reason, "must name at least one queue");
  EXPECT_EQ(refused(read, R"({"queues": ["a", "b", "a"]})").field, "queues[2]");
  EXPECT_EQ(refused(read, R"({"queues": ["a", "b c"]})").field, "queues[1]");
  EXPECT_EQ(refused(read, R"({"queues": "a"})").field, "queues");
  const Error guaranteed = refused(read, R"({"quota": {"H100": {"guaranteed_gpus": -1}}})");
  EXPECT_EQ(guaranteed.field, "quota.H100.guaranteed_gpus");
  EXPECT_EQ(guaranteed.reason, "'-1' is negative");
  EXPECT_THAT(refused(read, R"({"quota": {"H100": {"guaranteed_gpus": "1.2345"}}})").reason,
              HasSubstr("'1.2345' is not a number of GPUs with at most 3 decimals"));
  EXPECT_THAT(refused(read, R"({"quota": {"H100": {"guaranteed_gpus": 1e20}}})").reason,
              HasSubstr("'1e+20' is not a number of GPUs"));
  EXPECT_THAT(refused(read, R"({"quota": {"H100": {"guaranteed_gpus": "2000000000"}}})").reason,
              HasSubstr("is out of range 0..1000000000 GPUs"));
  EXPECT_EQ(refused(read, R"({"quota": {"H100": {"guaranteed_gpu": 1}}})").field,
            "quota.H100.guaranteed_gpu");
  EXPECT_EQ(refused(read, R"({"quota": {"H 100": {}}})").field, "quota.H 100");
  EXPECT_EQ(refused(read, R"({"quota": {"H100": 8}})").field, "quota.H100");
  const Error lending =
      refused(read, R"({"quota": {"H100": {"guaranteed_gpus": 8, "lending_limit_gpus": 8.5}}})");
  EXPECT_EQ(lending.field, "quota.H100.lending_limit_gpus");
  EXPECT_EQ(lending.reason, "8.5 GPUs is more than the guarantee of 8");
  EXPECT_EQ(refused(read, R"({"name": "vision"})").field, "name");
}

TEST(TokenRequestTest, TenantForUsersNodeForAgents) {
  auto user = token_request_from_json(
      json(R"({"role": "user", "tenant": "vision", "node": "", "description": "ci"})"));
  ASSERT_TRUE(user.has_value()) << user.error().message();
  EXPECT_EQ(user->role, "user");
  EXPECT_EQ(user->tenant, "vision");
  EXPECT_EQ(user->node, "");
  EXPECT_EQ(user->description, "ci");
  auto agent = token_request_from_json(json(R"({"role": "agent", "node": "gpu-07"})"));
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->node, "gpu-07");
  EXPECT_TRUE(token_request_from_json(json(R"({"role": "admin"})")).has_value());

  const auto read = token_request_from_json;
  EXPECT_EQ(refused(read, "null").field, "role");
  EXPECT_EQ(refused(read, R"({"role": "root"})").field, "role");
  EXPECT_EQ(refused(read, R"({"role": "user"})").reason, "a user token needs a tenant");
  EXPECT_EQ(refused(read, R"({"role": "user", "tenant": "v", "node": "n"})").field, "node");
  EXPECT_EQ(refused(read, R"({"role": "agent"})").reason, "an agent token needs a node");
  EXPECT_EQ(refused(read, R"({"role": "agent", "node": "n", "tenant": "v"})").reason,
            "only a user token names a tenant, not an agent token");
  EXPECT_EQ(refused(read, R"({"role": "admin", "node": "n"})").reason,
            "only an agent token names a node, not an admin token");
  EXPECT_EQ(refused(read, R"({"role": "user", "tenant": "bad name"})").field, "tenant");
  Json long_description = {{"role", "admin"}, {"description", std::string(257, 'd')}};
  EXPECT_EQ(read(long_description).error().reason, "is 257 characters long; at most 256");
  // 256 characters of two bytes each fit.
  std::string accents;
  for (int i = 0; i < 256; ++i) accents += "\xC3\xA9";
  EXPECT_TRUE(read(Json{{"role", "admin"}, {"description", accents}}).has_value());
}

TEST(DrainRequestTest, ReasonIsOptional) {
  EXPECT_EQ(drain_request_from_json(Json())->reason, "");
  EXPECT_EQ(drain_request_from_json(json(R"({"reason": "maintenance"})"))->reason, "maintenance");
  EXPECT_EQ(refused(drain_request_from_json, R"({"reason": 1})").field, "reason");
  EXPECT_EQ(refused(drain_request_from_json, R"({"why": "x"})").field, "why");
  EXPECT_EQ(refused(drain_request_from_json, R"("now")").field, "");
}

TEST(JobUpdateTest, OnlyPriorityAndLimitsAndCheckedAsASubmission) {
  EXPECT_EQ(refused(job_update_from_json, R"({})").field, "body");
  EXPECT_EQ(refused(job_update_from_json, R"({"tasks": 2})").field, "tasks");
  EXPECT_EQ(refused(job_update_from_json, R"([1])").field, "");
  JobSpec spec;
  spec.name = "train";
  spec.tenant = "vision";
  spec.command = {"train.sh"};
  spec.max_runtime = 3600;
  auto update = job_update_from_json(json(R"({"priority": 7, "max_runtime": null,
                                              "runtime_estimate": "30m"})"));
  ASSERT_TRUE(update.has_value());
  auto updated = apply_job_update(spec, *update);
  ASSERT_TRUE(updated.has_value()) << updated.error().message();
  EXPECT_EQ(updated->priority, 7);
  EXPECT_FALSE(updated->max_runtime.has_value());  // null clears it
  EXPECT_EQ(updated->runtime_estimate, 1800);
  EXPECT_EQ(updated->name, "train");
  EXPECT_EQ(updated->command, spec.command);
  auto bad = apply_job_update(spec, JobUpdate{json(R"({"priority": "high"})")});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "priority");
  // A body that did not come through job_update_from_json is checked all the same.
  EXPECT_FALSE(apply_job_update(spec, JobUpdate{json(R"({"gpus_per_task": 8})")}).has_value());
}

TEST(ApiBodiesTest, NoReaderThrowsOnAnyShape) {
  const std::vector<Json> shapes = test_support::odd_json_shapes();
  for (const Json& shape : shapes) {
    EXPECT_NO_THROW({
      (void)tenant_update_from_json(shape);
      (void)token_request_from_json(shape);
      (void)drain_request_from_json(shape);
      (void)job_update_from_json(shape);
      (void)job_spec_from_json(shape);
    }) << shape.dump();
  }
}

}  // namespace
}  // namespace tidepool
