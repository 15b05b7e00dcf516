#include "api/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "api/body_fields.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr std::string_view kFullYaml = R"(# a training gang
name: resnet-50
tenant: vision
queue: ranking
class: training
priority: -20
tasks: 4
gpus_per_task: 8
gpu_milli: 1000
gpu_model: [H100, A100]
cpu_milli_per_task: 8000
memory_mib_per_task: 65536
topology: {within: leaf, mode: required}
runtime_estimate: 6h
max_runtime: 43200
preemptible: false
checkpoint_interval: 30m
command: [python, train.py, --epochs, "90"]
env: {EPOCHS: "90", PATH: /usr/bin}
labels:
  team: ranking
  empty: ""
)";

constexpr std::string_view kFullJson = R"({
  "name": "resnet-50", "tenant": "vision", "queue": "ranking", "class": "training",
  "priority": -20, "tasks": 4, "gpus_per_task": 8, "gpu_milli": 1000,
  "gpu_model": ["H100", "A100"], "cpu_milli_per_task": 8000, "memory_mib_per_task": 65536,
  "topology": {"within": "leaf", "mode": "required"},
  "runtime_estimate": "6h", "max_runtime": "12h", "preemptible": false,
  "checkpoint_interval": 1800, "command": ["python", "train.py", "--epochs", "90"],
  "env": {"EPOCHS": "90", "PATH": "/usr/bin"}, "labels": {"team": "ranking", "empty": ""}
})";

// The error of a YAML spec that must fail: "name" and "tenant" are given, `extra` adds keys.
Error yaml_error(std::string_view extra) {
  const std::string body = "name: job\ntenant: vision\n" + std::string(extra);
  auto spec = parse_job_spec(body, BodyFormat::kYaml);
  EXPECT_FALSE(spec.has_value()) << "accepted:\n" << body;
  return spec ? Error{} : spec.error();
}

// The spec read from a JSON object with "name" and "tenant" and the members of `extra`.
Result<JobSpec> json_spec(const Json& extra) {
  Json body = {{"name", "job"}, {"tenant", "vision"}};
  body.update(extra);
  return job_spec_from_json(body);
}

TEST(JobSpecTest, YamlAndJsonGiveTheSameSpec) {
  auto from_yaml = parse_job_spec(kFullYaml, BodyFormat::kYaml);
  auto from_json = parse_job_spec(kFullJson, BodyFormat::kJson);
  ASSERT_TRUE(from_yaml.has_value()) << from_yaml.error().message();
  ASSERT_TRUE(from_json.has_value()) << from_json.error().message();
  EXPECT_EQ(*from_yaml, *from_json);

  const JobSpec& spec = *from_yaml;
  EXPECT_EQ(spec.name, "resnet-50");
  EXPECT_EQ(spec.tenant, "vision");
  EXPECT_EQ(spec.queue, "ranking");
  EXPECT_EQ(spec.job_class, JobClass::kTraining);
  EXPECT_EQ(spec.priority, -20);
  EXPECT_EQ(spec.tasks, 4);
  EXPECT_EQ(spec.gpus_per_task, 8);
  EXPECT_EQ(spec.gpu_milli, 1000);
  EXPECT_EQ(spec.gpu_models, (std::vector<std::string>{"H100", "A100"}));
  EXPECT_EQ(spec.cpu_milli_per_task, 8000);
  EXPECT_EQ(spec.memory_mib_per_task, 65536);
  EXPECT_EQ(spec.topology.level, TopologyLevel::kLeaf);
  EXPECT_EQ(spec.topology.strength, TopologyStrength::kRequired);
  EXPECT_EQ(spec.runtime_estimate, 6 * 3600);
  EXPECT_EQ(spec.max_runtime, 12 * 3600);
  EXPECT_FALSE(spec.preemptible);
  EXPECT_EQ(spec.checkpoint_interval, 1800);
  EXPECT_EQ(spec.command, (std::vector<std::string>{"python", "train.py", "--epochs", "90"}));
  EXPECT_EQ(spec.env.at("EPOCHS"), "90");
  EXPECT_EQ(spec.env.at("PATH"), "/usr/bin");
  EXPECT_EQ(spec.labels.at("team"), "ranking");
  EXPECT_EQ(spec.labels.at("empty"), "");
}

TEST(JobSpecTest, DefaultsFillWhatIsLeftOut) {
  auto spec = parse_job_spec("name: job\ntenant: vision\n", BodyFormat::kYaml);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  JobSpec expected;
  expected.name = "job";
  expected.tenant = "vision";
  EXPECT_EQ(*spec, expected);
  EXPECT_EQ(spec->queue, "default");
  EXPECT_EQ(spec->job_class, JobClass::kTraining);
  EXPECT_EQ(spec->priority, 0);
  EXPECT_EQ(spec->tasks, 1);
  EXPECT_EQ(spec->gpus_per_task, 1);
  EXPECT_EQ(spec->gpu_milli, 1000);
  EXPECT_TRUE(spec->gpu_models.empty());
  EXPECT_EQ(spec->topology.level, TopologyLevel::kSpine);
  EXPECT_EQ(spec->topology.strength, TopologyStrength::kPreferred);
  EXPECT_FALSE(spec->runtime_estimate.has_value());
  EXPECT_FALSE(spec->max_runtime.has_value());
  EXPECT_FALSE(spec->checkpoint_interval.has_value());
  EXPECT_TRUE(spec->preemptible);
  EXPECT_TRUE(spec->command.empty());
}

