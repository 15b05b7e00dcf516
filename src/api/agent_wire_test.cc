#include "api/agent_wire.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/body_fields.h"
#include "api/job_spec.h"
#include "api/test_assignments.h"
#include "api/test_bodies.h"

namespace tidepool {
namespace {

using test_support::json;
using test_support::refused;
using test_support::refused_json;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr std::int64_t kBig = std::numeric_limits<std::int64_t>::max();

// from_json(to_json(value)) gives `value` back.
template <class T, class Write, class Read>
void expect_round_trip(const T& value, Write write, Read read) {
  const Json written = write(value);
  auto back = read(written);
  ASSERT_TRUE(back.has_value()) << written.dump() << ": " << back.error().message();
  EXPECT_TRUE(*back == value) << written.dump();
  // And the text on the wire reads back the same.
  auto reparsed = read(json(written.dump()));
  ASSERT_TRUE(reparsed.has_value()) << reparsed.error().message();
  EXPECT_TRUE(*reparsed == value) << written.dump();
}

Result<NodeAssignment> read_assignment(const Json& value) {
  return node_assignment_from_json(value, "assignments[0]");
}

// --- realistic values ---

NodeRegistration h100_node() {
  NodeRegistration r{.gpu_model = "NVIDIA H100 80GB HBM3",
                     .gpus = 8,
                     .cpu_milli = 192'000,
                     .memory_mib = 2'063'807,
                     .agent_version = "0.1.0",
                     .hostname = "gpu-a1.example.net",
                     .address = "10.0.0.11",
                     .leaf = "leaf-1",
                     .spine = "spine-0",
                     .devices = {}};
  for (int g = 0; g < 8; ++g) {
    std::vector<int> peers;
    for (int p = 0; p < 8; ++p) {
      if (p != g) peers.push_back(p);
    }
    r.devices.push_back(
        GpuDevice{.index = g,
                  .uuid = "GPU-5a1c9e2f-0000-4d3b-9c1e-00000000000" + std::to_string(g),
                  .model = "NVIDIA H100 80GB HBM3",
                  .memory_mib = 81'559,
                  .pci_bus_id = "0000:1b:00." + std::to_string(g),
                  .numa_node = g / 4,
                  .nvlink_peers = peers,
                  .mig = {}});
  }
  return r;
}

NodeHeartbeat busy_heartbeat() {
  NodeHeartbeat beat{.running_jobs = {12, 13}, .healthy_gpus = 8, .gpus = {}, .replicas = {}};
  for (int g = 0; g < 8; ++g) {
    beat.gpus.push_back(GpuReading{.index = g,
                                   .model = "H100",
                                   .utilization_percent = 90 + g,
                                   .memory_used_mib = 61'000 + g,
                                   .memory_total_mib = 81'559,
                                   .power_milliwatts = 612'000,
                                   .temperature_celsius = 71,
                                   .throttle_reasons = g == 3 ? 0x4U : 0U,
                                   .ecc_errors_uncorrected = 0});
  }
  return beat;
}

using test_support::gang_task_1;

// Figures with only `figure` given.
ReplicaFigures only(std::optional<std::int64_t> ReplicaFigures::*figure, std::int64_t value) {
  ReplicaFigures figures;
  figures.*figure = value;
  return figures;
}

// What an agent read from a vLLM replica at its second scrape: every figure.
ReplicaReport busy_replica() {
  return ReplicaReport{.job = 31,
                       .run = 1,
                       .figures = {.requests_waiting_milli = 2000,
                                   .requests_in_flight_milli = 4000,
                                   .requests_per_s_milli = 12'500,
                                   .mean_latency_ms = 180,
                                   .p95_latency_ms = 420,
                                   .mean_queue_time_ms = 20,
                                   .mean_concurrency_milli = 3900}};
}

// The replica of service 7 on its node, with a preset name overridden.
ReplicaAssignment vllm_replica() {
  return ReplicaAssignment{.service = 7,
                           .port = 8001,
                           .metrics_file = "",
                           .metrics_preset = "vllm",
                           .metric_names = {{"requests_running", "my_running"}}};
}

// --- round trips ---

TEST(AgentWireTest, RegistrationRoundTrips) {
  expect_round_trip(h100_node(), node_registration_to_json, node_registration_from_json);
  expect_round_trip(NodeRegistration{}, node_registration_to_json, node_registration_from_json);

  NodeRegistration edges = h100_node();
  edges.gpus = 0;
  edges.cpu_milli = 0;
  edges.memory_mib = kBig;
  edges.hostname = std::string(256, 'h');
  edges.gpu_model.clear();
  for (int i = 0; i < 256; ++i) edges.gpu_model += "\xC3\xA9";  // 256 characters, 512 bytes
  edges.devices.resize(16);
  edges.devices[15] = GpuDevice{.index = 15,
                                .uuid = "",
                                .model = "",
                                .memory_mib = kBig,
                                .pci_bus_id = "",
                                .numa_node = 1023,
                                .nvlink_peers = {0, 15},
                                .mig = {}};
  edges.devices[14].numa_node = -1;
  // A GPU in MIG mode: a 4g.40gb, a 2g.20gb and a 1g.10gb instance.
  edges.devices[3].mig = {
      MigSlice{.uuid = "MIG-a", .profile = MigProfile::k4g40gb, .start = 0, .memory_mib = 40'192},
      MigSlice{.uuid = "MIG-b", .profile = MigProfile::k2g20gb, .start = 4, .memory_mib = 19'968},
      MigSlice{.uuid = "MIG-c", .profile = MigProfile::k1g10gb, .start = 6, .memory_mib = 9'728}};
  expect_round_trip(edges, node_registration_to_json, node_registration_from_json);
}

TEST(AgentWireTest, AGpusMigInstancesAreReadWhenTheyMakeAValidLayout) {
  const auto field = [](const std::string& mig) {
    auto read =
        node_registration_from_json(json(R"({"devices": [{"index": 0, "mig": )" + mig + "}]}"));
    return read ? std::string("(accepted)") : read.error().field;
  };
  const std::string slice = R"({"uuid": "MIG-1", "profile": "3g.40gb", "start": 4, )"
                            R"("memory_mib": 40192})";
  EXPECT_EQ(field("[" + slice + "]"), "(accepted)");
  EXPECT_EQ(field("[]"), "(accepted)");
  // Two instances on the same memory slices are no layout.
  EXPECT_EQ(field("[" + slice + ", " + slice + "]"), "devices[0].mig");
  EXPECT_EQ(field(R"([{"uuid": "M", "profile": "5g.50gb", "start": 0, "memory_mib": 1}])"),
            "devices[0].mig[0].profile");
  EXPECT_EQ(field(R"([{"uuid": "M", "profile": "1g.10gb", "start": 8, "memory_mib": 1}])"),
            "devices[0].mig[0].start");
  EXPECT_EQ(field(R"([{"uuid": "M", "profile": "1g.10gb", "memory_mib": 1}])"),
            "devices[0].mig[0].start");
  EXPECT_EQ(field(R"([{"uuid": "M", "profile": "1g.10gb", "start": 0, "memory_mib": 1, "x": 1}])"),
            "devices[0].mig[0].x");
  std::string eight = "[";
  for (int i = 0; i < 8; ++i) {
    eight += std::string(i == 0 ? "" : ", ") + R"({"uuid": "M", "profile": "1g.10gb", "start": )" +
             std::to_string(i) + R"(, "memory_mib": 1})";
  }
  EXPECT_EQ(field(eight + "]"), "devices[0].mig");
}

TEST(AgentWireTest, HeartbeatRoundTrips) {
  expect_round_trip(busy_heartbeat(), node_heartbeat_to_json, node_heartbeat_from_json);
  expect_round_trip(NodeHeartbeat{}, node_heartbeat_to_json, node_heartbeat_from_json);

  NodeHeartbeat edges{.running_jobs = {kBig, 1}, .healthy_gpus = 16, .gpus = {}, .replicas = {}};
  for (int g = 0; g < 16; ++g) {
    edges.gpus.push_back(GpuReading{.index = 15 - g,
                                    .model = g % 2 == 0 ? "" : "NVIDIA A100-SXM4-40GB",
                                    .utilization_percent = g % 2 == 0 ? 0 : 100,
                                    .memory_used_mib = g == 0 ? kBig : 0,
                                    .memory_total_mib = 0,
                                    .power_milliwatts = g == 0 ? 100'000'000 : 0,
                                    .temperature_celsius = g % 2 == 0 ? -273 : 1000,
                                    .throttle_reasons = static_cast<std::uint64_t>(kBig),
                                    .ecc_errors_uncorrected = static_cast<std::uint64_t>(kBig)});
  }
  expect_round_trip(edges, node_heartbeat_to_json, node_heartbeat_from_json);
}

TEST(AgentWireTest, HeartbeatWithReplicasRoundTrips) {
  NodeHeartbeat beat = busy_heartbeat();
  beat.replicas.push_back(busy_replica());
  // A first scrape: the gauges alone; a failed one: nothing but the replica.
  beat.replicas.push_back(ReplicaReport{
      .job = 32, .run = 0, .figures = only(&ReplicaFigures::requests_in_flight_milli, 1)});
  beat.replicas.back().figures.requests_waiting_milli = 0;
  beat.replicas.push_back(ReplicaReport{.job = 33, .run = 4, .figures = {}});
  // The same job in another run is another replica.
  beat.replicas.push_back(ReplicaReport{.job = 31, .run = 2, .figures = {}});
  expect_round_trip(beat, node_heartbeat_to_json, node_heartbeat_from_json);

  NodeHeartbeat edges{};
  ReplicaReport top{.job = kBig, .run = kBig, .figures = {}};
  top.figures = {.requests_waiting_milli = kMaxReplicaFigure,
                 .requests_in_flight_milli = kMaxReplicaFigure,
                 .requests_per_s_milli = kMaxReplicaFigure,
                 .mean_latency_ms = kMaxReplicaFigure,
                 .p95_latency_ms = kMaxReplicaFigure,
                 .mean_queue_time_ms = kMaxReplicaFigure,
                 .mean_concurrency_milli = kMaxReplicaFigure};
  edges.replicas.push_back(top);
  for (std::size_t i = 1; i < kMaxHeartbeatJobs; ++i) {
    edges.replicas.push_back(ReplicaReport{.job = static_cast<std::int64_t>(i),
                                           .run = 0,
                                           .figures = only(&ReplicaFigures::mean_latency_ms, 0)});
  }
  expect_round_trip(edges, node_heartbeat_to_json, node_heartbeat_from_json);
}

StepStats two_steps() {
  StepStats stats;
  stats.add({.step = 9,
             .step_us = 50'000,
             .compute_us = 30'000,
             .allreduce_us = 18'000,
             .allreduce_bytes = 4'194'304});
  stats.add({.step = 10,
             .step_us = 52'000,
             .compute_us = 31'000,
             .allreduce_us = 19'000,
             .allreduce_bytes = 4'194'304});
  stats.refused_lines = 1;
  return stats;
}

TEST(AgentWireTest, HeartbeatWithStepsRoundTrips) {
  NodeHeartbeat beat = busy_heartbeat();
  beat.steps.push_back(TaskSteps{.job = 12, .run = 2, .task = 0, .stats = two_steps()});
  beat.steps.push_back(TaskSteps{.job = 12, .run = 2, .task = 1, .stats = {}});
  beat.steps.push_back(TaskSteps{.job = kBig, .run = kBig, .task = 99'999, .stats = two_steps()});
  expect_round_trip(beat, node_heartbeat_to_json, node_heartbeat_from_json);
  EXPECT_FALSE(node_heartbeat_to_json(busy_heartbeat()).contains("steps"));
}

TEST(NodeHeartbeatTest, NamesTheStepFieldThatIsWrong) {
  const auto read = node_heartbeat_from_json;
  const Json stats = step_stats_to_json(two_steps());
  const auto with = [&](Json entry) { return Json{{"steps", Json::array({std::move(entry)})}}; };
  const Json good = {{"job", 12}, {"run", 2}, {"task", 0}, {"stats", stats}};
  EXPECT_TRUE(read(with(good)).has_value());
  EXPECT_EQ(refused(read, R"({"steps": {"job": 1}})").field, "steps");
  EXPECT_EQ(refused(read, R"({"steps": [7]})").field, "steps[0]");
  for (const char* key : {"job", "run", "task", "stats"}) {
    Json missing = good;
    missing.erase(key);
    EXPECT_EQ(read(with(missing)).error().field, fmt::format("steps[0].{}", key));
  }
  Json bad = good;
  bad["run"] = 0;
  EXPECT_EQ(read(with(bad)).error().field, "steps[0].run");
  bad = good;
  bad["task"] = 100'000;
  EXPECT_EQ(read(with(bad)).error().field, "steps[0].task");
  bad = good;
  bad["stats"]["compute_us"] = -1;
  EXPECT_EQ(read(with(bad)).error().field, "steps[0].stats.compute_us");
  bad = good;
  bad["stats"]["buckets"][0][1] = "7";
  EXPECT_EQ(read(with(bad)).error().field, "steps[0].stats.buckets[0][1]");
  bad = good;
  bad["extra"] = true;
  EXPECT_EQ(read(with(bad)).error().field, "steps[0].extra");
  EXPECT_EQ(read(Json{{"steps", {good, good}}}).error().reason,
            "the steps of job 12 run 2 task 0 are listed twice");
  Json many = Json::array();
  for (std::size_t i = 0; i <= kMaxHeartbeatSteps; ++i) {
    many.push_back({{"job", i + 1}, {"run", 1}, {"task", 0}, {"stats", stats}});
  }
  EXPECT_EQ(read(Json{{"steps", many}}).error().reason, "has 4097 step reports; at most 4096");
}

TEST(AgentWireTest, AssignmentAndHeartbeatReplyRoundTrip) {
  expect_round_trip(gang_task_1(), node_assignment_to_json, read_assignment);

  NodeAssignment edges{.job = kBig,
                       .run = 0,
                       .name = "",
                       .tenant = "",
                       .world_size = 100'000,
                       .tasks = {},
                       .master_addr = "",
                       .master_port = 65'535,
                       .command = {""},
                       .env = {},
                       .working_dir = "",
                       .cpu_milli_per_task = kMaxCpuMilliPerTask,
                       .memory_mib_per_task = kMaxMemoryMibPerTask,
                       .gpu_milli = 1,
                       .preemptible = false,
                       .checkpoints = false,
                       .resume_from = std::string(4096, 'r'),
                       .checkpoint_step = std::nullopt,
                       .replica = std::nullopt};
  edges.tasks.push_back(AssignedTask{.index = 99'999, .gpus = {}});
  for (int i = 0; i < 255; ++i) edges.tasks.push_back(AssignedTask{.index = i, .gpus = {i % 16}});
  for (int i = 0; i < 256; ++i) edges.env["V_" + std::to_string(i)] = std::string(i, 'v');
  edges.command.resize(256, std::string(4096, 'c'));
  expect_round_trip(edges, node_assignment_to_json, read_assignment);
  edges.checkpoint_step = 0;
  expect_round_trip(edges, node_assignment_to_json, read_assignment);

  const HeartbeatReply reply{.node = "gpu-a1",
                             .jobs = {12, kBig},
                             .assignments = {gang_task_1(), edges},
                             .heartbeat_timeout_ms = 30'000,
                             .rejected = {}};
  expect_round_trip(reply, heartbeat_reply_to_json, heartbeat_reply_from_json);
  expect_round_trip(HeartbeatReply{}, heartbeat_reply_to_json, heartbeat_reply_from_json);
}

TEST(AgentWireTest, AssignmentOnAMigInstanceRoundTrips) {
  expect_round_trip(test_support::mig_notebook(), node_assignment_to_json, read_assignment);
  // Every profile at each of its starts, and the longest uuid.
  for (const MigProfileSpec& profile : mig_profiles()) {
    for (int start = 0; start < kMigMemorySlices; ++start) {
      if (((profile.starts >> start) & 1U) == 0) continue;
      NodeAssignment a = test_support::mig_notebook();
      a.tasks[0].gpus = {15};
      a.tasks[0].mig = AssignedMig{
          .profile = profile.profile, .start = start, .uuid = std::string(kMaxMigUuid, 'M')};
      expect_round_trip(a, node_assignment_to_json, read_assignment);
    }
  }
  // One task on an instance beside another on whole GPUs, in one reply.
  NodeAssignment mixed = gang_task_1();
  mixed.tasks.push_back(test_support::mig_notebook().tasks[0]);
  const HeartbeatReply reply{.node = "gpu-a1",
                             .jobs = {12, 14},
                             .assignments = {mixed, test_support::mig_notebook()},
                             .heartbeat_timeout_ms = std::nullopt,
                             .rejected = {}};
  expect_round_trip(reply, heartbeat_reply_to_json, heartbeat_reply_from_json);
}

TEST(AgentWireTest, ReplicaAssignmentRoundTrips) {
  NodeAssignment served = gang_task_1();
  served.world_size = 1;
  served.tasks = {AssignedTask{.index = 0, .gpus = {3}}};
  served.replica = vllm_replica();
  expect_round_trip(served, node_assignment_to_json, read_assignment);

  // A replica that writes its figures to a file, with names of its own.
  served.replica = ReplicaAssignment{.service = kBig,
                                     .port = 0,
                                     .metrics_file = "/" + std::string(4095, 'm'),
                                     .metrics_preset = std::string(64, 'p'),
                                     .metric_names = {}};
  for (int i = 0; i < 32; ++i) {
    served.replica->metric_names["key_" + std::to_string(i)] = std::string(256, 'n');
  }
  expect_round_trip(served, node_assignment_to_json, read_assignment);
  served.replica = ReplicaAssignment{
      .service = 1, .port = 65'535, .metrics_file = "", .metrics_preset = "", .metric_names = {}};
  expect_round_trip(served, node_assignment_to_json, read_assignment);

  const HeartbeatReply reply{.node = "gpu-a1",
                             .jobs = {12},
                             .assignments = {served},
                             .heartbeat_timeout_ms = std::nullopt,
                             .rejected = {}};
  expect_round_trip(reply, heartbeat_reply_to_json, heartbeat_reply_from_json);
}

TEST(AgentWireTest, ReportsRoundTrip) {
  const JobStatusReport exited{
      .state = "failed", .exit_code = 137, .message = "killed by SIGKILL", .task = 3, .run = 2};
  expect_round_trip(exited, job_status_report_to_json, job_status_report_from_json);
  for (const char* state : {"running", "succeeded", "failed"}) {
    JobStatusReport bare;
    bare.state = state;
    expect_round_trip(bare, job_status_report_to_json, job_status_report_from_json);
  }
  expect_round_trip(JobStatusReport{.state = "failed",
                                    .exit_code = -255,
                                    .message = std::string(4096, 'm'),
                                    .task = 99'999,
                                    .run = kBig},
                    job_status_report_to_json, job_status_report_from_json);
  expect_round_trip(
      JobStatusReport{.state = "succeeded", .exit_code = 255, .message = "", .task = 0, .run = 1},
      job_status_report_to_json, job_status_report_from_json);
  expect_round_trip(JobStatusReport{.state = "succeeded",
                                    .exit_code = 0,
                                    .message = "",
                                    .task = 1,
                                    .run = 3,
                                    .steps = two_steps()},
                    job_status_report_to_json, job_status_report_from_json);

  const CheckpointReport checkpoint{
      .step = 1200, .path = "/ckpt/12/step-1200", .note = "epoch 3", .run = 2};
  expect_round_trip(checkpoint, checkpoint_report_to_json, checkpoint_report_from_json);
  expect_round_trip(CheckpointReport{}, checkpoint_report_to_json, checkpoint_report_from_json);
  expect_round_trip(
      CheckpointReport{
          .step = 0, .path = std::string(4096, 'p'), .note = "\xE2\x9C\x93 done", .run = kBig},
      checkpoint_report_to_json, checkpoint_report_from_json);
}

TEST(AgentWireTest, LogRepliesRoundTrip) {
  expect_round_trip(LogAppendReply{.job = 12, .task = 0, .run = 2, .size = 1'049'600},
                    log_append_reply_to_json, log_append_reply_from_json);
  expect_round_trip(
      LogAppendReply{.job = kBig, .task = std::numeric_limits<int>::max(), .run = 0, .size = 0},
      log_append_reply_to_json, log_append_reply_from_json);
  expect_round_trip(LogConflict{.size = 1'048'576}, log_conflict_to_json, log_conflict_from_json);
  expect_round_trip(LogConflict{.size = 0}, log_conflict_to_json, log_conflict_from_json);
}

// --- the same JSON on both sides: the shapes of agent_wire.h, written out by hand ---

TEST(AgentWireGoldenTest, Registration) {
  const Json golden = json(R"({
    "gpu_model": "H100", "gpus": 2, "cpu_milli": 96000, "memory_mib": 1048576,
    "agent_version": "0.1.0", "hostname": "gpu-a1", "address": "10.0.0.11",
    "leaf": "leaf-1", "spine": "spine-0",
    "devices": [
      {"index": 0, "uuid": "0", "model": "H100", "memory_mib": 81559, "pci_bus_id": "",
       "numa_node": -1, "nvlink_peers": [1]},
      {"index": 1, "uuid": "1", "model": "H100", "memory_mib": 81559, "pci_bus_id": "",
       "numa_node": -1, "nvlink_peers": [0]}]})");
  const NodeRegistration sent{.gpu_model = "H100",
                              .gpus = 2,
                              .cpu_milli = 96'000,
                              .memory_mib = 1'048'576,
                              .agent_version = "0.1.0",
                              .hostname = "gpu-a1",
                              .address = "10.0.0.11",
                              .leaf = "leaf-1",
                              .spine = "spine-0",
                              .devices = {GpuDevice{.index = 0,
                                                    .uuid = "0",
                                                    .model = "H100",
                                                    .memory_mib = 81'559,
                                                    .pci_bus_id = "",
                                                    .numa_node = -1,
                                                    .nvlink_peers = {1},
                                                    .mig = {}},
                                          GpuDevice{.index = 1,
                                                    .uuid = "1",
                                                    .model = "H100",
                                                    .memory_mib = 81'559,
                                                    .pci_bus_id = "",
                                                    .numa_node = -1,
                                                    .nvlink_peers = {0},
                                                    .mig = {}}}};
  EXPECT_EQ(node_registration_to_json(sent), golden);
  auto read = node_registration_from_json(golden);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, sent);
}

TEST(AgentWireGoldenTest, Heartbeat) {
  const Json golden = json(R"({
    "running_jobs": [12, 13], "healthy_gpus": 1,
    "gpus": [{"index": 0, "model": "H100", "utilization_percent": 93, "memory_used_mib": 61000,
              "memory_total_mib": 81559, "power_milliwatts": 612000, "temperature_celsius": 71,
              "throttle_reasons": 4, "ecc_errors_uncorrected": 0}],
    "replicas": []})");
  const NodeHeartbeat sent{.running_jobs = {12, 13},
                           .healthy_gpus = 1,
                           .gpus = {GpuReading{.index = 0,
                                               .model = "H100",
                                               .utilization_percent = 93,
                                               .memory_used_mib = 61'000,
                                               .memory_total_mib = 81'559,
                                               .power_milliwatts = 612'000,
                                               .temperature_celsius = 71,
                                               .throttle_reasons = 4,
                                               .ecc_errors_uncorrected = 0}},
                           .replicas = {}};
  EXPECT_EQ(node_heartbeat_to_json(sent), golden);
  auto read = node_heartbeat_from_json(golden);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, sent);
  // Before its first GPU sample an agent sends no GPUs.
  EXPECT_EQ(node_heartbeat_to_json(
                NodeHeartbeat{.running_jobs = {}, .healthy_gpus = 0, .gpus = {}, .replicas = {}}),
            json(R"({"running_jobs": [], "healthy_gpus": 0, "gpus": [], "replicas": []})"));
}

TEST(AgentWireGoldenTest, HeartbeatReplicas) {
  const Json golden = json(R"({
    "running_jobs": [31, 32], "gpus": [],
    "replicas": [{"job": 31, "run": 1, "requests_waiting_milli": 2000,
                  "requests_in_flight_milli": 4000, "requests_per_s_milli": 12500,
                  "mean_latency_ms": 180, "p95_latency_ms": 420, "mean_queue_time_ms": 20,
                  "mean_concurrency_milli": 3900},
                 {"job": 32, "run": 0, "requests_waiting_milli": 0}]})");
  const NodeHeartbeat sent{
      .running_jobs = {31, 32},
      .healthy_gpus = std::nullopt,
      .gpus = {},
      .replicas = {
          busy_replica(),
          ReplicaReport{
              .job = 32, .run = 0, .figures = only(&ReplicaFigures::requests_waiting_milli, 0)}}};
  EXPECT_EQ(node_heartbeat_to_json(sent), golden);
  auto read = node_heartbeat_from_json(golden);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, sent);
}

TEST(AgentWireGoldenTest, HeartbeatReply) {
  const Json golden = json(R"({
    "node": "gpu-a1", "jobs": [12], "heartbeat_timeout_ms": 30000,
    "assignments": [{
      "job": 12, "run": 2, "name": "bert", "tenant": "vision", "world_size": 4,
      "tasks": [{"index": 1, "gpus": [4, 5]}], "master_addr": "10.0.0.7", "master_port": 20012,
      "command": ["python", "train.py", "--epochs=3"],
      "env": {"EPOCHS": "3", "RANK": "99", "PATH": "/opt/bin"}, "working_dir": "/data",
      "cpu_milli_per_task": 4000, "memory_mib_per_task": 1024, "gpu_milli": 1000,
      "preemptible": true, "checkpoints": true, "resume_from": "/ckpt/12/step-40",
      "checkpoint_step": 40}]})");
  const HeartbeatReply sent{.node = "gpu-a1",
                            .jobs = {12},
                            .assignments = {gang_task_1()},
                            .heartbeat_timeout_ms = 30'000,
                            .rejected = {}};
  EXPECT_EQ(heartbeat_reply_to_json(sent), golden);
  auto read = heartbeat_reply_from_json(golden);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, sent);

  // A job that never checkpointed: its step is null.
  NodeAssignment fresh = gang_task_1();
  fresh.checkpoint_step.reset();
  fresh.resume_from.clear();
  EXPECT_EQ(node_assignment_to_json(fresh)["checkpoint_step"], Json(nullptr));
  EXPECT_EQ(node_assignment_to_json(fresh)["resume_from"], "");
  // A job that is no service's replica has no "replica".
  EXPECT_FALSE(node_assignment_to_json(fresh).contains("replica"));
}

TEST(AgentWireGoldenTest, MigTask) {
  const Json written = node_assignment_to_json(test_support::mig_notebook());
  EXPECT_EQ(written["tasks"], json(R"([{"index": 0, "gpus": [1], "mig": {"profile": "3g.40gb",
      "start": 4, "uuid": "MIG-4f1e2d3c-5b6a-5978-8695-a4b3c2d1e0f9"}}])"));
  // A task on whole GPUs has no "mig"; a null one is none.
  EXPECT_FALSE(node_assignment_to_json(gang_task_1())["tasks"][0].contains("mig"));
  Json sent = node_assignment_to_json(gang_task_1());
  sent["tasks"][0]["mig"] = nullptr;
  EXPECT_EQ(read_assignment(sent).value(), gang_task_1());
  // A newer server's keys in it are ignored, as elsewhere in a reply.
  sent = written;
  sent["tasks"][0]["mig"]["memory_mib"] = 40'192;
  EXPECT_EQ(read_assignment(sent).value(), test_support::mig_notebook());
}

TEST(AgentWireGoldenTest, ReplicaAssignment) {
  NodeAssignment served = gang_task_1();
  served.replica = vllm_replica();
  const Json written = node_assignment_to_json(served);
  EXPECT_EQ(written["replica"], json(R"({"service": 7, "port": 8001, "metrics_file": "",
      "metrics_preset": "vllm", "metric_names": {"requests_running": "my_running"}})"));
  Json sent = node_assignment_to_json(gang_task_1());
  sent["replica"] = json(R"({"service": 7, "port": 8001, "metrics_preset": "vllm",
                             "metric_names": {"requests_running": "my_running"}})");
  auto read = read_assignment(sent);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, served);
  // Only the service is needed; a null replica is none.
  sent["replica"] = json(R"({"service": 7})");
  read = read_assignment(sent);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(read->replica, (ReplicaAssignment{.service = 7,
                                              .port = 0,
                                              .metrics_file = "",
                                              .metrics_preset = "vllm",
                                              .metric_names = {}}));
  sent["replica"] = nullptr;
  EXPECT_EQ(read_assignment(sent).value(), gang_task_1());
}

