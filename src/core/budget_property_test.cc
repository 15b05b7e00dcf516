// Property test of budgets in the scheduler, driven as the simulator and the server drive it: the
// market desk charges what runs, the budget watch reads each tenant's quarter from it, and the
// scheduler is told which tenants are held back. Over random workloads and every policy:
//   - a tenant whose budget is exhausted starts no new non-critical job;
//   - a job waits for budget only while its tenant's budget is exhausted;
//   - budgets that are never reached change nothing: the passes are exactly those of a run
//     without budgets.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/budget.h"
#include "core/budget_watch.h"
#include "core/market_desk.h"
#include "core/rng.h"
#include "core/scheduler.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

constexpr int kBudgetSeeds = 150;
constexpr Seconds kStep = 300;
constexpr Seconds kBudgetHorizon = 40'000;
// 2026-10-01T00:00:00Z: the runs are within one quarter.
constexpr std::int64_t kEpoch = 1'790'812'800;

struct BudgetTestJob {
  Job job;
  Seconds runtime = 0;
};

std::vector<BudgetTestJob> random_budget_jobs(Rng& rng) {
  std::vector<BudgetTestJob> jobs(8 + rng.below(30));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i].job;
    job.id = JobId{static_cast<std::uint32_t>(i)};
    job.tenant = TenantId{static_cast<std::uint32_t>(rng.below(2))};
    job.queue = QueueId{job.tenant.value};
    job.submit_time = static_cast<Seconds>(rng.below(30'000));
    job.priority_class = rng.below(5) == 0 ? 1000 : static_cast<int>(rng.below(3));
    job.preemptible = rng.below(3) != 0;
    job.checkpoint_interval = 600;
    jobs[i].runtime = 300 + static_cast<Seconds>(rng.below(8000));
    job.runtime_estimate = jobs[i].runtime;
    const int per_task = 1 << rng.below(4);
    job.gang.task_count = 1 + static_cast<int>(rng.below(2));
    job.gang.task = *make_task_shape(per_task, 1000, 1000, 1024);
    job.gang.topology = {TopologyLevel::kSpine, TopologyStrength::kPreferred};
  }
  return jobs;
}

struct BudgetOutcome {
  std::vector<std::pair<Seconds, std::uint32_t>> starts;  // (time, job)
  int held_starts = 0;    // non-critical starts of a tenant held back at that pass
  int wrong_reasons = 0;  // budget reasons of tenants not held back
  int budget_waits = 0;   // pending jobs seen with a budget reason
};

