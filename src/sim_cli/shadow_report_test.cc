#include "sim_cli/shadow_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/test_slurm_cluster.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

// Two jobs on two nodes of 4 GPUs, reported in every form.
struct Fixture {
  std::vector<ObservedJob> jobs;
  ShadowRun run;
  Fixture() {
    const ClusterSpec spec = test_support::two_slurm_nodes(8000);
    for (int i = 0; i < 2; ++i) {
      ObservedJob j;
      j.id = std::to_string(i + 1);
      j.tenant = "vision";
      j.gpus = 4;
      j.submit = 1000;
      j.start = 1000 + 60 * i;
      j.end = *j.start + 60;
      j.nodes = {"tp1"};
      jobs.push_back(j);
    }
    run = run_shadow(spec, jobs, 2000, ShadowSettings{}).value();
  }
};

TEST(ShadowReport, PlacesText) {
  const std::vector<ShadowPlace> places = {{"tp1", 0b0011}, {"tp2", 0b1101}};
  EXPECT_EQ(places_text(places), "tp1:0-1 tp2:0,2-3");
}

TEST(ShadowReport, EveryJobOnceInEveryForm) {
  const Fixture f;
  ShadowReportContext context;
  context.policy = "tidepool";
  context.nodes = 2;
  context.gpus = 8;
  const std::string text = shadow_report_text(f.run, f.jobs, context);
  EXPECT_THAT(text, HasSubstr("slurm start"));
  EXPECT_THAT(text, HasSubstr("wait median"));
  const nlohmann::json json = shadow_report_json(f.run, f.jobs, context);
  ASSERT_EQ(json["jobs"].size(), 2U);
  EXPECT_EQ(json["jobs"][1]["observed"]["start"], 1060);
  EXPECT_EQ(json["jobs"][1]["observed"]["wait_s"], 60);
  EXPECT_EQ(json["jobs"][1]["tidepool"]["start"], 1000);
  EXPECT_EQ(json["jobs"][1]["tidepool"]["nodes"], "tp2:0-3");
  EXPECT_EQ(json["summary"]["observed"]["wait_max_s"], 60);
  EXPECT_EQ(json["summary"]["tidepool"]["wait_max_s"], 0);
  const std::string csv = shadow_report_csv(f.run, f.jobs);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_THAT(csv,
              HasSubstr("2,vision,,4,1000,ended,1,1060,1120,60,tp1:0-3,1000,1060,0,tp2:0-3,0"));
}

}  // namespace
}  // namespace tidepool