TEST(AgentWireGoldenTest, Reports) {
  const Json exited = json(R"({"state": "failed", "exit_code": 137,
                               "message": "killed by SIGKILL", "task": 3, "run": 2})");
  const JobStatusReport exit_report{
      .state = "failed", .exit_code = 137, .message = "killed by SIGKILL", .task = 3, .run = 2};
  EXPECT_EQ(job_status_report_to_json(exit_report), exited);
  EXPECT_EQ(job_status_report_from_json(exited).value(), exit_report);

  // An assignment the agent cannot run: the job fails, without a task or an exit code.
  const Json cannot_run = json(R"({"state": "failed", "message": "no command", "run": 2})");
  const JobStatusReport cannot{.state = "failed",
                               .exit_code = std::nullopt,
                               .message = "no command",
                               .task = std::nullopt,
                               .run = 2};
  EXPECT_EQ(job_status_report_to_json(cannot), cannot_run);
  EXPECT_EQ(job_status_report_from_json(cannot_run).value(), cannot);

  const Json checkpoint =
      json(R"({"step": 1200, "path": "/ckpt/12/step-1200", "note": "epoch 3", "run": 2})");
  const CheckpointReport report{
      .step = 1200, .path = "/ckpt/12/step-1200", .note = "epoch 3", .run = 2};
  EXPECT_EQ(checkpoint_report_to_json(report), checkpoint);
  EXPECT_EQ(checkpoint_report_from_json(checkpoint).value(), report);
  // `tidepool checkpoint --step 5`: only what was given.
  EXPECT_EQ(checkpoint_report_to_json(
                CheckpointReport{.step = 5, .path = "", .note = "", .run = std::nullopt}),
            json(R"({"step": 5})"));
}