// Runs `jobs` under `policy` with `budgets` (per tenant; nullopt: none) checked every step.
BudgetOutcome run(std::string_view policy, const std::vector<BudgetTestJob>& jobs,
                  const std::array<std::optional<Budget>, 2>& budgets) {
  auto config = scheduler_policy(policy);
  auto scheduler = Scheduler::create(
      test_support::make_test_pool({.leaves_per_spine = 2}),
      test_support::two_tenant_book(test_support::one_model_catalog("H100"), 16), *config);
  EXPECT_TRUE(scheduler.has_value());
  Scheduler& s = *scheduler;
  std::vector<std::pair<std::string, Budget>> named;
  for (std::uint32_t tenant = 0; tenant < 2; ++tenant) {
    if (budgets[tenant])
      named.emplace_back(s.book().tenant_name(TenantId{tenant}), *budgets[tenant]);
  }
  auto desk = MarketDesk::create({.prices = PriceSchedule{},
                                  .cost_base = {2'000'000},
                                  .epoch = kEpoch,
                                  .budgets = std::move(named),
                                  .offers = {}},
                                 s.pool(), s.book(), 0);
  EXPECT_TRUE(desk.has_value()) << desk.error().message();
  BudgetWatch watch;
  std::vector<Seconds> ends(jobs.size(), -1);  // when a running job finishes
  BudgetOutcome out;
  for (Seconds t = 0; t <= kBudgetHorizon; t += kStep) {
    EXPECT_TRUE(desk->advance(t, s.pool()).has_value());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (ends[i] >= 0 && ends[i] <= t) {
        EXPECT_TRUE(s.finish(jobs[i].job.id, t, std::nullopt).has_value());
        EXPECT_TRUE(desk->stop(jobs[i].job.id, t).has_value());
        ends[i] = -1;
      }
      if (jobs[i].job.submit_time > t - kStep && jobs[i].job.submit_time <= t) {
        EXPECT_TRUE(s.submit(jobs[i].job, t).has_value());
      }
    }
    EXPECT_TRUE(desk->post(t).has_value());
    (void)watch.check_budgets(*desk, t);
    EXPECT_TRUE(watch.apply(s).has_value());
    std::array<bool, 2> held{};
    for (std::uint32_t tenant = 0; tenant < 2; ++tenant) {
      held[tenant] = watch.holds().contains(s.book().tenant_name(TenantId{tenant}));
    }
    const PassResult pass = s.pass(t);
    for (const PreemptedJob& p : pass.preempted) {
      EXPECT_TRUE(desk->stop(p.job, t).has_value());
      ends[p.job.value] = -1;
    }
    for (const StartedJob& started : pass.started) {
      const Job& job = jobs[started.job.value].job;
      out.starts.emplace_back(t, started.job.value);
      if (held[job.tenant.value] && job.priority_class < s.config().budget_exempt_priority) {
        ++out.held_starts;
      }
      EXPECT_TRUE(desk->start(job.id, job.tenant, started.assignments,
                              job.gang.task.total_milli_gpu(), s.pool(), price_class_of(job), t)
                      .has_value());
      ends[started.job.value] = t + jobs[started.job.value].runtime;
    }
    for (const BudgetTestJob& j : jobs) {
      const PendingReason* reason = s.reason(j.job.id);
      if (s.phase(j.job.id) != JobPhase::kPending || !reason) continue;
      if (reason->kind != PendingKind::kBudget) continue;
      ++out.budget_waits;
      if (!held[j.job.tenant.value]) ++out.wrong_reasons;
    }
  }
  return out;
}

TEST(BudgetProperty, ExhaustedTenantsStartOnlyCriticalWorkAndOthersAreNeverHeld) {
  Rng seeds(2026);
  int waits = 0;
  for (int k = 0; k < kBudgetSeeds; ++k) {
    const std::uint64_t seed = seeds.next();
    Rng rng(seed);
    const std::vector<BudgetTestJob> jobs = random_budget_jobs(rng);
    // Tenant A gets a budget it soon spends (a few GPU-hours), B sometimes one it never reaches.
    std::array<std::optional<Budget>, 2> budgets;
    budgets[0] = Budget{.quarterly = static_cast<Micros>(5 + rng.below(40)) * kMicrosPerUnit,
                        .soft_alert = 800'000};
    if (rng.below(2) == 0) budgets[1] = Budget{.quarterly = kMaxMoney, .soft_alert = 800'000};
    for (std::string_view policy : scheduler_policy_names()) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", policy " << policy);
      const BudgetOutcome with = run(policy, jobs, budgets);
      EXPECT_EQ(with.held_starts, 0);
      EXPECT_EQ(with.wrong_reasons, 0);
      waits += with.budget_waits;
      // Budgets nobody reaches change nothing.
      const std::array<std::optional<Budget>, 2> unreachable = {
          Budget{.quarterly = kMaxMoney, .soft_alert = 800'000}, std::nullopt};
      const BudgetOutcome free = run(policy, jobs, unreachable);
      const BudgetOutcome none = run(policy, jobs, {});
      EXPECT_EQ(free.starts, none.starts);
      EXPECT_EQ(free.budget_waits, 0);
    }
  }
  // The property is not vacuous: budgets did hold jobs back.
  EXPECT_GT(waits, 100);
}

}  // namespace
}  // namespace tidepool
