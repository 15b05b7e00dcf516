#include "sim/shadow_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "config/tenants_file.h"
#include "sim/test_slurm_cluster.h"

namespace tidepool {
namespace {

// Two nodes of 4 GPUs, named as a Slurm test cluster names them.
ClusterSpec two_nodes() { return test_support::two_slurm_nodes(16000, 65536); }

ObservedJob ended(std::string id, std::string tenant, int gpus, std::int64_t submit,
                  std::int64_t start, std::int64_t end, std::vector<std::string> nodes) {
  ObservedJob j;
  j.id = std::move(id);
  j.tenant = std::move(tenant);
  j.gpus = gpus;
  j.node_count = static_cast<int>(nodes.size());
  j.milli_cpu = 1000 * j.node_count;
  j.submit = submit;
  j.start = start;
  j.end = end;
  j.nodes = std::move(nodes);
  return j;
}

// Per node and GPU, the intervals of the jobs that held it never overlap.
void expect_no_gpu_shared(const ShadowRun& run) {
  std::map<std::pair<std::string, int>, std::vector<std::pair<std::int64_t, std::int64_t>>> held;
  for (const ShadowJobResult& r : run.jobs) {
    if (!r.tidepool_start) continue;
    const std::int64_t end = r.tidepool_end.value_or(INT64_MAX);
    for (const ShadowPlace& p : r.tidepool_places) {
      for (int g = 0; g < 32; ++g) {
        if (gpu_set_contains(p.gpus, g)) held[{p.node, g}].emplace_back(*r.tidepool_start, end);
      }
    }
  }
  for (auto& [gpu, spans] : held) {
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << gpu.first << " GPU " << gpu.second;
    }
  }
}

TEST(ShadowSchedule, TidepoolStartsWhatSlurmLeftWaitingOnIdleGpus) {
  // Slurm ran b after a on tp1 although tp2 was idle: Tidepool starts b at once on tp2.
  const std::vector<ObservedJob> jobs = {
      ended("1", "vision", 4, 100, 100, 200, {"tp1"}),
      ended("2", "speech", 4, 100, 200, 300, {"tp1"}),
  };
  const ShadowRun run = run_shadow(two_nodes(), jobs, 400, ShadowSettings{}).value();
  ASSERT_EQ(run.jobs.size(), 2U);
  EXPECT_EQ(run.first_submit, 100);
  EXPECT_EQ(run.jobs[1].observed_start, 200);
  EXPECT_EQ(run.jobs[1].tidepool_start, 100);
  EXPECT_EQ(run.jobs[1].tidepool_end, 200);
  EXPECT_EQ(run.observed.jobs, 2);
  EXPECT_EQ(run.observed.wait_max_s, 100);
  EXPECT_EQ(run.tidepool.wait_max_s, 0);
  EXPECT_EQ(run.observed.makespan_s, 200);
  EXPECT_EQ(run.tidepool.makespan_s, 100);
  EXPECT_EQ(run.observed.conflicts, 0);
  EXPECT_EQ(run.tidepool.conflicts, 0);
  expect_no_gpu_shared(run);
}

TEST(ShadowSchedule, ObservedGpusAreNumberedLowestFreeFirst) {
  const std::vector<ObservedJob> jobs = {
      ended("1", "a", 2, 0, 0, 50, {"tp1"}),
      ended("2", "a", 2, 0, 0, 50, {"tp1"}),
  };
  const ShadowRun run = run_shadow(two_nodes(), jobs, 60, ShadowSettings{}).value();
  ASSERT_EQ(run.jobs[0].observed_places.size(), 1U);
  EXPECT_EQ(run.jobs[0].observed_places[0].gpus, 0b0011U);
  EXPECT_EQ(run.jobs[1].observed_places[0].gpus, 0b1100U);
}

// Slurm's times are whole seconds: three jobs shorter than a second and a fourth that followed
// them on the same GPUs all show one start time.
TEST(ShadowSchedule, JobsShorterThanASecondShareItWithoutConflict) {
  const std::vector<ObservedJob> jobs = {
      ended("1", "a", 1, 100, 100, 100, {"tp1"}), ended("2", "a", 2, 100, 100, 100, {"tp1"}),
      ended("3", "a", 1, 100, 100, 100, {"tp1"}), ended("4", "a", 4, 100, 100, 101, {"tp1"}),
      ended("5", "a", 4, 99, 99, 101, {"tp2"}),
  };
  const ShadowRun run = run_shadow(two_nodes(), jobs, 200, ShadowSettings{}).value();
  EXPECT_EQ(run.observed.conflicts, 0);
  EXPECT_EQ(run.observed.started, 5);
  EXPECT_EQ(run.tidepool.conflicts, 0);
  EXPECT_EQ(run.tidepool.started, 5);
  EXPECT_EQ(run.jobs[3].observed_places[0].gpus, 0b1111U);
  expect_no_gpu_shared(run);
}

TEST(ShadowSchedule, NoShareKeepsEveryJobWhereSlurmPutIt) {
  std::vector<ObservedJob> jobs;
  for (int i = 0; i < 12; ++i) {
    jobs.push_back(ended(std::to_string(i), i % 2 == 0 ? "a" : "b", 1 + i % 4, i * 10, i * 10 + 5,
                         i * 10 + 20, {i % 2 == 0 ? "tp1" : "tp2"}));
  }
  ShadowSettings settings;
  settings.share.percent = 0;
  const ShadowRun run = run_shadow(two_nodes(), jobs, 1000, settings).value();
  EXPECT_EQ(run.chosen, 0);
  EXPECT_EQ(run.displaced, 0);
  for (const ShadowJobResult& r : run.jobs) {
    EXPECT_EQ(r.tidepool_start, r.observed_start);
    ASSERT_EQ(r.tidepool_places.size(), 1U);
    EXPECT_EQ(r.tidepool_places[0].node, r.observed_places[0].node);
  }
  expect_no_gpu_shared(run);
}

TEST(ShadowSchedule, APartialShareComparesOnlyTheChosenJobs) {
  std::vector<ObservedJob> jobs;
  for (int i = 0; i < 40; ++i) {
    jobs.push_back(ended(std::to_string(i), "t" + std::to_string(i % 3), 1 + i % 4, i * 7,
                         i * 7 + 3, i * 7 + 15, {i % 2 == 0 ? "tp1" : "tp2"}));
  }
  ShadowSettings settings;
  settings.share.percent = 30;
  const ShadowRun run = run_shadow(two_nodes(), jobs, 1000, settings).value();
  int chosen = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(run.jobs[i].chosen, in_share(settings.share, jobs[i]));
    chosen += run.jobs[i].chosen ? 1 : 0;
    if (run.jobs[i].tidepool_start) {
      EXPECT_GE(*run.jobs[i].tidepool_start, jobs[i].submit);
    }
  }
  EXPECT_EQ(run.chosen, chosen);
  EXPECT_GT(chosen, 0);
  EXPECT_LT(chosen, 40);
  EXPECT_EQ(run.observed.jobs, chosen);
  EXPECT_EQ(run.tidepool.jobs, chosen);
  expect_no_gpu_shared(run);
}