TEST(AgentWireGoldenTest, LogReplies) {
  const Json appended = json(R"({"job": 12, "task": 0, "run": 2, "size": 1049600})");
  const LogAppendReply reply{.job = 12, .task = 0, .run = 2, .size = 1'049'600};
  EXPECT_EQ(log_append_reply_to_json(reply), appended);
  EXPECT_EQ(log_append_reply_from_json(appended).value(), reply);

  // The 409 is an error body with the size added; the agent reads only the size.
  const Json conflict = json(R"({"error": "conflict", "field": "offset",
                                 "reason": "the log holds 1048576 bytes", "size": 1048576})");
  EXPECT_EQ(log_conflict_from_json(conflict).value(), LogConflict{.size = 1'048'576});
  EXPECT_EQ(log_conflict_to_json(LogConflict{.size = 1'048'576}), json(R"({"size": 1048576})"));
}

// --- refusals, naming the field ---

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
  EXPECT_EQ(refused(read, R"({"state": "failed", "task": 100000})").field, "task");
  EXPECT_EQ(refused(read, R"({"state": "failed", "run": 0})").field, "run");
  EXPECT_EQ(refused(read, R"({"state": "failed", "code": 1})").field, "code");
  const Json steps = step_stats_to_json(two_steps());
  EXPECT_EQ(read(Json{{"state", "failed"}, {"task", 0}, {"run", 1}, {"steps", 5}}).error().field,
            "steps");
  Json bad_steps = steps;
  bad_steps["allreduce_us"] = 1'000'000;
  EXPECT_EQ(
      read(Json{{"state", "failed"}, {"task", 0}, {"run", 1}, {"steps", bad_steps}}).error().field,
      "steps.allreduce_us");
  EXPECT_EQ(read(Json{{"state", "failed"}, {"steps", steps}}).error().reason,
            "are a task's: they need task and run");
  EXPECT_THAT(refused(read, R"([1])").reason, HasSubstr("expected a map of state"));
  Json long_message = {{"state", "failed"}, {"message", std::string(4097, 'x')}};
  EXPECT_EQ(read(long_message).error().reason, "is 4097 bytes long; at most 4096");
}

