#include "sim/services_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/test_source_dir.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

GpuModelCatalog p100() { return test_support::one_model_catalog("P100"); }

Result<std::vector<ServiceEntry>> parse(const std::string& text) {
  return parse_services_yaml(text, "s.yaml", ".", p100());
}

TEST(ServicesFile, TheShippedExampleReadsWithItsFigures) {
  auto services =
      load_services_yaml(test_support::test_source_dir() + "/data/services/example.yaml", p100());
  ASSERT_TRUE(services.has_value()) << services.error().message();
  ASSERT_EQ(services->size(), 2U);
  const SimServiceSpec& chat = (*services)[0].spec;
  EXPECT_EQ(chat.name, "chat");
  EXPECT_EQ((*services)[0].tenant, "inference");
  EXPECT_EQ(chat.scaler.slots_per_replica, 4);
  EXPECT_DOUBLE_EQ(chat.service_s, 0.25);
  EXPECT_EQ(chat.scaler.lead, 90);
  EXPECT_EQ(chat.scaler.target, 1000);
  EXPECT_EQ(chat.scaler.max_replicas, 64);
  EXPECT_DOUBLE_EQ(chat.rate.peak / chat.rate.trough, 8.0);
  EXPECT_EQ(chat.rate.peak_at, 15 * 3600);
  ASSERT_EQ(chat.rate.bursts.size(), 1U);
  EXPECT_EQ(chat.rate.bursts[0].at, 32 * 86400 + 4 * 3600);
  const SimServiceSpec& embed = (*services)[1].spec;
  EXPECT_EQ(embed.replica.milli_per_gpu, 500);
  EXPECT_EQ(embed.spread.level, SpreadLevel::kLeaf);
}

TEST(ServicesFile, DefaultsFillWhatIsNotGiven) {
  auto services = parse(R"(services:
  - name: a
    tenant: t
    replica: {service_time: 100ms}
    target: {p95_latency_ms: 500}
    rate: {trough: 1.5, peak: 12}
)");
  ASSERT_TRUE(services.has_value()) << services.error().message();
  const SimServiceSpec& a = (*services)[0].spec;
  EXPECT_EQ(a.replica.gpu_count, 1);
  EXPECT_EQ(a.scaler.slots_per_replica, 1);
  EXPECT_EQ(a.scaler.lead, 60);
  // A minimum alone keeps the default maximum.
  auto min_only = parse(R"(services:
  - name: a
    tenant: t
    replica: {service_time: 100ms}
    replicas: {min: 3}
    target: {p95_latency_ms: 500}
    rate: {trough: 1, peak: 2}
)");
  ASSERT_TRUE(min_only.has_value()) << min_only.error().message();
  EXPECT_EQ((*min_only)[0].spec.scaler.min_replicas, 3);
  EXPECT_EQ((*min_only)[0].spec.scaler.max_replicas, 16);
  EXPECT_EQ(a.scaler.min_replicas, 1);
  EXPECT_EQ(a.scaler.max_replicas, 16);
  EXPECT_EQ(a.tick, 10);
  EXPECT_EQ(a.spread.level, SpreadLevel::kNode);
  EXPECT_DOUBLE_EQ(a.rate.trough, 1.5);
  EXPECT_EQ(a.rate.peak_at, 14 * 3600);
}

TEST(ServicesFile, AReplicaMayAskForAMigInstance) {
  auto services = parse(R"(services:
  - name: a
    tenant: t
    replica: {service_time: 100ms, mig_profile: 2g.20gb}
    target: {p95_latency_ms: 500}
    rate: {trough: 1, peak: 2}
)");
  ASSERT_TRUE(services.has_value()) << services.error().message();
  const TaskShape& replica = (*services)[0].spec.replica;
  EXPECT_EQ(replica.mig, MigProfile::k2g20gb);
  EXPECT_EQ(replica.milli_per_gpu, mig_gpu_milli(MigProfile::k2g20gb));
}