TEST(JobSpecTest, NullIsTheSameAsLeavingTheKeyOut) {
  auto spec = parse_job_spec(
      "name: job\ntenant: vision\nqueue:\ncheckpoint_interval: ~\n"
      "topology: {within: null}\nenv:\n",
      BodyFormat::kYaml);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->queue, "default");
  EXPECT_FALSE(spec->checkpoint_interval.has_value());
  EXPECT_EQ(spec->topology.level, TopologyLevel::kSpine);
}

TEST(JobSpecTest, NameAndTenantAreRequired) {
  auto no_name = parse_job_spec("tenant: vision", BodyFormat::kYaml);
  ASSERT_FALSE(no_name.has_value());
  EXPECT_EQ(no_name.error().field, "name");
  EXPECT_EQ(no_name.error().reason, "the key is missing");
  auto no_tenant = parse_job_spec(R"({"name": "job", "tenant": null})", BodyFormat::kJson);
  ASSERT_FALSE(no_tenant.has_value());
  EXPECT_EQ(no_tenant.error().field, "tenant");
}

TEST(JobSpecTest, TheBodyMustBeAMap) {
  for (std::string_view body : {"", "[1, 2]", "just text", "42"}) {
    auto spec = parse_job_spec(body, BodyFormat::kYaml);
    ASSERT_FALSE(spec.has_value()) << body;
    EXPECT_EQ(spec.error().field, "");
    EXPECT_THAT(spec.error().reason, HasSubstr("expected a map of the job's fields")) << body;
  }
}

// One bad value per field: the error names the field's path and says why.
struct BadField {
  std::string_view yaml;
  std::string_view field;
  std::string_view reason;
};

TEST(JobSpecTest, EveryFieldNamesItselfWhenWrong) {
  const BadField cases[] = {
      {"name2: x", "name2", "unknown key; expected one of name, tenant"},
      {"queue: 'two words'", "queue", "contains ' '"},
      {"queue: -q", "queue", "must start with a letter or a digit"},
      {"class: research", "class", "unknown job class 'research'; one of training, inference"},
      {"class: [training]", "class", "expected one of training, inference, dev, batch, got a list"},
      {"priority: 1000001", "priority", "1000001 is out of range -1000000..1000000"},
      {"priority: high", "priority", "expected an integer, got the string 'high'"},
      {"tasks: 0", "tasks", "0 is out of range 1..100000"},
      {"tasks: 100001", "tasks", "100001 is out of range 1..100000"},
      {"tasks: 1.5", "tasks", "expected an integer, got the number 1.5"},
      {"tasks: '4'", "tasks", "expected an integer, got the string '4'"},
      {"gpus_per_task: 17", "gpus_per_task", "17 is out of range 0..16"},
      {"gpus_per_task: -1", "gpus_per_task", "-1 is out of range 0..16"},
      {"gpu_milli: 0", "gpu_milli", "0 is out of range 1..1000"},
      {"gpu_milli: 1001", "gpu_milli", "1001 is out of range 1..1000"},
      {"gpu_model: [H100, 'A 100']", "gpu_model[1]", "contains ' '"},
      {"gpu_model: [H100, H100]", "gpu_model[1]", "'H100' is listed twice"},
      {"gpu_model: {H100: 1}", "gpu_model", "expected a list of GPU model names, got a map"},
      {"cpu_milli_per_task: -1", "cpu_milli_per_task", "-1 is out of range 0..1000000000"},
      {"memory_mib_per_task: 1073741825", "memory_mib_per_task",
       "1073741825 is out of range 0..1073741824"},
      {"topology: node", "topology", "expected a map of within and mode, got the string 'node'"},
      {"topology: {within: rack}", "topology.within",
       "expected one of nvlink, node, leaf, spine, got the string 'rack'"},
      {"topology: {mode: strict}", "topology.mode", "expected required or preferred"},
      {"topology: {level: node}", "topology.level", "unknown key; expected one of within, mode"},
      {"runtime_estimate: 6 hours", "runtime_estimate", "'6 hours' is not a duration"},
      {"runtime_estimate: 0", "runtime_estimate", "must be longer than 0s"},
      {"runtime_estimate: -5", "runtime_estimate", "-5 is out of range 0..315360000"},
      {"runtime_estimate: 1.5", "runtime_estimate", "expected an integer, got the number 1.5"},
      {"max_runtime: 11y", "max_runtime", "'11y' is not a duration"},
      {"max_runtime: 3651d", "max_runtime", "'3651d' is longer than 3650d"},
      {"max_runtime: [1h]", "max_runtime", "expected a duration such as \"30m\""},
      {"max_cost: 0", "max_cost", "must be more than 0"},
      {"max_cost: 1.2345678", "max_cost", "at most 6 decimals"},
      {"max_cost: [5]", "max_cost", "expected an amount"},
      {"checkpoint_interval: 0s", "checkpoint_interval", "must be longer than 0s"},
      {"preemptible: yes", "preemptible", "expected true or false, got the string 'yes'"},
      {"preemptible: 'true'", "preemptible", "expected true or false, got the string 'true'"},
      {"command: python train.py", "command", "expected a list of command words"},
      {"command: [python, train.py, --lr, 0.1]", "command[3]",
       "expected a string, got the number 0.1 (quote it to make it a string)"},
      {"command: [a, [b]]", "command[1]", "expected a string, got a list"},
      {"env: {EPOCHS: 90}", "env.EPOCHS", "expected a string, got the number 90 (quote it"},
      {"env: {1ABC: x}", "env.1ABC", "not a variable name"},
      {"env: {A-B: x}", "env.A-B", "not a variable name"},
      {"env: [A, B]", "env", "expected a map of env entries, got a list"},
      {"labels: {team: true}", "labels.team", "expected a string, got true"},
      {"labels: {'my team': x}", "labels.my team", "a label key must be a name"},
  };
  for (const BadField& bad : cases) {
    const Error error = yaml_error(bad.yaml);
    EXPECT_EQ(error.field, bad.field) << bad.yaml << " -> " << error.message();
    EXPECT_THAT(error.reason, HasSubstr(bad.reason)) << bad.yaml;
  }
}

