#include "api/api_bodies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "api/job_spec.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json json(std::string_view text) {
  auto value = parse_body(text, BodyFormat::kJson);
  EXPECT_TRUE(value.has_value()) << text << ": " << value.error().message();
  return value ? *value : Json();
}

// The error `read` gives for the JSON `body`, which it must refuse.
template <class Read>
Error refused(Read read, std::string_view body) {
  auto result = read(json(body));
  EXPECT_FALSE(result.has_value()) << "accepted: " << body;
  return result ? Error{} : result.error();
}

TEST(JobStatusReportTest, ReadsEveryField) {
  auto report = job_status_report_from_json(
      json(R"({"state": "failed", "exit_code": -9, "message": "killed"})"));
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->state, "failed");
  EXPECT_EQ(report->exit_code, -9);
  EXPECT_EQ(report->message, "killed");

  auto running = job_status_report_from_json(json(R"({"state": "running"})"));
  ASSERT_TRUE(running.has_value());
  EXPECT_FALSE(running->exit_code.has_value());
  EXPECT_EQ(running->message, "");
}

TEST(JobStatusReportTest, NamesTheFieldThatIsWrong) {
  const auto read = job_status_report_from_json;
  EXPECT_EQ(refused(read, "null").field, "state");
  EXPECT_EQ(refused(read, "null").reason, "the key is missing");
  EXPECT_EQ(refused(read, "{}").field, "state");
  EXPECT_EQ(refused(read, R"({"state": "done"})").reason,
            "expected one of running, succeeded, failed, got the string 'done'");
  EXPECT_EQ(refused(read, R"({"state": "failed", "exit_code": 256})").reason,
            "256 is out of range -255..255");
  EXPECT_EQ(refused(read, R"({"state": "failed", "exit_code": "1"})").field, "exit_code");
  EXPECT_EQ(refused(read, R"({"state": "failed", "message": 5})").field, "message");
  EXPECT_EQ(refused(read, R"({"state": "failed", "code": 1})").field, "code");
  EXPECT_THAT(refused(read, R"([1])").reason, HasSubstr("expected a map of state"));
  Json long_message = {{"state", "failed"}, {"message", std::string(4097, 'x')}};
  EXPECT_EQ(read(long_message).error().reason, "is 4097 bytes long; at most 4096");
}

TEST(CheckpointReportTest, BothFieldsAreOptional) {
  auto empty = checkpoint_report_from_json(Json());
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->step.has_value());
  auto full = checkpoint_report_from_json(json(R"({"step": 1200, "note": "epoch 3"})"));
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->step, 1200);
  EXPECT_EQ(full->note, "epoch 3");
  const auto read = checkpoint_report_from_json;
  EXPECT_EQ(refused(read, R"({"step": -1})").reason, "-1 is out of range; must be at least 0");
  EXPECT_EQ(refused(read, R"({"step": 1.5})").field, "step");
  EXPECT_EQ(refused(read, R"({"note": ["a"]})").field, "note");
}

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

TEST(NodeRegistrationTest, EveryFieldIsOptional) {
  auto empty = node_registration_from_json(Json());
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->gpus.has_value());
  auto full = node_registration_from_json(json(R"({"gpu_model": "H100", "gpus": 8,
      "cpu_milli": 96000, "memory_mib": 1048576, "agent_version": "0.1.0"})"));
  ASSERT_TRUE(full.has_value()) << full.error().message();
  EXPECT_EQ(full->gpu_model, "H100");
  EXPECT_EQ(full->gpus, 8);
  EXPECT_EQ(full->cpu_milli, 96'000);
  EXPECT_EQ(full->memory_mib, 1'048'576);
  EXPECT_EQ(full->agent_version, "0.1.0");

  const auto read = node_registration_from_json;
  EXPECT_EQ(refused(read, R"({"gpus": 17})").reason, "17 is out of range 0..16");
  EXPECT_EQ(refused(read, R"({"cpu_milli": -1})").field, "cpu_milli");
  EXPECT_EQ(refused(read, R"({"memory_mib": "1G"})").field, "memory_mib");
  EXPECT_EQ(refused(read, R"({"gpu_model": 100})").field, "gpu_model");
  EXPECT_EQ(refused(read, R"({"hostname": 7})").field, "hostname");
  EXPECT_EQ(refused(read, R"({"devices": [{"index": 16}]})").field, "devices[0].index");
  EXPECT_EQ(refused(read, R"({"rack": "r1"})").field, "rack");
}

TEST(NodeHeartbeatTest, JobIdsArePositiveAndUnique) {
  auto beat = node_heartbeat_from_json(json(R"({"running_jobs": [12, 13], "healthy_gpus": 8})"));
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->running_jobs, (std::vector<std::int64_t>{12, 13}));
  EXPECT_EQ(beat->healthy_gpus, 8);
  EXPECT_TRUE(node_heartbeat_from_json(Json())->running_jobs.empty());

  const auto read = node_heartbeat_from_json;
  EXPECT_EQ(refused(read, R"({"running_jobs": [1, 0]})").field, "running_jobs[1]");
  EXPECT_EQ(refused(read, R"({"running_jobs": [1, 2, 1]})").reason, "job 1 is listed twice");
  EXPECT_EQ(refused(read, R"({"running_jobs": 5})").field, "running_jobs");
  EXPECT_EQ(refused(read, R"({"healthy_gpus": 99})").field, "healthy_gpus");
  Json many = Json::array();
  for (std::size_t i = 1; i <= kMaxHeartbeatJobs + 1; ++i) many.push_back(i);
  EXPECT_EQ(read(Json{{"running_jobs", many}}).error().reason, "has 4097 job ids; at most 4096");
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
  const Json shapes[] = {Json(),
                         Json(1),
                         Json(-1.5),
                         Json("x"),
                         Json::array(),
                         Json(true),
                         Json::object(),
                         Json({1, 2}),
                         Json::binary({1, 2, 3}),
                         Json({{"state", Json::binary({})}})};
  for (const Json& shape : shapes) {
    EXPECT_NO_THROW({
      (void)job_status_report_from_json(shape);
      (void)checkpoint_report_from_json(shape);
      (void)tenant_update_from_json(shape);
      (void)token_request_from_json(shape);
      (void)node_registration_from_json(shape);
      (void)node_heartbeat_from_json(shape);
      (void)drain_request_from_json(shape);
      (void)job_update_from_json(shape);
      (void)job_spec_from_json(shape);
    }) << shape.dump();
  }
}

}  // namespace
}  // namespace tidepool