TEST(CheckpointReportTest, EveryFieldIsOptional) {
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
  EXPECT_EQ(refused(read, R"({"path": 7})").field, "path");
  EXPECT_EQ(refused(read, R"({"run": 0})").field, "run");
  EXPECT_EQ(refused(read, R"({"at_ms": 1})").field, "at_ms");
  EXPECT_EQ(refused_json(read, Json{{"path", std::string(4097, 'p')}}).field, "path");
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
  EXPECT_EQ(refused_json(read, Json{{"address", std::string(257, 'a')}}).reason,
            "is 257 characters long; at most 256");
  EXPECT_EQ(refused(read, R"({"devices": [{"index": 16}]})").field, "devices[0].index");
  EXPECT_EQ(refused(read, R"({"devices": [{"numa_node": -2}]})").field, "devices[0].numa_node");
  EXPECT_EQ(refused(read, R"({"devices": [{"nvlink_peers": [1, "2"]}]})").field,
            "devices[0].nvlink_peers[1]");
  EXPECT_EQ(refused(read, R"({"devices": [{"serial": "x"}]})").field, "devices[0].serial");
  EXPECT_EQ(refused(read, R"({"devices": {"index": 0}})").field, "devices");
  EXPECT_EQ(refused(read, R"({"rack": "r1"})").field, "rack");
}

