#include "api/service_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "api/job_spec.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

Result<JobSpec> yaml(const std::string& body) { return parse_job_spec(body, BodyFormat::kYaml); }

const std::string kService = R"(name: chat
tenant: web
kind: service
command: [python3, serve.py]
gpu_milli: 500
service:
  min_replicas: 2
  max_replicas: 12
  target: {p95_latency_ms: 400}
  slots_per_replica: 8
  startup: 90s
  drain: 20s
  spread: leaf
  max_per_node: 2
  metrics_port: 8000
  metrics: {preset: triton, names: {requests_waiting: my_queue}}
  models:
    H100: {throughput: 40.5, p95_latency_ms: 120}
    A100: {throughput: "15", p95_latency_ms: 260}
)";

TEST(ServiceSpecTest, AServiceReadsWithItsBlockAndRoundTrips) {
  auto spec = yaml(kService);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  ASSERT_TRUE(spec->service.has_value());
  const ServiceSpec& s = *spec->service;
  EXPECT_EQ(spec->job_class, JobClass::kInference);
  EXPECT_EQ(s.scaler.min_replicas, 2);
  EXPECT_EQ(s.scaler.max_replicas, 12);
  EXPECT_EQ(s.scaler.metric, ScaleMetric::kP95LatencyMs);
  EXPECT_EQ(s.scaler.target, 400);
  EXPECT_EQ(s.scaler.slots_per_replica, 8);
  EXPECT_EQ(s.scaler.lead, 90);
  EXPECT_EQ(s.drain, 20);
  EXPECT_EQ(s.spread.level, SpreadLevel::kLeaf);
  EXPECT_EQ(s.spread.max_per_node, 2);
  EXPECT_EQ(s.metrics_port, 8000);
  EXPECT_EQ(s.metrics_preset, "triton");
  EXPECT_EQ(s.metric_names.at("requests_waiting"), "my_queue");
  EXPECT_EQ(s.models.at("H100"),
            (ModelThroughput{.throughput_milli_rps = 40'500, .p95_latency_ms = 120}));
  EXPECT_EQ(s.models.at("A100").throughput_milli_rps, 15'000);
  auto back = job_spec_from_json(job_spec_to_json(*spec));
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(*back, *spec);
  // A queue target with decimals reads in thousandths and back.
  auto queue = yaml(
      "name: a\ntenant: t\nkind: service\nservice: {target: {queue_per_replica: "
      "2.5}, down_window: 0}\n");
  ASSERT_TRUE(queue.has_value()) << queue.error().message();
  EXPECT_EQ(queue->service->scaler.target, 2500);
  EXPECT_EQ(queue->service->scaler.max_replicas, kDefaultMaxReplicas);
  EXPECT_EQ(*job_spec_from_json(job_spec_to_json(*queue)), *queue);
  // A plain job has no service block, and its JSON no kind.
  auto job = yaml("name: a\ntenant: t\n");
  ASSERT_TRUE(job.has_value());
  EXPECT_FALSE(job->service.has_value());
  EXPECT_FALSE(job_spec_to_json(*job).contains("kind"));
}

TEST(ServiceSpecTest, EachMistakeNamesItsField) {
  const auto field = [](const std::string& body) {
    auto spec = yaml("name: a\ntenant: t\n" + body);
    return spec ? std::string("(accepted)") : spec.error().field;
  };
  const std::string ok = "service: {target: {p95_latency_ms: 100}}\n";
  EXPECT_EQ(field("kind: service\n" + ok), "(accepted)");
  EXPECT_EQ(field(ok), "service");
  EXPECT_EQ(field("kind: service\n"), "service");
  EXPECT_EQ(field("kind: daemon\n" + ok), "kind");
  EXPECT_EQ(field("kind: service\nclass: training\n" + ok), "class");
  EXPECT_EQ(field("kind: service\ntasks: 3\n" + ok), "tasks");
  EXPECT_EQ(field("kind: service\narray: 0-3\n" + ok), "array");
  EXPECT_EQ(field("kind: service\nmax_runtime: 1h\n" + ok), "max_runtime");
  EXPECT_EQ(field("kind: service\nservice: {}\n"), "service.target");
  EXPECT_EQ(field("kind: service\nservice: {target: {}}\n"), "service.target");
  EXPECT_EQ(field("kind: service\nservice: {target: {p95_latency_ms: 1, queue_per_replica: 2}}\n"),
            "service.target");
  EXPECT_EQ(field("kind: service\nservice: {target: {queue_per_replica: -1}}\n"),
            "service.target.queue_per_replica");
  EXPECT_EQ(field("kind: service\nservice: {min_replicas: 5, max_replicas: 2, target: "
                  "{p95_latency_ms: 100}}\n"),
            "service.max_replicas");
  EXPECT_EQ(field("kind: service\nservice: {stable_window: 2s, target: {p95_latency_ms: 100}}\n"),
            "service.stable_window");
  EXPECT_EQ(field("kind: service\nservice: {spread: rack, target: {p95_latency_ms: 100}}\n"),
            "service.spread");
  EXPECT_EQ(field("kind: service\nservice: {metrics_port: 70000, target: {p95_latency_ms: 1}}\n"),
            "service.metrics_port");
  EXPECT_EQ(field("kind: service\nservice: {metrics_file: m.prom, target: {p95_latency_ms: 1}}\n"),
            "service.metrics_file");
  EXPECT_EQ(field("kind: service\nservice: {metrics_port: 80, metrics_file: /m, target: "
                  "{p95_latency_ms: 1}}\n"),
            "service.metrics_file");
  EXPECT_THAT(field("kind: service\nservice: {metrics: {preset: tgi}, target: "
                    "{p95_latency_ms: 1}}\n"),
              HasSubstr("service.metrics"));
  EXPECT_THAT(field("kind: service\nservice: {metrics: {names: {colour: x}}, target: "
                    "{p95_latency_ms: 1}}\n"),
              HasSubstr("service.metrics"));
  EXPECT_EQ(field("kind: service\nservice: {replicas: 3, target: {p95_latency_ms: 1}}\n"),
            "service.replicas");
  // The models' figures: each with both figures, for a model the service accepts.
  const std::string models =
      "kind: service\ngpu_model: [H100, A100]\nservice: {target: "
      "{p95_latency_ms: 100}, models: ";
  EXPECT_EQ(field(models + "{H100: {throughput: 40, p95_latency_ms: 80}}}\n"), "(accepted)");
  EXPECT_EQ(field(models + "{H100: {throughput: 40}}}\n"), "service.models.H100.p95_latency_ms");
  EXPECT_EQ(field(models + "{H100: {throughput: 0, p95_latency_ms: 8}}}\n"),
            "service.models.H100.throughput");
  EXPECT_EQ(field(models + "{H100: {throughput: 4, p95_latency_ms: 8, x: 1}}}\n"),
            "service.models.H100.x");
  EXPECT_EQ(field(models + "{L4: {throughput: 4, p95_latency_ms: 8}}}\n"), "service.models.L4");
  EXPECT_EQ(field(models + "[H100]}\n"), "service.models");
}

}  // namespace
}  // namespace tidepool