TEST(JobSpecTest, NamesFollowOneRule) {
  EXPECT_TRUE(check_name("resnet-50"));
  EXPECT_TRUE(check_name("0.train_v2"));
  EXPECT_TRUE(check_name(std::string(kMaxNameLength, 'a')));
  EXPECT_THAT(check_name("").error().reason, HasSubstr("must not be empty"));
  EXPECT_THAT(check_name(std::string(kMaxNameLength + 1, 'a')).error().reason,
              HasSubstr("is 64 characters long; at most 63"));
  EXPECT_THAT(check_name("_x").error().reason, HasSubstr("must start with a letter or a digit"));
  EXPECT_THAT(check_name("a/b").error().reason, HasSubstr("contains '/'"));
  EXPECT_THAT(check_name("caf\xC3\xA9").error().reason, HasSubstr("the byte 0xC3"));
  EXPECT_EQ(check_name("a b").error().field, "");

  const Error name = parse_job_spec("name: 'bad name'\ntenant: t\n", BodyFormat::kYaml).error();
  EXPECT_EQ(name.field, "name");
  const Error tenant = parse_job_spec("name: job\ntenant: 7\n", BodyFormat::kYaml).error();
  EXPECT_EQ(tenant.field, "tenant");
  EXPECT_THAT(tenant.reason, HasSubstr("expected a name, got the number 7"));
}

TEST(JobSpecTest, FractionalGpusOnlyForOneTaskOfOneGpu) {
  auto notebook = json_spec({{"gpu_milli", 500}});
  ASSERT_TRUE(notebook.has_value()) << notebook.error().message();
  EXPECT_EQ(notebook->gpu_milli, 500);

  for (const Json& extra :
       {Json{{"gpu_milli", 500}, {"tasks", 2}}, Json{{"gpu_milli", 500}, {"gpus_per_task", 2}},
        Json{{"gpu_milli", 999}, {"gpus_per_task", 0}}}) {
    auto spec = json_spec(extra);
    ASSERT_FALSE(spec.has_value()) << extra.dump();
    EXPECT_EQ(spec.error().field, "gpu_milli");
    EXPECT_THAT(spec.error().reason, HasSubstr("needs tasks: 1 and gpus_per_task: 1"));
  }
  EXPECT_TRUE(json_spec({{"gpus_per_task", 0}}).has_value());  // a CPU-only job
}

TEST(JobSpecTest, MigProfileAsksForOneInstanceOfOneGpu) {
  auto spec =
      parse_job_spec("name: nb\ntenant: vision\nmig_profile: 3g.40gb\ngpu_model: [A100, H100]\n",
                     BodyFormat::kYaml);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->mig_profile, MigProfile::k3g40gb);
  EXPECT_EQ(spec->gpu_milli, 1000);
  EXPECT_FALSE(json_spec(Json::object()).value().mig_profile.has_value());
  for (const char* name : {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}) {
    auto named = json_spec({{"mig_profile", name}});
    ASSERT_TRUE(named.has_value()) << name;
    EXPECT_EQ(mig_profile_spec(*named->mig_profile).name, name);
  }
  // Written out with the same fields: gpus_per_task: 1, a model that can be partitioned.
  EXPECT_TRUE(json_spec({{"mig_profile", "1g.10gb"}, {"gpus_per_task", 1}, {"gpu_model", "H100"}})
                  .has_value());
  EXPECT_TRUE(json_spec({{"mig_profile", "1g.10gb"}, {"gpu_milli", nullptr}}).has_value());
}