TEST(NodeHeartbeatTest, JobIdsArePositiveAndUnique) {
  auto beat = node_heartbeat_from_json(json(R"({"running_jobs": [12, 13], "healthy_gpus": 8})"));
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->running_jobs, (std::vector<std::int64_t>{12, 13}));
  EXPECT_EQ(beat->healthy_gpus, 8);
  EXPECT_TRUE(node_heartbeat_from_json(Json())->running_jobs.empty());
  // An older agent sent null before its first sample.
  EXPECT_TRUE(node_heartbeat_from_json(json(R"({"gpus": null})"))->gpus.empty());

  const auto read = node_heartbeat_from_json;
  EXPECT_EQ(refused(read, R"({"running_jobs": [1, 0]})").field, "running_jobs[1]");
  EXPECT_EQ(refused(read, R"({"running_jobs": [1, 2, 1]})").reason, "job 1 is listed twice");
  EXPECT_EQ(refused(read, R"({"running_jobs": 5})").field, "running_jobs");
  EXPECT_EQ(refused(read, R"({"healthy_gpus": 99})").field, "healthy_gpus");
  Json many = Json::array();
  for (std::size_t i = 1; i <= kMaxHeartbeatJobs + 1; ++i) many.push_back(i);
  EXPECT_EQ(read(Json{{"running_jobs", many}}).error().reason, "has 4097 job ids; at most 4096");
}

