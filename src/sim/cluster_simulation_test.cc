#include "sim/cluster_simulation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/test_pool.h"

namespace tidepool {
namespace {

constexpr GpuModelId kP100{0};

GpuModelCatalog catalog() { return test_support::one_model_catalog("P100"); }

// Two nodes of 8 GPUs under one leaf.
Pool two_nodes() { return test_support::make_test_pool({.model = "P100"}); }

// Tenants A and B, 8 GPUs guaranteed each.
TenantBook two_tenants() { return test_support::two_tenant_book(catalog(), 8); }

SimJob eight_gpus(std::uint32_t id, TenantId tenant, Seconds submit, Seconds duration) {
  SimJob sj;
  sj.name = "job-" + std::to_string(id);
  sj.duration = duration;
  sj.job.id = JobId{id};
  sj.job.tenant = tenant;
  sj.job.queue = QueueId{tenant.value};
  sj.job.submit_time = submit;
  sj.job.checkpoint_interval = 600;
  sj.job.gang.task_count = 8;
  sj.job.gang.task = *make_task_shape(1, 1000, 1000, 1024);
  sj.job.gang.topology = {TopologyLevel::kNode, TopologyStrength::kRequired};
  return sj;
}

ClusterSimRun run(std::string_view policy, const std::vector<SimJob>& jobs,
                  const std::vector<SimLoan>& loans = {}) {
  auto config = scheduler_policy(policy);
  EXPECT_TRUE(config.has_value());
  auto result = run_cluster_simulation(two_nodes(), two_tenants(), *config, jobs, loans, {});
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return *result;
}

TEST(ClusterSimulation, ReclaimedJobResumesFromItsCheckpoint) {
  // B fills the pool (one node within its guarantee, one borrowed); A's job at t = 1000 takes a
  // node back at once. The job of B that goes kept 600 s (its checkpoint), lost 400 s on 8
  // GPUs, waits until A's job ends at 1500 and needs 10000 - 600 s more.
  const std::vector<SimJob> jobs = {eight_gpus(0, TenantId{1}, 0, 10000),
                                    eight_gpus(1, TenantId{1}, 0, 10000),
                                    eight_gpus(2, TenantId{0}, 1000, 500)};
  const ClusterSimRun r = run("tidepool", jobs);
  const SimJobResult& a = r.jobs[2];
  EXPECT_EQ(a.first_start, 1000);
  EXPECT_EQ(a.end, 1500);
  EXPECT_EQ(a.queue_seconds, 0);
  // Either of B's jobs may go (equal lost work: the lower id does); the other runs through.
  const bool first = r.jobs[0].preemptions == 1;
  const SimJobResult& victim = r.jobs[first ? 0 : 1];
  const SimJobResult& other = r.jobs[first ? 1 : 0];
  EXPECT_EQ(victim.preemptions, 1);
  EXPECT_EQ(victim.lost_gpu_seconds, 400 * 8);
  EXPECT_EQ(victim.queue_seconds, 500);
  EXPECT_EQ(victim.end, 1500 + 9400);
  EXPECT_EQ(other.end, 10000);
  EXPECT_EQ(r.summary.preemptions, 1);
  EXPECT_EQ(r.summary.finished, 3);
  EXPECT_DOUBLE_EQ(r.summary.min_tenant_guarantee_ratio, 1.0);
  EXPECT_NEAR(r.summary.lost_gpu_hours_share, 3200.0 / (8 * (10000 + 10000 + 500 + 400)), 1e-9);
}

// Pre-warming: job 2 waits for job 0's node, predicted (its estimate) to free at 3600. Its call
// falls due at 3000, between the simulation's events (100 and 3600), and is dated then; it starts
// there at 3600, pre-warmed 600 s ahead, more than the 300 s of staging.
TEST(ClusterSimulation, AJobWaitingForANodeIsPreWarmedALeadBeforeItFrees) {
  std::vector<SimJob> jobs = {eight_gpus(0, TenantId{0}, 0, 3600),
                              eight_gpus(1, TenantId{1}, 0, 7200),
                              eight_gpus(2, TenantId{1}, 100, 1000)};
  for (SimJob& sj : jobs) sj.job.runtime_estimate = sj.duration;
  const ClusterSimRun r = run("tiresias", jobs);
  EXPECT_EQ(r.jobs[2].first_start, 3600);
  EXPECT_EQ(r.summary.starts, 3);
  EXPECT_EQ(r.summary.prewarm_calls, 1);
  EXPECT_EQ(r.summary.prewarmed_starts, 1);
  EXPECT_EQ(r.summary.starts_after_lead, 1);
  EXPECT_EQ(r.summary.prewarmed_starts_after_lead, 1);
  EXPECT_EQ(r.summary.fully_staged_starts, 1);
  EXPECT_DOUBLE_EQ(r.summary.start_delay_saved_avg_s, 100.0);  // 300 s over 3 starts
  EXPECT_NEAR(r.summary.start_delay_saved_gpu_hours, 300.0 * 8 / 3600, 1e-9);
}

TEST(ClusterSimulation, PlainFifoSpreadsAndRunsSlowerThanTopologyPlacement) {
  // A 4-GPU job holds half of node 0; first fit then splits an 8-GPU job over both nodes, and
  // the job runs longer than its trace duration; tidepool takes node 1 whole.
  std::vector<SimJob> jobs = {eight_gpus(0, TenantId{0}, 0, 5000),
                              eight_gpus(1, TenantId{1}, 10, 5000)};
  jobs[0].job.gang.task_count = 4;
  const ClusterSimRun fifo = run("fifo-firstfit", jobs);
  const ClusterSimRun tide = run("tidepool", jobs);
  EXPECT_EQ(fifo.jobs[1].nodes, 2);
  EXPECT_GT(fifo.jobs[1].slowdown, 1.0);
  EXPECT_GT(*fifo.jobs[1].end, 10 + 5000);
  EXPECT_GT(fifo.summary.comm_overhead_share, tide.summary.comm_overhead_share);
  EXPECT_EQ(tide.jobs[1].nodes, 1);
  EXPECT_EQ(tide.jobs[1].end, 10 + 5000);
}

TEST(ClusterSimulation, LoanIsServedAtOnceAndReturnedAtItsEnd) {
  std::vector<SimJob> jobs = {eight_gpus(0, TenantId{1}, 0, 100000),
                              eight_gpus(1, TenantId{1}, 0, 100000)};
  const ClusterSimRun r = run("tidepool", jobs, {SimLoan{TenantId{0}, kP100, 16, 3600, 1800, 100}});
  ASSERT_EQ(r.summary.loans.size(), 1U);
  const SimLoanResult& loan = r.summary.loans[0];
  EXPECT_EQ(loan.served_after, 0);
  EXPECT_EQ(loan.end, 3600 + 1800);
  EXPECT_EQ(loan.held_after_end_milli, 0);
  EXPECT_EQ(r.jobs[0].preemptions + r.jobs[1].preemptions, 2);
}

TEST(ClusterSimulation, SameInputSameRun) {
  std::vector<SimJob> jobs;
  for (std::uint32_t i = 0; i < 40; ++i) {
    jobs.push_back(eight_gpus(i, TenantId{i % 2}, i * 300, 1000 + 97 * i));
    jobs.back().job.gang.task_count = 1 + static_cast<int>(i % 8);
  }
  const ClusterSimRun a = run("tidepool", jobs);
  const ClusterSimRun b = run("tidepool", jobs);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].first_start, b.jobs[i].first_start);
    EXPECT_EQ(a.jobs[i].end, b.jobs[i].end);
  }
  EXPECT_EQ(a.summary.finished, 40);
}