TEST(JobSpecTest, MigProfileRefusalsNameTheirField) {
  const auto error = [](const Json& extra) {
    auto spec = json_spec(extra);
    EXPECT_FALSE(spec.has_value()) << extra.dump();
    return spec ? Error{} : spec.error();
  };
  for (const Json& profile : {Json("3g.41gb"), Json("3G.40GB"), Json(""), Json(3), Json(true)}) {
    const Error unknown = error({{"mig_profile", profile}});
    EXPECT_EQ(unknown.field, "mig_profile");
    EXPECT_THAT(unknown.reason, HasSubstr("is not a MIG profile; one of 1g.10gb, 1g.20gb, "
                                          "2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"));
  }
  const Error tasks = error({{"mig_profile", "3g.40gb"}, {"tasks", 2}});
  EXPECT_EQ(tasks.field, "tasks");
  EXPECT_THAT(tasks.reason, HasSubstr("one MIG instance (3g.40gb) for one task, got tasks: 2"));
  for (int gpus : {0, 2}) {
    const Error per_task = error({{"mig_profile", "3g.40gb"}, {"gpus_per_task", gpus}});
    EXPECT_EQ(per_task.field, "gpus_per_task");
    EXPECT_THAT(per_task.reason,
                HasSubstr("of one GPU, got gpus_per_task: " + std::to_string(gpus)));
  }
  for (int milli : {500, 1000}) {
    const Error share = error({{"mig_profile", "1g.10gb"}, {"gpu_milli", milli}});
    EXPECT_EQ(share.field, "gpu_milli");
    EXPECT_EQ(share.reason,
              "mig_profile asks for one MIG instance (1g.10gb); gpu_milli does not "
              "apply");
  }
  const Error model = error({{"mig_profile", "1g.10gb"}, {"gpu_model", {"H100", "V100"}}});
  EXPECT_EQ(model.field, "gpu_model[1]");
  EXPECT_THAT(model.reason, HasSubstr("'V100' cannot be partitioned into MIG instances"));
  EXPECT_EQ(error({{"mig_profile", "1g.10gb"}, {"gpu_model", "L4"}}).field, "gpu_model[0]");
}

TEST(JobSpecTest, AServiceMayRunItsReplicasOnMigInstances) {
  auto spec = parse_job_spec(
      "name: chat\ntenant: web\nkind: service\nmig_profile: 2g.20gb\ngpu_model: H100\n"
      "service: {max_replicas: 4, target: {p95_latency_ms: 500}}\n",
      BodyFormat::kYaml);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  ASSERT_TRUE(spec->service.has_value());
  EXPECT_EQ(spec->mig_profile, MigProfile::k2g20gb);
  auto back = job_spec_from_json(job_spec_to_json(*spec));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, *spec);
}

TEST(JobSpecTest, CoreJobOfAMigSpecTakesOneInstance) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("A100").has_value());
  ASSERT_TRUE(models.intern("V100").has_value());
  auto spec = json_spec({{"mig_profile", "3g.40gb"},
                         {"gpu_model", "A100"},
                         {"cpu_milli_per_task", 4000},
                         {"memory_mib_per_task", 1024}});
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  auto job = core_job_of(*spec, JobId{1}, TenantId{0}, QueueId{0}, 0, models);
  ASSERT_TRUE(job.has_value()) << job.error().message();
  const TaskShape& task = job->gang.task;
  EXPECT_EQ(task.mig, MigProfile::k3g40gb);
  EXPECT_EQ(task.gpu_count, 1);
  EXPECT_EQ(task.milli_per_gpu, mig_gpu_milli(MigProfile::k3g40gb));
  EXPECT_EQ(task.milli_cpu, 4000);
  EXPECT_EQ(task.memory_mib, 1024);
  EXPECT_EQ(job->gang.task_count, 1);
  // A spec built in code is checked the same way.
  JobSpec gang = *spec;
  gang.tasks = 2;
  auto refused = core_job_of(gang, JobId{1}, TenantId{0}, QueueId{0}, 0, models);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "tasks");
  JobSpec v100 = *spec;
  v100.gpu_models = {"V100"};
  refused = core_job_of(v100, JobId{1}, TenantId{0}, QueueId{0}, 0, models);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "gpu_model[0]");
  // Without mig_profile the task is a share of a GPU as before.
  spec->mig_profile.reset();
  job = core_job_of(*spec, JobId{1}, TenantId{0}, QueueId{0}, 0, models);
  ASSERT_TRUE(job.has_value()) << job.error().message();
  EXPECT_FALSE(job->gang.task.mig.has_value());
  EXPECT_EQ(job->gang.task.milli_per_gpu, 1000);
}

TEST(JobSpecTest, MaxCostIsExactMoneyAndRoundTrips) {
  for (const char* text : {"max_cost: 250", "max_cost: 12.5", "max_cost: '0.000125'"}) {
    auto spec = parse_job_spec(std::string("name: a\ntenant: vision\n") + text, BodyFormat::kYaml);
    ASSERT_TRUE(spec.has_value()) << text << ": " << spec.error().message();
    ASSERT_TRUE(spec->max_cost.has_value());
    auto back = job_spec_from_json(job_spec_to_json(*spec));
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(*back, *spec);
  }
  auto spec = parse_job_spec("name: a\ntenant: vision\nmax_cost: 12.5", BodyFormat::kYaml);
  EXPECT_EQ(spec->max_cost, 12'500'000);
}

TEST(JobSpecTest, ModelFlopsPerStepIsAPositiveNumberAndRoundTrips) {
  for (const char* text : {"model_flops_per_step: 4200000000", "model_flops_per_step: 3.4e21",
                           "model_flops_per_step: 1e30", "model_flops_per_step: 0.5"}) {
    auto spec = parse_job_spec(std::string("name: a\ntenant: vision\n") + text, BodyFormat::kYaml);
    ASSERT_TRUE(spec.has_value()) << text << ": " << spec.error().message();
    ASSERT_TRUE(spec->model_flops_per_step.has_value());
    auto back = job_spec_from_json(job_spec_to_json(*spec));
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(*back, *spec);
  }
  EXPECT_EQ(json_spec({{"model_flops_per_step", 3.4e21}})->model_flops_per_step, 3.4e21);
  EXPECT_FALSE(json_spec(Json::object())->model_flops_per_step.has_value());
  EXPECT_FALSE(job_spec_to_json(*json_spec(Json::object())).contains("model_flops_per_step"));
  for (const Json& bad : {Json(0), Json(-1.5), Json(2e30), Json("1e18"), Json(true)}) {
    auto spec = json_spec({{"model_flops_per_step", bad}});
    ASSERT_FALSE(spec.has_value()) << bad.dump();
    EXPECT_EQ(spec.error().field, "model_flops_per_step");
  }
  EXPECT_EQ(json_spec({{"model_flops_per_step", -2}}).error().reason,
            "the number -2 is out of range: more than 0 and at most 1e+30");
  auto yaml_inf =
      parse_job_spec("name: a\ntenant: vision\nmodel_flops_per_step: .inf", BodyFormat::kYaml);
  ASSERT_FALSE(yaml_inf.has_value());
  EXPECT_EQ(yaml_inf.error().field, "model_flops_per_step");
}