TEST(ServicesFile, EachMistakeNamesItsPlaceAndReason) {
  const auto error = [](const std::string& body) {
    auto services = parse("services:\n  - name: a\n    tenant: t\n" + body);
    return services ? std::string() : services.error().message();
  };
  const std::string ok_rest = "    target: {p95_latency_ms: 500}\n    rate: {trough: 1, peak: 2}\n";
  EXPECT_EQ(error("    replica: {service_time: 100ms}\n" + ok_rest), "");
  EXPECT_THAT(error("    replica: {}\n" + ok_rest), HasSubstr("service_time"));
  EXPECT_THAT(error("    replica: {service_time: 0ms}\n" + ok_rest),
              HasSubstr("services[0].replica.service_time"));
  EXPECT_THAT(error("    replica: {service_time: 1s, gpus: 1, gpu_milli: 500}\n" + ok_rest),
              HasSubstr("one of them"));
  EXPECT_THAT(error("    replica: {service_time: 1s, gpus: 1, mig_profile: 1g.10gb}\n" + ok_rest),
              HasSubstr("one of them"));
  EXPECT_THAT(error("    replica: {service_time: 1s, mig_profile: 1g.5gb}\n" + ok_rest),
              HasSubstr("services[0].replica.mig_profile"));
  EXPECT_THAT(error("    replica: {service_time: 1s, gpu_models: [H100]}\n" + ok_rest),
              HasSubstr("'H100' is not a GPU model of the pool"));
  EXPECT_THAT(error("    replica: {service_time: 1s, slots: 0}\n" + ok_rest),
              HasSubstr("services[0].replica.slots"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    replicas: {min: 5, max: 2}\n" + ok_rest),
              HasSubstr("max_replicas"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    target: {p95_latency_ms: 500}\n"
                    "    rate: {trough: 3, peak: 2}\n"),
              HasSubstr("must be at least the trough"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    target: {p95_latency_ms: 500}\n"
                    "    rate: {trough: 1, peak: 2, peak_at: \"25:00\"}\n"),
              HasSubstr("services[0].rate.peak_at"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    spread: rack\n" + ok_rest),
              HasSubstr("'rack' is not one of node, leaf"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    colour: red\n" + ok_rest),
              HasSubstr("unknown key"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    target: {p95_latency_ms: 500}\n"
                    "    rate: {trace: missing.csv}\n"),
              HasSubstr("missing.csv"));
  EXPECT_THAT(error("    replica: {service_time: 1s}\n    target: {p95_latency_ms: 500}\n"
                    "    rate: {trough: 1, peak: 2, bursts: [{at: 1h, duration: 0, factor: 2}]}\n"),
              HasSubstr("bursts[0].duration"));
  auto twice = parse(
      "services:\n  - {name: a, tenant: t, replica: {service_time: 1s}, target: "
      "{p95_latency_ms: 5}, rate: {trough: 1, peak: 1}}\n  - {name: a, tenant: t, replica: "
      "{service_time: 1s}, target: {p95_latency_ms: 5}, rate: {trough: 1, peak: 1}}\n");
  ASSERT_FALSE(twice.has_value());
  EXPECT_THAT(twice.error().message(), HasSubstr("already defined"));
}

TEST(ServicesFile, ARateTraceIsReadBesideTheFile) {
  const std::string folder = ::testing::TempDir();
  {
    std::FILE* f = std::fopen((folder + "/rates.csv").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("seconds,requests_per_second\n0,10\n600,25.5\n1200,4\n", f);
    std::fclose(f);
  }
  auto services = parse_services_yaml(
      "services:\n  - {name: a, tenant: t, replica: {service_time: 1s}, target: "
      "{p95_latency_ms: 5000}, rate: {trace: rates.csv, bursts: [{at: 700, duration: 100, "
      "factor: 2}]}}\n",
      "s.yaml", folder, p100());
  ASSERT_TRUE(services.has_value()) << services.error().message();
  const RateCurve& rate = (*services)[0].spec.rate;
  ASSERT_EQ(rate.points.size(), 3U);
  EXPECT_DOUBLE_EQ(rate_at(rate, 599), 10);
  EXPECT_DOUBLE_EQ(rate_at(rate, 600), 25.5);
  EXPECT_DOUBLE_EQ(rate_at(rate, 750), 51);
  EXPECT_DOUBLE_EQ(rate_at(rate, 5000), 4);
}

// The curve: the trough 12 h from the peak, the peak at its time of day, and 8x between them.
TEST(ServiceModel, TheDiurnalCurvePeaksAtItsHourAndBurstsMultiply) {
  RateCurve curve;
  curve.trough = 10;
  curve.peak = 80;
  curve.peak_at = 14 * 3600;
  curve.day_offset = 10 * 3600;  // sim time 0 is 10:00
  EXPECT_NEAR(rate_at(curve, 4 * 3600), 80, 1e-9);
  EXPECT_NEAR(rate_at(curve, 16 * 3600), 10, 1e-9);
  EXPECT_NEAR(rate_at(curve, 28 * 3600), 80, 1e-9);
  curve.bursts = {{100, 50, 3.0}};
  EXPECT_NEAR(rate_at(curve, 120), 3 * rate_at(curve, 99), 1.0);
  EXPECT_NEAR(rate_at(curve, 150), rate_at(curve, 151), 0.1);
}

}  // namespace
}  // namespace tidepool