// A job left to Slurm whose node Tidepool filled with a job of the share waits for it.
TEST(ShadowSchedule, AJobLeftToSlurmWaitsForGpusTidepoolGaveAway) {
  ShadowSettings settings;
  settings.share.percent = 50;
  std::vector<std::string> in;
  std::vector<std::string> out;
  for (int i = 0; in.empty() || out.size() < 2; ++i) {
    ObservedJob probe;
    probe.id = "j" + std::to_string(i);
    (in_share(settings.share, probe) ? in : out).push_back(probe.id);
  }
  const std::vector<ObservedJob> jobs = {
      ended(out[0], "a", 4, 0, 0, 40, {"tp2"}),    // left to Slurm: tp2 busy until 40
      ended(in[0], "a", 4, 0, 0, 30, {"tp2"}),     // Tidepool's: only tp1 is free at 0
      ended(out[1], "a", 4, 10, 10, 20, {"tp1"}),  // left to Slurm on tp1 at 10
  };
  const ShadowRun run = run_shadow(two_nodes(), jobs, 100, settings).value();
  EXPECT_EQ(run.chosen, 1);
  ASSERT_EQ(run.jobs[1].tidepool_places.size(), 1U);
  EXPECT_EQ(run.jobs[1].tidepool_places[0].node, "tp1");
  EXPECT_EQ(run.jobs[1].tidepool_start, 0);
  EXPECT_EQ(run.displaced, 1);
  EXPECT_EQ(run.jobs[2].displaced_seconds, 20);
  EXPECT_EQ(run.jobs[2].tidepool_start, 30);
  EXPECT_EQ(run.observed.jobs, 1);
  expect_no_gpu_shared(run);
}

TEST(ShadowSchedule, ShareByTenantTakesWholeTenants) {
  ShadowShare share{50, ShareRule::kTenant, 7};
  ObservedJob a = ended("1", "vision", 1, 0, 0, 1, {"tp1"});
  ObservedJob b = ended("2", "vision", 1, 0, 0, 1, {"tp1"});
  EXPECT_EQ(in_share(share, a), in_share(share, b));
  share.percent = 100;
  EXPECT_TRUE(in_share(share, a));
  share.percent = 0;
  EXPECT_FALSE(in_share(share, a));
}