TEST(JobSpecTest, RuntimeEstimateMustNotExceedMaxRuntime) {
  EXPECT_TRUE(json_spec({{"runtime_estimate", "6h"}, {"max_runtime", "6h"}}).has_value());
  EXPECT_TRUE(json_spec({{"runtime_estimate", "6h"}}).has_value());
  EXPECT_TRUE(json_spec({{"max_runtime", "1h"}}).has_value());
  auto spec = json_spec({{"runtime_estimate", "6h"}, {"max_runtime", "2h30m"}});
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().field, "runtime_estimate");
  EXPECT_EQ(spec.error().reason, "6h is longer than max_runtime 2h30m");
}

TEST(JobSpecTest, IntegersAreReadWhereverTheyFit) {
  auto low = json_spec({{"priority", -1'000'000}, {"tasks", 100'000}, {"gpus_per_task", 16}});
  ASSERT_TRUE(low.has_value()) << low.error().message();
  EXPECT_EQ(low->priority, -1'000'000);
  EXPECT_EQ(low->tasks, 100'000);

  // Beyond 64 bits JSON gives a float; a huge YAML integer is read the same way.
  for (auto [body, format] :
       {std::pair{R"({"name": "j", "tenant": "t", "tasks": 1e30})", BodyFormat::kJson},
        std::pair{"name: j\ntenant: t\ntasks: 100000000000000000000000\n", BodyFormat::kYaml},
        std::pair{"name: j\ntenant: t\ntasks: 18446744073709551615\n", BodyFormat::kYaml}}) {
    auto spec = parse_job_spec(body, format);
    ASSERT_FALSE(spec.has_value()) << body;
    EXPECT_EQ(spec.error().field, "tasks");
    EXPECT_THAT(spec.error().reason, HasSubstr("is out of range 1..100000")) << body;
  }
  EXPECT_THAT(json_spec({{"tasks", 4.0}}).error().reason,
              HasSubstr("expected an integer, got the number 4.0"));
  // YAML 1.2 core integers in hex and octal.
  auto hex =
      parse_job_spec("name: j\ntenant: t\ntasks: 0x10\ngpus_per_task: 0o10\n", BodyFormat::kYaml);
  ASSERT_TRUE(hex.has_value()) << hex.error().message();
  EXPECT_EQ(hex->tasks, 16);
  EXPECT_EQ(hex->gpus_per_task, 8);
}

TEST(JobSpecTest, GpuModelIsOneNameOrAList) {
  auto one = json_spec({{"gpu_model", "H100"}});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->gpu_models, std::vector<std::string>{"H100"});
  auto none = json_spec({{"gpu_model", Json::array()}});
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->gpu_models.empty());
  Json many = Json::array();
  for (std::size_t i = 0; i <= kMaxJobGpuModels; ++i) many.push_back("M" + std::to_string(i));
  EXPECT_THAT(json_spec({{"gpu_model", many}}).error().reason,
              HasSubstr("has 65 GPU model names; at most 64"));
}

TEST(JobSpecTest, AfterOkIsAListOfJobIds) {
  auto two = json_spec({{"after_ok", {41, 42}}});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->after_ok, (std::vector<std::int64_t>{41, 42}));
  EXPECT_EQ(job_spec_to_json(*two)["after_ok"], Json({41, 42}));
  EXPECT_FALSE(job_spec_to_json(*json_spec(Json::object())).contains("after_ok"));
  EXPECT_EQ(json_spec({{"after_ok", {41, 0}}}).error().field, "after_ok[1]");
  EXPECT_THAT(json_spec({{"after_ok", {41, 41}}}).error().reason, HasSubstr("listed twice"));
  EXPECT_EQ(json_spec({{"after_ok", 41}}).error().field, "after_ok");
  EXPECT_EQ(json_spec({{"after_ok", {"41"}}}).error().field, "after_ok[0]");
  Json many = Json::array();
  for (std::size_t i = 1; i <= kMaxDependencies + 1; ++i) many.push_back(i);
  EXPECT_THAT(json_spec({{"after_ok", many}}).error().reason, HasSubstr("at most 100"));
  JobSpec other = *two;
  other.after_ok = {41};
  EXPECT_NE(other, *two);
}

TEST(JobSpecTest, ArrayIndexesAreRangesAndLists) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(*parse_array_indexes("0-3"), (V{0, 1, 2, 3}));
  EXPECT_EQ(*parse_array_indexes("7,1-2,10"), (V{1, 2, 7, 10}));
  EXPECT_EQ(*parse_array_indexes("1000000"), V{1000000});
  for (const char* bad :
       {"", "a", "3-1", "1,,2", "1-", "-1", "0-1000001", "1,1", "0-2,2", "0-10000", " 1"}) {
    auto refused = parse_array_indexes(bad);
    ASSERT_FALSE(refused.has_value()) << bad;
    EXPECT_EQ(refused.error().field, "array");
  }
  EXPECT_EQ(parse_array_indexes("0-9999")->size(), kMaxArrayJobs);
  auto spec = json_spec({{"array", "0-99"}});
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->array, "0-99");
  EXPECT_EQ(job_spec_to_json(*spec)["array"], "0-99");
  EXPECT_EQ(json_spec({{"array", 5}}).error().field, "array");
  EXPECT_THAT(json_spec({{"array", "5-1"}}).error().reason, HasSubstr("ends before it starts"));
}