TEST(NodeHeartbeatTest, NamesTheGpuFigureThatIsWrong) {
  const auto read = node_heartbeat_from_json;
  EXPECT_EQ(refused(read, R"({"gpus": [{"utilization_percent": 101}]})").field,
            "gpus[0].utilization_percent");
  EXPECT_EQ(refused(read, R"({"gpus": [{"index": 0}, {"temperature_celsius": -274}]})").field,
            "gpus[1].temperature_celsius");
  EXPECT_EQ(refused(read, R"({"gpus": [{"index": 0}, {"index": 1}, {"index": 0}]})").reason,
            "GPU 0 is listed twice");
  EXPECT_EQ(refused(read, R"({"gpus": [{"memory_used_mib": -1}]})").field,
            "gpus[0].memory_used_mib");
  EXPECT_EQ(refused(read, R"({"gpus": [{"power_milliwatts": 100000001}]})").field,
            "gpus[0].power_milliwatts");
  // A mask past 2^63 is refused (throttle_reasons is a uint64_t the server reads as int64).
  EXPECT_EQ(refused(read, R"({"gpus": [{"throttle_reasons": 9223372036854775808}]})").field,
            "gpus[0].throttle_reasons");
  EXPECT_EQ(refused(read, R"({"gpus": [{"ecc_errors_uncorrected": "0"}]})").field,
            "gpus[0].ecc_errors_uncorrected");
  EXPECT_EQ(refused(read, R"({"gpus": [{"fan_percent": 40}]})").field, "gpus[0].fan_percent");
  EXPECT_EQ(refused(read, R"({"gpus": [7]})").field, "gpus[0]");
}

TEST(NodeHeartbeatTest, NamesTheReplicaFieldThatIsWrong) {
  const auto read = node_heartbeat_from_json;
  EXPECT_EQ(refused(read, R"({"replicas": {"job": 1}})").field, "replicas");
  EXPECT_EQ(refused(read, R"({"replicas": [7]})").field, "replicas[0]");
  EXPECT_EQ(refused(read, R"({"replicas": [{"run": 1}]})").field, "replicas[0].job");
  EXPECT_EQ(refused(read, R"({"replicas": [{"run": 1}]})").reason, "the key is missing");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1}, {"job": 0}]})").field, "replicas[1].job");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "run": -1}]})").field, "replicas[0].run");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "run": 2}, {"job": 1, "run": 2}]})").reason,
            "the replica of job 1 run 2 is listed twice");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "p95_latency_ms": -1}]})").field,
            "replicas[0].p95_latency_ms");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "mean_latency_ms": 1.5}]})").field,
            "replicas[0].mean_latency_ms");
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "requests_per_s_milli": "3"}]})").field,
            "replicas[0].requests_per_s_milli");
  EXPECT_EQ(
      refused(read, R"({"replicas": [{"job": 1, "requests_waiting_milli": 1000000000000000001}]})")
          .field,
      "replicas[0].requests_waiting_milli");
  // Unknown keys of an entry are errors, as in the agent's other requests.
  EXPECT_EQ(refused(read, R"({"replicas": [{"job": 1, "tokens_per_s": 5}]})").field,
            "replicas[0].tokens_per_s");
  // null is no replicas; at most kMaxHeartbeatJobs of them.
  EXPECT_TRUE(read(json(R"({"replicas": null})"))->replicas.empty());
  Json many = Json::array();
  for (std::size_t i = 1; i <= kMaxHeartbeatJobs + 1; ++i) many.push_back({{"job", i}});
  EXPECT_EQ(read(Json{{"replicas", many}}).error().reason, "has 4097 replicas; at most 4096");
}