// A service of tenant A on the two nodes: its rate steps from 20/s to 100/s for two hours and
// back. The replicas follow: the count meets the p95 target but for the minutes a step up takes
// (start-up included), spread one per node first, and drained back down after the step.
TEST(ClusterSimulation, AServicesReplicasFollowItsRate) {
  SimServiceSpec service;
  service.name = "chat";
  service.tenant = TenantId{0};
  service.queue = QueueId{0};
  service.replica = *make_task_shape(1, 1000, 1000, 1024);
  service.scaler.slots_per_replica = 2;
  service.service_s = 0.1;
  service.scaler.lead = 30;
  service.drain = 10;
  service.scaler.metric = ScaleMetric::kP95LatencyMs;
  service.scaler.target = 500;
  service.scaler.min_replicas = 1;
  service.scaler.max_replicas = 16;
  service.rate.trough = service.rate.peak = 20;
  service.rate.bursts = {{3600, 7200, 5.0}};
  service.start = 0;
  service.end = 4 * 3600;
  ClusterSimSettings settings;
  settings.services = {service};
  const std::vector<SimJob> none;
  auto result = run_cluster_simulation(two_nodes(), two_tenants(), *scheduler_policy("tidepool"),
                                       none, {}, settings);
  ASSERT_TRUE(result.has_value()) << result.error().message();
  ASSERT_EQ(result->services.size(), 1U);
  const SimServiceResult& s = result->services[0];
  EXPECT_EQ(s.seconds, 4 * 3600);
  // Above the target only while the step up is answered: at most a few minutes of 4 h.
  EXPECT_GT(s.seconds_above_target, 0);
  EXPECT_LT(s.seconds_above_target, 300);
  const int low = oracle_replicas(service, 20);
  const int high = oracle_replicas(service, 100);
  ASSERT_LT(low, high);
  EXPECT_EQ(s.max_replicas_held, std::max(high, s.max_replicas_held));
  EXPECT_GE(s.max_replicas_held, high);
  // The oracle's replica-hours, and the autoscaler's within a fifth of them.
  EXPECT_NEAR(s.oracle_replica_hours, 2.0 * low + 2.0 * high, 1e-9);
  EXPECT_LT(s.replica_hours, 1.2 * s.oracle_replica_hours);
  // Before the step, and again an hour after it, the count is the oracle's.
  for (const ServiceTick& t : s.ticks) {
    if (t.time == 3500 || t.time == 4 * 3600 - 100) {
      EXPECT_EQ(t.live, low) << t.time;
    }
    if (t.time == 3 * 3600) {
      EXPECT_EQ(t.live, high) << t.time;
    }
  }
  // Every replica stopped at the end; the replicas are in the run's jobs, named by the service.
  ASSERT_FALSE(result->replica_jobs.empty());
  EXPECT_EQ(result->replica_jobs.front().name, "chat-1");
  for (const SimJobResult& job : result->jobs) EXPECT_TRUE(job.end.has_value());
}