TEST(JobSpecTest, UnknownKeysAreRefused) {
  const Error top = yaml_error("checkpoint: 30m");
  EXPECT_EQ(top.field, "checkpoint");
  EXPECT_THAT(top.reason, HasSubstr("unknown key; expected one of"));
  EXPECT_THAT(top.reason, HasSubstr("checkpoint_interval"));
  auto nested = json_spec({{"topology", {{"within", "node"}, {"strict", true}}}});
  ASSERT_FALSE(nested.has_value());
  EXPECT_EQ(nested.error().field, "topology.strict");
}

TEST(JobSpecTest, SizesAreBounded) {
  const std::string big(body_fields::kMaxTextBytes, 'x');
  auto fits = json_spec({{"command", {big}}, {"env", {{"A", big}}}, {"labels", {{"l", big}}}});
  EXPECT_TRUE(fits.has_value()) << fits.error().message();

  const std::string too_big(body_fields::kMaxTextBytes + 1, 'x');
  auto word = json_spec({{"command", {"python", too_big}}});
  ASSERT_FALSE(word.has_value());
  EXPECT_EQ(word.error().field, "command[1]");
  EXPECT_EQ(word.error().reason, "is 4097 bytes long; at most 4096");
  EXPECT_EQ(json_spec({{"env", {{"PATH", too_big}}}}).error().field, "env.PATH");
  EXPECT_EQ(json_spec({{"labels", {{"team", too_big}}}}).error().field, "labels.team");

  Json words = Json::array();
  for (std::size_t i = 0; i <= kMaxCommandWords; ++i) words.push_back("w");
  EXPECT_EQ(json_spec({{"command", words}}).error().reason, "has 257 command words; at most 256");
  Json env = Json::object();
  for (std::size_t i = 0; i <= kMaxEnvEntries; ++i) env["V" + std::to_string(i)] = "x";
  EXPECT_EQ(json_spec({{"env", env}}).error().reason, "has 257 env entries; at most 256");
  Json labels = Json::object();
  for (std::size_t i = 0; i <= kMaxLabels; ++i) labels["l" + std::to_string(i)] = "x";
  EXPECT_EQ(json_spec({{"labels", labels}}).error().reason, "has 65 labels; at most 64");
}