TEST(NodeAssignmentTest, NamesTheFieldThatIsWrong) {
  const auto error_field = [](const Json& assignment) {
    auto read = read_assignment(assignment);
    return read ? std::string("accepted") : read.error().field;
  };
  const Json good = node_assignment_to_json(gang_task_1());
  auto with = [&](std::string_view key, Json value) {
    Json a = good;
    a[std::string(key)] = std::move(value);
    return a;
  };
  auto without = [&](std::string_view key) {
    Json a = good;
    a.erase(std::string(key));
    return a;
  };
  EXPECT_EQ(error_field(good), "accepted");
  EXPECT_EQ(error_field(with("world_size", "four")), "assignments[0].world_size");
  EXPECT_EQ(error_field(with("world_size", 0)), "assignments[0].world_size");
  EXPECT_EQ(error_field(with("command", Json::array())), "assignments[0].command");
  EXPECT_EQ(read_assignment(without("command")).error().reason, "the job has no command to run");
  EXPECT_EQ(error_field(with("command", {"python", 3})), "assignments[0].command[1]");
  EXPECT_EQ(error_field(without("job")), "assignments[0].job");
  EXPECT_EQ(read_assignment(without("job")).error().reason, "the key is missing");
  EXPECT_EQ(error_field(with("job", 0)), "assignments[0].job");
  EXPECT_EQ(error_field(with("run", -1)), "assignments[0].run");
  EXPECT_EQ(error_field(with("name", 5)), "assignments[0].name");
  EXPECT_EQ(error_field(with("tasks", Json{{"index", 1}})), "assignments[0].tasks");
  EXPECT_EQ(error_field(with("tasks", Json::array({Json{{"index", 1}, {"gpus", {16}}}}))),
            "assignments[0].tasks[0].gpus[0]");
  EXPECT_EQ(error_field(with("tasks", Json::array({Json{{"index", 4}}}))),
            "assignments[0].tasks[0].index");
  EXPECT_EQ(read_assignment(with("tasks", Json::array({Json{{"index", 4}}}))).error().reason,
            "4 is not a task of a job of 4");
  EXPECT_EQ(read_assignment(with("tasks", Json::array({Json{{"index", 1}}, Json{{"index", 1}}})))
                .error()
                .reason,
            "task 1 is listed twice");
  EXPECT_EQ(error_field(with("master_port", 65'536)), "assignments[0].master_port");
  EXPECT_EQ(error_field(with("env", Json{{"1BAD", "x"}})), "assignments[0].env.1BAD");
  EXPECT_EQ(error_field(with("env", Json{{"OK", 1}})), "assignments[0].env.OK");
  EXPECT_EQ(error_field(with("working_dir", std::string(4097, 'w'))), "assignments[0].working_dir");
  EXPECT_EQ(error_field(with("cpu_milli_per_task", -1)), "assignments[0].cpu_milli_per_task");
  EXPECT_EQ(error_field(with("memory_mib_per_task", kMaxMemoryMibPerTask + 1)),
            "assignments[0].memory_mib_per_task");
  EXPECT_EQ(error_field(with("gpu_milli", 0)), "assignments[0].gpu_milli");
  EXPECT_EQ(error_field(with("preemptible", "yes")), "assignments[0].preemptible");
  EXPECT_EQ(error_field(with("checkpoints", 1)), "assignments[0].checkpoints");
  EXPECT_EQ(error_field(with("resume_from", false)), "assignments[0].resume_from");
  EXPECT_EQ(error_field(with("checkpoint_step", -1)), "assignments[0].checkpoint_step");
  EXPECT_EQ(error_field("not an object"), "assignments[0]");

  // The replica's side, when there is one.
  const Json replica = {{"service", 7}, {"port", 8001}};
  auto replica_with = [&](std::string_view key, Json value) {
    Json r = replica;
    r[std::string(key)] = std::move(value);
    return with("replica", r);
  };
  EXPECT_EQ(error_field(with("replica", replica)), "accepted");
  EXPECT_EQ(error_field(with("replica", 7)), "assignments[0].replica");
  EXPECT_EQ(error_field(replica_with("service", 0)), "assignments[0].replica.service");
  // Without its service (which a fuzzer found: it was written back as service 0).
  EXPECT_EQ(error_field(with("replica", {{"port", 8001}})), "assignments[0].replica.service");
  EXPECT_EQ(error_field(replica_with("service", "7")), "assignments[0].replica.service");
  EXPECT_EQ(error_field(replica_with("port", 65'536)), "assignments[0].replica.port");
  EXPECT_EQ(error_field(replica_with("port", -1)), "assignments[0].replica.port");
  EXPECT_EQ(error_field(replica_with("metrics_file", "m.prom")),
            "assignments[0].replica.metrics_file");
  EXPECT_THAT(read_assignment(replica_with("metrics_file", "m.prom")).error().reason,
              HasSubstr("not an absolute path"));
  EXPECT_EQ(error_field(replica_with("metrics_file", "/" + std::string(4096, 'm'))),
            "assignments[0].replica.metrics_file");
  EXPECT_EQ(error_field(replica_with("metrics_file", 3)), "assignments[0].replica.metrics_file");
  EXPECT_EQ(error_field(replica_with("metrics_preset", std::string(65, 'p'))),
            "assignments[0].replica.metrics_preset");
  EXPECT_EQ(error_field(replica_with("metric_names", Json::array())),
            "assignments[0].replica.metric_names");
  EXPECT_EQ(error_field(replica_with("metric_names", Json{{"requests_running", 5}})),
            "assignments[0].replica.metric_names.requests_running");
  EXPECT_EQ(error_field(replica_with("metric_names", Json{{"k", std::string(257, 'n')}})),
            "assignments[0].replica.metric_names.k");
  EXPECT_EQ(error_field(replica_with("metric_names", Json{{std::string(257, 'k'), "n"}})),
            body_fields::key_path("assignments[0].replica.metric_names", std::string(257, 'k')));
  Json names = Json::object();
  for (int i = 0; i < 33; ++i) names["key_" + std::to_string(i)] = "n";
  EXPECT_EQ(error_field(replica_with("metric_names", names)),
            "assignments[0].replica.metric_names");
  // A newer server's keys in the replica are ignored too.
  EXPECT_EQ(error_field(replica_with("scrape_path", "/stats")), "accepted");

  // What the agent does not know is left alone, so that a newer server may add fields.
  EXPECT_EQ(error_field(with("priority_class", "gold")), "accepted");
  // Only job and command are needed.
  auto least = read_assignment(json(R"({"job": 7, "command": ["true"]})"));
  ASSERT_TRUE(least.has_value()) << least.error().message();
  EXPECT_EQ(least->world_size, 1);
  EXPECT_EQ(least->gpu_milli, 1000);
  EXPECT_TRUE(least->preemptible);
  EXPECT_TRUE(least->tasks.empty());
}

TEST(NodeAssignmentTest, NamesTheMigFieldThatIsWrong) {
  const Json good = node_assignment_to_json(test_support::mig_notebook());
  // The error of the assignment with the instance's `key` set to `value` (nullopt: left out).
  const auto refusal = [&](std::string_view key, const std::optional<Json>& value) {
    Json a = good;
    if (value) {
      a["tasks"][0]["mig"][std::string(key)] = *value;
    } else {
      a["tasks"][0]["mig"].erase(std::string(key));
    }
    auto read = read_assignment(a);
    EXPECT_FALSE(read.has_value()) << key << ": " << value.value_or("(none)").dump();
    return read ? Error{} : read.error();
  };
  const std::string at = "assignments[0].tasks[0].mig";
  for (const char* key : {"profile", "start", "uuid"}) {
    const Error absent = refusal(key, std::nullopt);
    EXPECT_EQ(absent.field, at + "." + key);
    EXPECT_EQ(absent.reason, "the key is missing");
  }
  EXPECT_EQ(refusal("profile", "3g.41gb").field, at + ".profile");
  EXPECT_THAT(refusal("profile", "3g.41gb").reason, HasSubstr("1g.10gb, 1g.20gb"));
  EXPECT_EQ(refusal("profile", 3).field, at + ".profile");
  EXPECT_EQ(refusal("start", 8).field, at + ".start");
  EXPECT_EQ(refusal("start", -1).field, at + ".start");
  EXPECT_EQ(refusal("start", "4").field, at + ".start");
  const Error start = refusal("start", 2);
  EXPECT_EQ(start.field, at + ".start");
  EXPECT_EQ(start.reason, "a 3g.40gb instance starts at memory slice 0, 4, not 2");
  for (const Json& uuid :
       {Json(""), Json(std::string(kMaxMigUuid + 1, 'M')), Json("MIG-a b"), Json("MIG-a,MIG-b"),
        Json("MIG-a\nb"), Json("MIG-\xc3\xa9"), Json("MIG-\x7f"), Json(7)}) {
    EXPECT_EQ(refusal("uuid", uuid).field, at + ".uuid") << uuid.dump();
  }
  EXPECT_EQ(refusal("uuid", "").reason, "must not be empty");
  EXPECT_THAT(refusal("uuid", "MIG-a b").reason, HasSubstr("contains a space"));
  EXPECT_THAT(refusal("uuid", "MIG-a,MIG-b").reason, HasSubstr("contains a comma"));
  EXPECT_THAT(refusal("uuid", "MIG-a\tb").reason, HasSubstr("the byte 0x09"));
  EXPECT_THAT(refusal("uuid", std::string(kMaxMigUuid + 1, 'M')).reason,
              HasSubstr("129 characters long; at most 128"));

  // The instance is on the task's one GPU.
  for (const Json& gpus : {Json::array(), Json{1, 2}}) {
    Json a = good;
    a["tasks"][0]["gpus"] = gpus;
    auto read = read_assignment(a);
    ASSERT_FALSE(read.has_value()) << gpus.dump();
    EXPECT_EQ(read.error().field, "assignments[0].tasks[0].gpus");
    EXPECT_EQ(read.error().reason,
              fmt::format("a task on a MIG instance has one GPU, got {}", gpus.size()));
  }
  Json not_a_map = good;
  not_a_map["tasks"][0]["mig"] = "3g.40gb";
  EXPECT_EQ(read_assignment(not_a_map).error().field, at);

  // In a reply, the job with a bad instance is rejected alone, the path naming the field.
  Json bad = good;
  bad["tasks"][0]["mig"]["start"] = 1;
  auto reply = heartbeat_reply_from_json(
      {{"assignments", {node_assignment_to_json(gang_task_1()), good, bad}}});
  ASSERT_TRUE(reply.has_value()) << reply.error().message();
  EXPECT_EQ(reply->assignments.size(), 2U);
  ASSERT_EQ(reply->rejected.size(), 1U);
  EXPECT_EQ(reply->rejected[0].job, 14);
  EXPECT_EQ(reply->rejected[0].error.field, "assignments[2].tasks[0].mig.start");
}

// One job without a command (or with a field of the wrong type) is rejected on its own, with the
// job it is about; the others in the reply are kept.
TEST(HeartbeatReplyTest, ABadAssignmentIsRejectedAloneAndTheOthersKept) {
  Json no_command = node_assignment_to_json(gang_task_1());
  no_command["job"] = 7;
  no_command["run"] = 3;
  no_command.erase("command");
  Json empty_command = node_assignment_to_json(gang_task_1());
  empty_command["job"] = 8;
  empty_command["command"] = Json::array();
  const Json reply = {
      {"assignments",
       {no_command, node_assignment_to_json(gang_task_1()), empty_command, "not an object"}}};
  auto parsed = heartbeat_reply_from_json(reply);
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_EQ(parsed->assignments.size(), 1U);
  EXPECT_EQ(parsed->assignments[0], gang_task_1());
  ASSERT_EQ(parsed->rejected.size(), 3U);
  EXPECT_EQ(parsed->rejected[0].job, 7);
  EXPECT_EQ(parsed->rejected[0].run, 3);
  EXPECT_EQ(parsed->rejected[0].error.field, "assignments[0].command");
  EXPECT_EQ(parsed->rejected[0].error.reason, "the job has no command to run");
  EXPECT_EQ(parsed->rejected[1].job, 8);
  EXPECT_EQ(parsed->rejected[1].error.field, "assignments[2].command");
  EXPECT_EQ(parsed->rejected[2].job, 0);
  EXPECT_EQ(parsed->rejected[2].error.field, "assignments[3]");
}

TEST(HeartbeatReplyTest, NamesTheFieldThatIsWrong) {
  const auto read = heartbeat_reply_from_json;
  EXPECT_EQ(refused(read, "[]").field, "");
  EXPECT_EQ(refused(read, "null").field, "");
  EXPECT_EQ(refused(read, R"({"assignments": "x"})").field, "assignments");
  EXPECT_EQ(refused(read, R"({"jobs": [12, 12]})").reason, "job 12 is listed twice");
  EXPECT_EQ(refused(read, R"({"jobs": ["12"]})").field, "jobs[0]");
  EXPECT_EQ(refused(read, R"({"heartbeat_timeout_ms": -1})").field, "heartbeat_timeout_ms");
  EXPECT_EQ(refused(read, R"({"node": 3})").field, "node");
  // No assignments: nothing to run; unknown keys are ignored.
  auto idle = read(json(R"({"node": "node-1", "jobs": [], "later": {"x": 1}})"));
  ASSERT_TRUE(idle.has_value());
  EXPECT_TRUE(idle->assignments.empty());
  EXPECT_TRUE(idle->rejected.empty());
}

TEST(LogRepliesTest, NameTheFieldThatIsWrong) {
  const auto read = log_append_reply_from_json;
  EXPECT_EQ(refused(read, R"({"job": 12, "task": 0, "run": 2})").field, "size");
  EXPECT_EQ(refused(read, R"({"task": 0, "run": 2, "size": 1})").field, "job");
  EXPECT_EQ(refused(read, R"({"job": 12, "task": -1, "run": 2, "size": 1})").field, "task");
  EXPECT_EQ(refused(read, R"({"job": 12, "task": 0, "run": 2, "size": "1"})").field, "size");
  EXPECT_EQ(refused(log_conflict_from_json, R"({"error": "conflict"})").field, "size");
  EXPECT_EQ(refused(log_conflict_from_json, R"({"size": -1})").field, "size");
  EXPECT_EQ(refused(log_conflict_from_json, R"({"size": 1.5})").field, "size");
}

TEST(AgentWireTest, NoReaderThrowsOnAnyShape) {
  std::vector<Json> shapes = test_support::odd_json_shapes();
  shapes.push_back(Json({{"assignments", {Json::binary({}), {{"job", Json::binary({})}}}}}));
  shapes.push_back(Json({{"gpus", {{{"index", Json::binary({})}}}}}));
  shapes.push_back(Json({{"replicas", {{{"job", Json::binary({})}}}}}));
  shapes.push_back(Json({{"steps", {{{"stats", Json::binary({})}}}}}));
  shapes.push_back(Json(
      {{"steps",
        {{{"job", 1}, {"run", 1}, {"task", 0}, {"stats", {{"buckets", {Json::binary({})}}}}}}}}));
  shapes.push_back(
      Json({{"assignments",
             {{{"job", 1}, {"command", {"x"}}, {"replica", {{"metric_names", Json::binary({})}}}},
              {{"job", 2}, {"command", {"x"}}, {"replica", Json::binary({})}}}}}));
  for (const Json& shape : shapes) {
    EXPECT_NO_THROW({
      (void)job_status_report_from_json(shape);
      (void)checkpoint_report_from_json(shape);
      (void)node_registration_from_json(shape);
      (void)node_heartbeat_from_json(shape);
      (void)heartbeat_reply_from_json(shape);
      (void)node_assignment_from_json(shape, "a");
      (void)log_append_reply_from_json(shape);
      (void)log_conflict_from_json(shape);
    }) << shape.dump();
  }
}

}  // namespace
}  // namespace tidepool
