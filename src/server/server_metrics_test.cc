// The metrics that the operators' alerts (deploy/prometheus/alerts.yml) and dashboards
// (deploy/grafana/dashboards) query are those the server exports: each tidepool_* name in the
// rules and in the panels' queries is a family of GET /metrics.
#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

#include "config/market_file.h"
#include "config/test_source_dir.h"
#include "server/test_plane_setup.h"

namespace tidepool {
namespace {

// The tidepool_* names in `text`, a histogram's series (_bucket, _sum, _count) by its family.
std::set<std::string> metric_names(const std::string& text) {
  static const std::regex kName(R"(\btidepool_[a-z_]+)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName);
       it != std::sregex_iterator(); ++it) {
    std::string name = it->str();
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (name.ends_with(suffix)) name.resize(name.size() - suffix.size());
    }
    names.insert(name);
  }
  return names;
}

// A pool with a market and a budget, and a job waiting (no node is ready): every family has a
// series.
TEST(ServerMetricsTest, EveryMetricTheAlertsQueryIsExported) {
  ControlPlaneSetup setup = test_support::example_setup();
  setup.simulate_unregistered_nodes = false;
  auto market = read_market_yaml(
      std::string(test_support::kExampleMarketYaml) + std::string(test_support::kExampleBurstYaml),
      "market.yaml");
  ASSERT_TRUE(market.has_value()) << market.error().message();
  setup.market = std::move(*market);
  const Instant now = instant_from_unix_seconds(1'796'083'200);  // 2026-12-01
  Batch batch;
  auto plane = ControlPlane::create(setup, Snapshot{}, now, batch, std::make_shared<TokenTable>());
  ASSERT_TRUE(plane.has_value()) << plane.error().message();
  JobSpec spec;
  spec.name = "waits";
  spec.tenant = "vision";
  spec.gpu_models = {"H100"};
  spec.command = {"train.sh"};
  const Principal vision{"vision-token", Role::kUser, "vision", ""};
  ASSERT_TRUE((*plane)->submit(vision, spec, "", now, batch).has_value());
  (*plane)->schedule(now, batch);
  ServerMetrics metrics;
  metrics.count_request("GET", "/v1/jobs", 200, 0.001);
  metrics.set_figures((*plane)->figures());
  const std::string exported = metrics.render();

  // The alerts' rules, and every query of the Grafana dashboards.
  const std::string deploy = test_support::test_source_dir() + "/deploy";
  std::vector<std::string> files = {deploy + "/prometheus/alerts.yml"};
  for (const auto& entry : std::filesystem::directory_iterator(deploy + "/grafana/dashboards")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  ASSERT_GE(files.size(), 5U);
  for (const std::string& file : files) {
    std::ifstream in(file);
    ASSERT_TRUE(in.is_open()) << file;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (file.ends_with(".json")) {
      // The queries only: a dashboard's uid and title name Tidepool too.
      const auto dashboard = nlohmann::json::parse(text);
      text.clear();
      for (const auto& panel : dashboard.at("panels")) {
        for (const auto& target : panel.at("targets"))
          text += target.at("expr").get<std::string>() + "\n";
      }
      EXPECT_FALSE(text.empty()) << file;
    }
    const std::set<std::string> queried = metric_names(text);
    EXPECT_FALSE(queried.empty()) << file;
    for (const std::string& name : queried) {
      EXPECT_NE(exported.find("# TYPE " + name + " "), std::string::npos)
          << name << " is queried by " << file << " but not exported";
    }
  }
  // The check can fail: a name the server does not export is found missing.
  EXPECT_EQ(exported.find("# TYPE tidepool_no_such_metric "), std::string::npos);
}

// The step telemetry gauges: a series per running job that reported steps and per tenant,
// removed once the job is no longer in the figures (it stopped).
TEST(ServerMetricsTest, StepSeriesFollowTheRunningJobs) {
  ControlPlane::Figures figures;
  figures.running_job_steps[12] = {.tenant = "vision",
                                   .p50_us = 45'000,
                                   .p90_us = 47'000,
                                   .p99_us = 51'000,
                                   .comm_share = 0.25,
                                   .mfu = 0.5};
  figures.tenant_steps["vision"] = {
      .step_seconds = 10, .comm_seconds = 2.5, .model_flops = 4e15, .peak_flops = 8e15};
  ServerMetrics metrics;
  metrics.set_figures(figures);
  std::string exported = metrics.render();
  for (const std::string series :
       {R"(tidepool_job_step_seconds{job="12",quantile="0.5",tenant="vision"} 0.045)",
        R"(tidepool_job_step_seconds{job="12",quantile="0.99",tenant="vision"} 0.051)",
        R"(tidepool_job_comm_share{job="12",tenant="vision"} 0.25)",
        R"(tidepool_job_mfu{job="12",tenant="vision"} 0.5)",
        R"(tidepool_tenant_comm_share{tenant="vision"} 0.25)",
        R"(tidepool_tenant_mfu{tenant="vision"} 0.5)"}) {
    EXPECT_NE(exported.find(series), std::string::npos) << series << " in\n" << exported;
  }
  metrics.set_figures(ControlPlane::Figures{});
  exported = metrics.render();
  EXPECT_EQ(exported.find(R"(job="12")"), std::string::npos) << exported;
  EXPECT_EQ(exported.find(R"(tidepool_tenant_mfu{)"), std::string::npos) << exported;
}

}  // namespace
}  // namespace tidepool