TEST(JobSpecTest, StringsAreUtf8WithoutNul) {
  auto utf8 = json_spec({{"env", {{"GREETING", "gr\xC3\xBC\xC3\x9F dich"}}}});
  EXPECT_TRUE(utf8.has_value());
  // A caller-built value may hold anything; the error message stays valid UTF-8.
  auto bad = json_spec({{"command", {"ok", "\xFF\xFE"}}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "command[1]");
  EXPECT_EQ(bad.error().reason, "is not valid UTF-8");
  auto nul = json_spec({{"env", {{"A", std::string("a\0b", 3)}}}});
  ASSERT_FALSE(nul.has_value());
  EXPECT_EQ(nul.error().reason, "must not contain NUL characters");
  auto bad_key = json_spec({{"env", {{"\xFF", "x"}}}});
  ASSERT_FALSE(bad_key.has_value());
  EXPECT_EQ(bad_key.error().field, "env.?");
  EXPECT_NO_THROW((void)Json(bad_key.error().message()).dump());
}

TEST(JobSpecTest, YamlQuotedScalarsStayStrings) {
  auto plain =
      parse_body("a: 4\nb: true\nc: ~\nd: 1.5\ne: text\nf: -7\ng: null\nh:\n", BodyFormat::kYaml);
  ASSERT_TRUE(plain.has_value()) << plain.error().message();
  EXPECT_EQ(*plain, Json({{"a", 4},
                          {"b", true},
                          {"c", nullptr},
                          {"d", 1.5},
                          {"e", "text"},
                          {"f", -7},
                          {"g", nullptr},
                          {"h", nullptr}}));
  auto quoted =
      parse_body("a: '4'\nb: \"true\"\nc: '~'\nd: !!str 1.5\ne: \"\"\n", BodyFormat::kYaml);
  ASSERT_TRUE(quoted.has_value()) << quoted.error().message();
  EXPECT_EQ(*quoted, Json({{"a", "4"}, {"b", "true"}, {"c", "~"}, {"d", "1.5"}, {"e", ""}}));

  // As a spec: a quoted number is not a number, a plain number is not a string.
  EXPECT_EQ(yaml_error("tasks: \"4\"").field, "tasks");
  EXPECT_EQ(yaml_error("env: {EPOCHS: 90}").field, "env.EPOCHS");
  auto ok =
      parse_job_spec("name: j\ntenant: t\ntasks: 4\nenv: {EPOCHS: '90'}\n", BodyFormat::kYaml);
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
}

TEST(JobSpecTest, BodiesRefuseWhatTheyCannotHold) {
  struct Case {
    std::string_view body;
    BodyFormat format;
    std::string_view field;
    std::string_view reason;
  };
  const Case cases[] = {
      {"a: 1\na: 2\n", BodyFormat::kYaml, "a", "the key is given twice (line 2, column 1)"},
      {"x: {b: [1, {c: 1, c: 2}]}", BodyFormat::kYaml, "x.b[1].c", "the key is given twice"},
      {R"({"a": 1, "a": 2})", BodyFormat::kJson, "a", "the key is given twice"},
      {R"({"x": [0, {"c": 1, "c": 2}]})", BodyFormat::kJson, "x[1].c", "the key is given twice"},
      {"a: &x 1\nb: *x\n", BodyFormat::kYaml, "b", "aliases (*name) are not supported"},
      {"a: !!int 5\n", BodyFormat::kYaml, "a", "the YAML tag 'tag:yaml.org,2002:int'"},
      {"a: !custom {b: 1}\n", BodyFormat::kYaml, "a", "the YAML tag '!custom'"},
      {"? [a, b]\n: 1\n", BodyFormat::kYaml, "body", "a key must be a string, got a list"},
      {"a: 1\n---\nb: 2\n", BodyFormat::kYaml, "body", "a second YAML document starts here"},
      {"a: [1, 2\n", BodyFormat::kYaml, "body", "malformed YAML"},
      {"a: b: c\n", BodyFormat::kYaml, "body", "malformed YAML"},
      {"a: \"\xFF\"\n", BodyFormat::kYaml, "a", "not valid UTF-8"},
      {R"({"a": 1,})", BodyFormat::kJson, "body", "malformed JSON: parse error at line 1"},
      {"{\"a\": \"\xFF\"}", BodyFormat::kJson, "body", "malformed JSON"},
      {"{} {}", BodyFormat::kJson, "body", "malformed JSON"},
      {"{\"a\": 1} // note", BodyFormat::kJson, "body", "malformed JSON"},
  };
  for (const Case& c : cases) {
    auto value = parse_body(c.body, c.format);
    ASSERT_FALSE(value.has_value()) << c.body << " -> " << value->dump();
    EXPECT_EQ(value.error().field, c.field) << c.body << " -> " << value.error().message();
    EXPECT_THAT(value.error().reason, HasSubstr(c.reason)) << c.body;
    EXPECT_NO_THROW((void)Json(value.error().message()).dump()) << c.body;
  }
}

TEST(JobSpecTest, MalformedYamlReturns) {
  // YAML::LoadAll loops forever on the first (jbeder/yaml-cpp#1319); parse_body must not.
  for (std::string_view body : {"- a\n,", "a: 1\n,", "[", "{a: [}", "'", "&", "*", "!<", "%YAML"}) {
    auto value = parse_body(body, BodyFormat::kYaml);
    if (!value) {
      EXPECT_EQ(value.error().field, "body") << body;
      EXPECT_FALSE(value.error().reason.empty()) << body;
    }
  }
}

TEST(JobSpecTest, EmptyBodiesAreNull) {
  for (std::string_view body : {"", "  \n", "# only a comment\n"}) {
    auto yaml = parse_body(body, BodyFormat::kYaml);
    ASSERT_TRUE(yaml.has_value()) << body;
    EXPECT_TRUE(yaml->is_null());
  }
  auto json = parse_body(" \r\n\t", BodyFormat::kJson);
  ASSERT_TRUE(json.has_value());
  EXPECT_TRUE(json->is_null());
}

// `depth` lists nested in each other, in JSON or YAML flow or block style.
std::string nested(int depth, std::string_view style) {
  std::string body;
  if (style == "block") {
    for (int i = 0; i < depth; ++i) {
      body += std::string(2 * i, ' ') + (i + 1 < depth ? "-\n" : "- 1\n");
    }
    return body;
  }
  for (int i = 0; i < depth; ++i) body += style == "json" ? "{\"a\": [" : "[";
  for (int i = 0; i < depth; ++i) body += style == "json" ? "]}" : "]";
  return body;
}

TEST(JobSpecTest, DeepNestingIsRefused) {
  // JSON counts two levels per step (a map holding a list).
  EXPECT_TRUE(parse_body(nested(kMaxBodyDepth / 2, "json"), BodyFormat::kJson).has_value());
  EXPECT_TRUE(parse_body(nested(kMaxBodyDepth, "flow"), BodyFormat::kYaml).has_value());
  for (int depth : {kMaxBodyDepth + 1, 10'000}) {
    for (auto [style, format] :
         {std::pair{"json", BodyFormat::kJson}, std::pair{"flow", BodyFormat::kYaml},
          std::pair{"flow", BodyFormat::kJson}}) {
      auto value = parse_body(nested(depth, style), format);
      ASSERT_FALSE(value.has_value()) << style << " " << depth;
      EXPECT_EQ(value.error().field, "body");
      EXPECT_THAT(value.error().reason, HasSubstr("nested deeper than 32 levels"));
    }
  }
  auto block = parse_body(nested(kMaxBodyDepth + 1, "block"), BodyFormat::kYaml);
  ASSERT_FALSE(block.has_value());
  EXPECT_THAT(block.error().reason, HasSubstr("nested deeper than 32 levels"));
  EXPECT_TRUE(parse_body(nested(kMaxBodyDepth, "block"), BodyFormat::kYaml).has_value());
}

TEST(JobSpecTest, SpecsRoundTripThroughJson) {
  auto full = parse_job_spec(kFullYaml, BodyFormat::kYaml);
  ASSERT_TRUE(full.has_value());
  auto minimal = parse_job_spec("name: j\ntenant: t\n", BodyFormat::kYaml);
  ASSERT_TRUE(minimal.has_value());
  auto odd = json_spec({{"runtime_estimate", 93'784},
                        {"class", "dev"},
                        {"gpu_milli", 1},
                        {"topology", {{"within", "nvlink"}}}});
  ASSERT_TRUE(odd.has_value());
  auto mig = json_spec({{"mig_profile", "4g.40gb"}, {"gpu_model", {"H100", "A100"}}});
  ASSERT_TRUE(mig.has_value());
  for (const JobSpec& spec : {*full, *minimal, *odd, *mig}) {
    const Json json = job_spec_to_json(spec);
    EXPECT_EQ(json.size(), 21U);
    auto back = job_spec_from_json(json);
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(*back, spec);
    auto from_text = parse_job_spec(json.dump(), BodyFormat::kJson);
    ASSERT_TRUE(from_text.has_value());
    EXPECT_EQ(*from_text, spec);
  }
  const Json json = job_spec_to_json(*full);
  EXPECT_EQ(json["runtime_estimate"], "6h");
  EXPECT_EQ(json["checkpoint_interval"], "30m");
  EXPECT_EQ(json["topology"], Json({{"within", "leaf"}, {"mode", "required"}}));
  EXPECT_TRUE(job_spec_to_json(*minimal)["max_runtime"].is_null());
  EXPECT_EQ(job_spec_to_json(*odd)["runtime_estimate"], "1d2h3m4s");
  // mig_profile only when set, in place of gpu_milli.
  EXPECT_FALSE(json.contains("mig_profile"));
  EXPECT_EQ(job_spec_to_json(*mig)["mig_profile"], "4g.40gb");
  EXPECT_FALSE(job_spec_to_json(*mig).contains("gpu_milli"));
}

TEST(JobSpecTest, EqualityComparesEveryField) {
  auto spec = parse_job_spec(kFullYaml, BodyFormat::kYaml);
  ASSERT_TRUE(spec.has_value());
  JobSpec other = *spec;
  EXPECT_EQ(other, *spec);
  other.topology.strength = TopologyStrength::kPreferred;
  EXPECT_NE(other, *spec);
  other = *spec;
  other.labels["x"] = "y";
  EXPECT_NE(other, *spec);
  other = *spec;
  other.mig_profile = MigProfile::k1g10gb;
  EXPECT_NE(other, *spec);
  other = *spec;
  other.model_flops_per_step = 1e15;
  EXPECT_NE(other, *spec);
}

// The example specs shipped in data/examples.
std::optional<std::string> example(std::string_view file) {
  const char* root = std::getenv("TIDEPOOL_SOURCE_DIR");
  if (root == nullptr) return std::nullopt;
  std::ifstream in(std::string(root) + "/data/examples/" + std::string(file));
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(JobSpecTest, ExamplesAreValid) {
  if (!example("train-resnet.yaml")) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  for (auto [file, format] : {std::pair{"train-resnet.yaml", BodyFormat::kYaml},
                              std::pair{"notebook.yaml", BodyFormat::kYaml},
                              std::pair{"inference.yaml", BodyFormat::kYaml},
                              std::pair{"batch.json", BodyFormat::kJson}}) {
    auto text = example(file);
    ASSERT_TRUE(text.has_value()) << file;
    auto spec = parse_job_spec(*text, format);
    ASSERT_TRUE(spec.has_value()) << file << ": " << spec.error().message();
    EXPECT_EQ(spec->tenant, "vision") << file;
    EXPECT_EQ(spec->queue, "default") << file;
  }
  auto train = parse_job_spec(*example("train-resnet.yaml"), BodyFormat::kYaml);
  EXPECT_EQ(train->tasks, 4);
  EXPECT_EQ(train->gpus_per_task, 8);
  EXPECT_EQ(train->topology.level, TopologyLevel::kLeaf);
  EXPECT_EQ(train->topology.strength, TopologyStrength::kRequired);
  EXPECT_EQ(train->checkpoint_interval, 1800);
  EXPECT_EQ(train->runtime_estimate, 6 * 3600);
  auto notebook = parse_job_spec(*example("notebook.yaml"), BodyFormat::kYaml);
  EXPECT_EQ(notebook->job_class, JobClass::kDev);
  EXPECT_EQ(notebook->gpu_milli, 500);
  auto inference = parse_job_spec(*example("inference.yaml"), BodyFormat::kYaml);
  EXPECT_EQ(inference->job_class, JobClass::kInference);
  EXPECT_EQ(inference->priority, 100);
  EXPECT_FALSE(inference->preemptible);
  auto batch = parse_job_spec(*example("batch.json"), BodyFormat::kJson);
  EXPECT_EQ(batch->job_class, JobClass::kBatch);
}

}  // namespace
}  // namespace tidepool