TEST(ClusterSimulation, RefusesAWorkloadNotIndexedById) {
  std::vector<SimJob> jobs = {eight_gpus(5, TenantId{0}, 0, 10)};
  auto config = scheduler_policy("tidepool");
  auto result = run_cluster_simulation(two_nodes(), two_tenants(), *config, jobs, {}, {});
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().field, "jobs");
}

}  // namespace
}  // namespace tidepool

namespace tidepool {
namespace {

// A flat market: 3.6 credits per GPU-hour (1 milli-credit per GPU-second) at any utilisation and
// time, preemptible work at the same price, so amounts can be checked by hand.
SimMarketSettings flat_market() {
  SimMarketSettings m;
  m.prices.curve = {{0, kPpmOne}, {kPpmOne, kPpmOne}};
  m.prices.preemptible = kPpmOne;
  m.prices.lender_share = 500'000;
  m.cost_base = {3'600'000};
  m.owned_per_hour = {1'000'000};
  m.posting_interval = 3600;
  return m;
}

ClusterSimRun run_cluster_with(std::string_view policy, const std::vector<SimJob>& jobs,
                               const SimMarketSettings& market) {
  auto config = scheduler_policy(policy);
  EXPECT_TRUE(config.has_value());
  ClusterSimSettings settings;
  settings.market = market;
  auto result = run_cluster_simulation(two_nodes(), two_tenants(), *config, jobs, {}, settings);
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return *result;
}

TEST(ClusterSimulationMarket, ChargesWhatRunsAndCreditsTheLender) {
  // B runs two 8-GPU jobs for 1000 s from t = 0: one within its guarantee, one on A's idle
  // guarantee. B pays 16 GPUs x 1000 s x 1 milli-credit = 16 credits; A, the lender, is
  // credited half the price of the 8 GPUs it lent: 4 credits.
  const std::vector<SimJob> jobs = {eight_gpus(0, TenantId{1}, 0, 1000),
                                    eight_gpus(1, TenantId{1}, 0, 1000)};
  for (std::string_view policy : {"fifo-firstfit", "tidepool"}) {
    SCOPED_TRACE(policy);
    const ClusterSimRun r = run_cluster_with(policy, jobs, flat_market());
    ASSERT_TRUE(r.cost.has_value());
    const SimCost& c = *r.cost;
    EXPECT_EQ(c.tenants[1].charges, 16 * kMicrosPerUnit);
    EXPECT_EQ(c.tenants[0].credits, 4 * kMicrosPerUnit);
    EXPECT_EQ(c.tenants[0].charges, 0);
    EXPECT_EQ(c.charged, 16 * kMicrosPerUnit);
    EXPECT_TRUE(c.ledger_balanced);
    EXPECT_EQ(c.useful_milli_seconds, 16 * kMilliPerGpu * 1000);
    // 16 credits for 16000 GPU-seconds of useful work: 3.60 per GPU-hour.
    EXPECT_EQ(c.charged_per_useful_gpu_hour, 3'600'000);
    // The pool's 16 GPUs owned for the 1000 s makespan at 1 credit an hour: 4.444444.
    EXPECT_EQ(c.owned_cost, 4'444'444);
  }
}

TEST(ClusterSimulationMarket, LostWorkIsPaidForButNotUseful) {
  // The reclaim of the first test: B's victim loses 400 s on 8 GPUs, which B pays for.
  const std::vector<SimJob> jobs = {eight_gpus(0, TenantId{1}, 0, 10000),
                                    eight_gpus(1, TenantId{1}, 0, 10000),
                                    eight_gpus(2, TenantId{0}, 1000, 500)};
  const ClusterSimRun r = run_cluster_with("tidepool", jobs, flat_market());
  ASSERT_TRUE(r.cost.has_value());
  const std::int64_t useful = 8 * kMilliPerGpu * (10000 + 10000 + 500);
  EXPECT_EQ(r.cost->useful_milli_seconds, useful);
  EXPECT_EQ(r.cost->tenants[1].charges, (8 * (10000 + 10000 + 400)) * 1000);
  EXPECT_GT(r.cost->charged_per_useful_gpu_hour, 3'600'000);
}

TEST(ClusterSimulationMarket, AnExhaustedBudgetHoldsTheTenantsNextJobs) {
  // A may spend 20 credits a quarter: its first job (8 GPUs x 3600 s = 28.8 credits) spends it,
  // so its second waits for budget although the pool is free.
  std::vector<SimJob> jobs = {eight_gpus(0, TenantId{0}, 0, 3600),
                              eight_gpus(1, TenantId{0}, 4000, 600)};
  SimMarketSettings market = flat_market();
  market.budgets = {Budget{.quarterly = 20 * kMicrosPerUnit, .soft_alert = 800'000}, std::nullopt};
  market.epoch = 1'790'812'800;  // 2026-10-01T00:00:00Z: the run is within one quarter
  const ClusterSimRun r = run_cluster_with("tidepool", jobs, market);
  ASSERT_TRUE(r.cost.has_value());
  EXPECT_FALSE(r.jobs[1].first_start.has_value());
  EXPECT_EQ(r.cost->tenants[0].budget_exhaustions, 1);
  EXPECT_EQ(r.cost->tenants[0].budget_alerts, 1);
  EXPECT_EQ(r.summary.never_started, 1);
  // Held from the posting at 3600 that found the budget spent to the end of the run at 4000.
  EXPECT_EQ(r.cost->tenants[0].budget_held_s, 400);
  EXPECT_TRUE(r.cost->ledger_balanced);
}

TEST(ClusterSimulationMarket, JobsThatWaitPastTheThresholdBurstAndPayTheOffersPrice) {
  // The pool is full for 20000 s; a job of A that waits 1800 s goes to rented capacity (10 min
  // start-up), runs its 3000 s there and pays 8 GPUs x 3600 s x 2 credits per GPU-hour = 16.
  std::vector<SimJob> jobs = {eight_gpus(0, TenantId{1}, 0, 20000),
                              eight_gpus(1, TenantId{1}, 0, 20000),
                              eight_gpus(2, TenantId{0}, 100, 3000)};
  jobs[0].job.preemptible = jobs[1].job.preemptible = false;
  SimMarketSettings market = flat_market();
  market.offers = {BurstOffer{.name = "cloud",
                              .provider = "cloud",
                              .model = kP100,
                              .spot = false,
                              .price_per_gpu_hour = 2 * kMicrosPerUnit,
                              .startup_delay = 600,
                              .max_gpus = 64,
                              .interruption_per_hour = 0}};
  market.burst = BurstPolicy{.threshold = 1800};
  const ClusterSimRun r = run_cluster_with("fifo-firstfit", jobs, market);
  ASSERT_TRUE(r.cost.has_value());
  EXPECT_EQ(r.cost->burst_jobs, 1);
  EXPECT_EQ(r.jobs[2].first_start, 100 + 1800 + 600);
  EXPECT_EQ(r.jobs[2].queue_seconds, 1800 + 600);
  EXPECT_EQ(r.jobs[2].end, 100 + 1800 + 600 + 3000);
  EXPECT_EQ(r.cost->burst_cost, 16 * kMicrosPerUnit);
  EXPECT_EQ(r.cost->tenants[0].charges, 16 * kMicrosPerUnit);
  EXPECT_TRUE(r.cost->ledger_balanced);
  EXPECT_EQ(r.summary.finished, 3);
}

}  // namespace
}  // namespace tidepool