TEST(ShadowSchedule, CensoredAndCancelledJobs) {
  ObservedJob running = ended("1", "a", 4, 0, 0, 0, {"tp1"});
  running.end.reset();
  ObservedJob waiting;
  waiting.id = "2";
  waiting.tenant = "a";
  waiting.gpus = 4;
  waiting.submit = 10;
  ObservedJob cancelled = waiting;
  cancelled.id = "3";
  cancelled.cancelled = true;
  const ShadowRun run =
      run_shadow(two_nodes(), std::vector{running, waiting, cancelled}, 100, ShadowSettings{})
          .value();
  EXPECT_EQ(run.jobs[0].tidepool_start, 0);
  EXPECT_FALSE(run.jobs[0].tidepool_end);
  EXPECT_EQ(run.jobs[1].tidepool_start, 10);  // tp2 is free
  EXPECT_FALSE(run.jobs[1].observed_start);
  EXPECT_FALSE(run.jobs[2].tidepool_start);
  EXPECT_EQ(run.observed.jobs, 2);
  EXPECT_EQ(run.observed.started, 1);
  EXPECT_EQ(run.tidepool.started, 2);
}

TEST(ShadowSchedule, RefusesBadInputNamingTheJob) {
  ObservedJob j = ended("9", "a", 4, 10, 5, 20, {"tp1"});
  auto run = run_shadow(two_nodes(), std::vector{j}, 100, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().field, "job 9");
  j = ended("9", "a", 4, 10, 10, 20, {"gpu-77"});
  run = run_shadow(two_nodes(), std::vector{j}, 100, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_NE(run.error().reason.find("gpu-77"), std::string::npos);
  j = ended("9", "a", 3, 10, 10, 20, {"tp1", "tp2"});
  run = run_shadow(two_nodes(), std::vector{j}, 100, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().field, "job 9 gpus");
  // Outside observed_job.h's bounds, whatever gave the job: refused before any arithmetic on it
  // (times far apart would overflow when shifted to the first submit).
  j = ended("9", "a", 4, 10, 10, 20, {"tp1"});
  ObservedJob early = ended("8", "a", 4, INT64_MIN, 10, 20, {"tp1"});
  run = run_shadow(two_nodes(), std::vector{early, j}, 100, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().field, "job 8 submit");
  j.end = 5;
  run = run_shadow(two_nodes(), std::vector{j}, 100, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().field, "job 9 end");
  j = ended("9", "a", 4, 10, 10, 20, {"tp1"});
  run = run_shadow(two_nodes(), std::vector{j}, INT64_MAX, ShadowSettings{});
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().field, "now");
}

// Tenants from a tenants file (--tenants) rather than derived from the stream: a tenant the file
// guarantees nothing and lets borrow nothing gets no GPU from Tidepool, where the derived tenants
// (each guaranteed in proportion to its GPU time) start both jobs at once.
TEST(ShadowSchedule, TenantsFromAFileSetTheGuaranteesAndNameEveryJobsTenant) {
  const std::vector<ObservedJob> jobs = {
      ended("1", "vision", 4, 100, 100, 200, {"tp1"}),
      ended("2", "speech", 4, 100, 200, 300, {"tp1"}),
  };
  ClusterSpec cluster = two_nodes();
  const ShadowRun derived = run_shadow(cluster, jobs, 400, ShadowSettings{}).value();
  EXPECT_EQ(derived.jobs[1].tidepool_start, 100);

  ShadowSettings settings;
  settings.tenants = read_tenants_yaml(
                         "orgs:\n"
                         "  - name: all\n"
                         "    tenants:\n"
                         "      - name: vision\n"
                         "        quota: {GPU: {guaranteed_gpus: 8, borrowing_limit_gpus: 0}}\n"
                         "      - name: speech\n"
                         "        quota: {GPU: {guaranteed_gpus: 0, borrowing_limit_gpus: 0}}\n",
                         "tenants.yaml", cluster.models)
                         .value();
  const ShadowRun run = run_shadow(cluster, jobs, 400, settings).value();
  EXPECT_EQ(run.jobs[0].tidepool_start, 100);
  EXPECT_FALSE(run.jobs[1].tidepool_start.has_value()) << *run.jobs[1].tidepool_start;
  EXPECT_EQ(run.tidepool.started, 1);

  std::vector<ObservedJob> stranger = jobs;
  stranger.push_back(ended("3", "ads", 1, 100, 100, 110, {"tp2"}));
  const auto refused = run_shadow(cluster, stranger, 400, settings);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "job 3");
  EXPECT_EQ(refused.error().reason, "tenant 'ads' unknown: it is not in the tenants file");
}

}  // namespace
}  // namespace tidepool
