#include "core/scheduler.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/scheduler_pass_state.h"
#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::kA;
using test_support::kB;
using test_support::kH100;
using ::testing::HasSubstr;
using ::testing::Not;

GpuModelCatalog h100_catalog() { return test_support::one_model_catalog("H100"); }

// 2 leaves x 2 nodes x 8 H100 (one NVLink domain each) = 32 GPUs.
Pool two_leaf_pool() { return test_support::make_test_pool({.leaves_per_spine = 2}); }

// Tenants A and B, each guaranteed `guarantee` H100 GPUs.
TenantBook a_and_b_book(std::int64_t guarantee = 16, std::optional<std::int64_t> b_borrowing = {}) {
  return test_support::two_tenant_book(h100_catalog(), guarantee, b_borrowing);
}

// A job of `gpus` one-GPU tasks (or `per_task`-GPU tasks), anywhere in the pool.
Job make_test_job(std::uint32_t id, TenantId tenant, int gpus, Seconds submit,
                  std::optional<Seconds> estimate = 1000, int per_task = 1) {
  Job job;
  job.id = JobId{id};
  job.tenant = tenant;
  job.queue = QueueId{tenant.value};
  job.submit_time = submit;
  job.runtime_estimate = estimate;
  job.checkpoint_interval = 600;
  job.gang.task_count = gpus / per_task;
  job.gang.task = *make_task_shape(per_task, 1000, 1000, 1024);
  job.gang.topology = {TopologyLevel::kSpine, TopologyStrength::kPreferred};
  return job;
}

Scheduler make_scheduler(SchedulerConfig config, TenantBook book = a_and_b_book()) {
  auto s = Scheduler::create(two_leaf_pool(), std::move(book), std::move(config));
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return std::move(*s);
}

SchedulerConfig policy(std::string_view name) {
  auto c = scheduler_policy(name);
  EXPECT_TRUE(c.has_value());
  return *c;
}

TEST(SchedulerPolicy, KnowsFourPoliciesAndRefusesOthersWithTheList) {
  EXPECT_EQ(scheduler_policy_names().size(), 4U);
  for (std::string_view name : scheduler_policy_names()) {
    EXPECT_TRUE(scheduler_policy(name).has_value()) << name;
  }
  auto bad = scheduler_policy("slurm");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "policy");
  EXPECT_THAT(bad.error().reason, HasSubstr("fifo-firstfit"));
}

// A service's replicas go to a node without one while any has room (spread: node), whichever
// policy runs; another service's replicas do not count; a job of the same shape that is no
// replica packs as the policy does.
TEST(Scheduler, AServicesReplicasSpreadOverNodesUnderEveryPolicy) {
  for (std::string_view name : scheduler_policy_names()) {
    Scheduler s = make_scheduler(policy(name));
    std::uint32_t id = 0;
    const auto replica = [&](std::uint32_t service, int max_per_node) {
      Job job = make_test_job(id++, kA, 1, 0);
      job.job_class = JobClass::kInference;
      job.replica_of = ReplicaOf{service, {SpreadLevel::kNode, max_per_node}};
      EXPECT_TRUE(s.submit(job, 0).has_value());
    };
    for (int i = 0; i < 4; ++i) replica(7, 0);
    replica(8, 0);
    const PassResult first = s.pass(0);
    ASSERT_EQ(first.started.size(), 5U) << name;
    std::set<std::uint32_t> nodes;
    for (std::size_t i = 0; i < 4; ++i) nodes.insert(first.started[i].assignments[0].node.value);
    EXPECT_EQ(nodes.size(), 4U) << name << ": four replicas of service 7 on four nodes";
    // A fifth replica of service 7 with at most one per node has nowhere to go.
    replica(7, 1);
    const PassResult second = s.pass(1);
    EXPECT_TRUE(second.started.empty()) << name;
    const PendingReason* why = s.reason(JobId{id - 1});
    ASSERT_NE(why, nullptr) << name;
    EXPECT_THAT(std::string(why->message()), HasSubstr("fewer than 1 of the service's replicas"))
        << name;
  }
}

TEST(Scheduler, BorrowsIdleCapacityAndReclaimsItWithinOnePass) {
  Scheduler s = make_scheduler(policy("tidepool"));
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kB, 8, 0, 100000, 8), 0).has_value());
  }
  PassResult first = s.pass(0);
  ASSERT_EQ(first.started.size(), 4U);
  EXPECT_EQ(first.started[0].admission, StartAdmission::kWithinGuarantee);
  EXPECT_EQ(first.started[3].admission, StartAdmission::kBorrowing);
  EXPECT_EQ(s.book().borrowed(kB, kH100), 16000);

  ASSERT_TRUE(s.submit(make_test_job(10, kA, 8, 1000, 1000, 8), 1000).has_value());
  PassResult second = s.pass(1000);
  ASSERT_EQ(second.preempted.size(), 1U);
  EXPECT_EQ(second.preempted[0].cause, PreemptionCause::kReclaim);
  EXPECT_EQ(second.preempted[0].beneficiary, JobId{10});
  // Checkpointed every 600 s: 1000 s run keeps 600, loses 400 s on 8 GPUs.
  EXPECT_EQ(second.preempted[0].kept_seconds, 600);
  EXPECT_EQ(second.preempted[0].lost_gpu_seconds, 400 * 8);
  ASSERT_EQ(second.started.size(), 1U);
  EXPECT_EQ(second.started[0].job, JobId{10});
  EXPECT_EQ(s.usage_milli(kA), 8000);
  EXPECT_EQ(s.book().borrowed(kB, kH100), 8000);
  EXPECT_EQ(s.phase(second.preempted[0].job), JobPhase::kPending);
  ASSERT_TRUE(s.pool().check_invariants().has_value());
}

// Tenant B's two 8-GPU jobs of about 28 hours, started at 0 (time slicing's victims).
void start_two_long_jobs_of_b(Scheduler& s) {
  ASSERT_TRUE(s.submit(make_test_job(0, kB, 8, 0, 100000, 8), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(1, kB, 8, 0, 100000, 8), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 2U);
}

// A pass starts at most max_starts_per_pass jobs; the rest wait for the next pass, which is due at
// once (cut_short), and start in the order the unlimited pass would have started them.
TEST(Scheduler, APassStopsAtItsLimitAndTheNextGoesOnWhereItStopped) {
  SchedulerConfig limited = policy("tidepool");
  limited.max_starts_per_pass = 2;
  Scheduler s = make_scheduler(limited);
  Scheduler unlimited = make_scheduler(policy("tidepool"));
  for (std::uint32_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kA, 2, 0), 0).has_value());
    ASSERT_TRUE(unlimited.submit(make_test_job(i, kA, 2, 0), 0).has_value());
  }
  std::vector<std::uint32_t> order;
  std::vector<std::size_t> sizes;
  for (int pass = 0; pass < 3; ++pass) {
    const PassResult result = s.pass(0);
    sizes.push_back(result.started.size());
    for (const StartedJob& started : result.started) order.push_back(started.job.value);
    EXPECT_EQ(s.cut_short(), pass < 2) << "pass " << pass;
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 2, 1}));
  std::vector<std::uint32_t> expected;
  for (const StartedJob& started : unlimited.pass(0).started) expected.push_back(started.job.value);
  EXPECT_FALSE(unlimited.cut_short());
  EXPECT_EQ(order, expected);

  limited.max_starts_per_pass = -1;
  auto refused = Scheduler::create(two_leaf_pool(), a_and_b_book(), limited);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "max_starts_per_pass");
}

// may_fit (answered from the pool's whole-free counts) says what a look at every node says: some
// node of an accepted model has the gang's GPUs whole and free (one task, or the gang bound to a
// node), a leaf has them (the gang bound to a leaf), or the pool has them; on random pools,
// allocations and cordons.
TEST(SchedulerDetail, MayFitAgreesWithALookAtEveryNode) {
  auto by_every_node = [](const Pool& pool, const GangRequest& request) {
    const TaskShape& task = request.task;
    if (task.is_fractional() || task.is_mig() || !task.needs_gpu()) return true;
    const std::int64_t need = std::int64_t{request.task_count} * task.gpu_count;
    const bool one_node =
        request.topology.requires_level(TopologyLevel::kNode) || request.task_count == 1;
    std::vector<std::int64_t> leaf(pool.topology().leaves.size(), 0);
    std::int64_t total = 0;
    bool node_fits = false;
    for (int n = 0; n < pool.node_count(); ++n) {
      const NodeId node{static_cast<std::uint32_t>(n)};
      if (!task.models.accepts(pool.spec(node).model)) continue;
      const int free = pool.state(node).whole_free_gpus;
      node_fits = node_fits || free >= need;
      leaf[pool.spec(node).leaf.value] += free;
      total += free;
    }
    if (one_node) return node_fits;
    if (request.topology.requires_level(TopologyLevel::kLeaf)) {
      return std::any_of(leaf.begin(), leaf.end(), [&](std::int64_t f) { return f >= need; });
    }
    return total >= need;
  };
  int fits = 0;
  int not_fits = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    Rng rng(seed);
    Pool pool = test_support::make_two_model_pool();
    for (int step = 0; step < 60; ++step) {
      const NodeId node{static_cast<std::uint32_t>(rng.below(4))};
      const std::uint64_t op = rng.below(10);
      if (op == 0) {
        ASSERT_TRUE(pool.set_schedulable(node, !pool.schedulable(node)).has_value());
      } else if (op < 6) {
        auto task = make_task_shape(1, kMilliPerGpu, 1000, 1024);
        (void)pool.allocate(*task, {node, GpuSet{1} << rng.below(8)});
      } else {
        auto task = make_task_shape(1, kMilliPerGpu, 1000, 1024);
        (void)pool.release(*task, {node, GpuSet{1} << rng.below(8)});
      }
      GangRequest request;
      request.task_count = static_cast<int>(1 + rng.below(4));
      ModelSet models;
      if (rng.below(3) != 0) models.add(GpuModelId{static_cast<std::uint32_t>(rng.below(2))});
      request.task = *make_task_shape(static_cast<std::int64_t>(1 + rng.below(8)), kMilliPerGpu,
                                      1000, 1024, rng.below(2) == 0 ? ModelSet::any() : models);
      const std::array<TopologyLevel, 3> levels = {TopologyLevel::kNode, TopologyLevel::kLeaf,
                                                   TopologyLevel::kSpine};
      request.topology = {levels[rng.below(3)], rng.below(2) == 0 ? TopologyStrength::kRequired
                                                                  : TopologyStrength::kPreferred};
      const bool expected = by_every_node(pool, request);
      ASSERT_EQ(scheduler_detail::may_fit(pool, request), expected)
          << "seed " << seed << " step " << step;
      (expected ? fits : not_fits) += 1;
    }
  }
  EXPECT_GT(fits, 200);
  EXPECT_GT(not_fits, 200);
}

// segregate_borrowed: borrowed work starts on nodes without guaranteed work while one has room,
// guaranteed work on nodes without borrowed work; and anywhere when every node runs the other
// kind (the pass tells both cases apart by counts of nodes, not a look at each).
TEST(Scheduler, BorrowedAndGuaranteedWorkKeepToNodesOfTheirOwnWhileAnyHasRoom) {
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(8));
  std::map<std::uint32_t, std::set<std::uint32_t>> guaranteed_nodes;  // node -> jobs
  std::set<std::uint32_t> borrowed_nodes;
  auto record = [&](const PassResult& result) {
    for (const StartedJob& started : result.started) {
      for (const Assignment& a : started.assignments) {
        if (started.admission == StartAdmission::kBorrowing) {
          EXPECT_FALSE(guaranteed_nodes.contains(a.node.value))
              << "job " << started.job.value << " borrows on node " << a.node.value
              << " beside guaranteed work";
          borrowed_nodes.insert(a.node.value);
        } else {
          EXPECT_FALSE(borrowed_nodes.contains(a.node.value))
              << "job " << started.job.value << " within guarantee on node " << a.node.value
              << " beside borrowed work";
          guaranteed_nodes[a.node.value].insert(started.job.value);
        }
      }
    }
  };
  // A: one job within guarantee; B: 8 within guarantee, then 2 that borrow.
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 1, 0), 0).has_value());
  record(s.pass(0));
  for (std::uint32_t id = 10; id < 18; ++id) {
    ASSERT_TRUE(s.submit(make_test_job(id, kB, 1, 10), 10).has_value());
  }
  record(s.pass(10));
  for (std::uint32_t id = 20; id < 22; ++id) {
    ASSERT_TRUE(s.submit(make_test_job(id, kB, 1, 20), 20).has_value());
    const PassResult result = s.pass(20);
    ASSERT_EQ(result.started.size(), 1U);
    EXPECT_EQ(result.started[0].admission, StartAdmission::kBorrowing);
    record(result);
  }
  ASSERT_FALSE(borrowed_nodes.empty());
  // A's next jobs, within guarantee, keep off the borrowing node.
  for (std::uint32_t id = 30; id < 33; ++id) {
    ASSERT_TRUE(s.submit(make_test_job(id, kA, 1, 30), 30).has_value());
    const PassResult result = s.pass(30);
    ASSERT_EQ(result.started.size(), 1U);
    EXPECT_NE(result.started[0].admission, StartAdmission::kBorrowing);
    record(result);
  }

  // One node: every node runs guaranteed work, and borrowed work starts there all the same.
  auto one = Scheduler::create(test_support::make_test_pool({.nodes_per_leaf = 1}), a_and_b_book(4),
                               policy("tidepool"));
  ASSERT_TRUE(one.has_value());
  for (std::uint32_t id = 0; id < 5; ++id) {
    ASSERT_TRUE(one->submit(make_test_job(id, kB, 1, 0), 0).has_value());
  }
  const PassResult result = one->pass(0);
  ASSERT_EQ(result.started.size(), 5U);
  EXPECT_EQ(result.started.back().admission, StartAdmission::kBorrowing);
}

TEST(Scheduler, ATenantsShortJobStopsItsOwnLongJobOnceThatPassedAThreshold) {
  // B may not borrow: its 16 GPUs are its own, and A's stay A's.
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 0));
  ASSERT_NO_FATAL_FAILURE(start_two_long_jobs_of_b(s));
  // A fresh job of B at 20 min: its long jobs have not run min_slice_run (30 min) yet.
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 1200, 600, 8), 1200).has_value());
  EXPECT_TRUE(s.pass(1200).preempted.empty());
  EXPECT_EQ(s.reason(JobId{2})->kind, PendingKind::kQuota);
  // At 40 min each long job attained 8 x 2400 GPU-s, past the first band: one is stopped.
  PassResult later = s.pass(2400);
  ASSERT_EQ(later.preempted.size(), 1U);
  EXPECT_EQ(later.preempted[0].cause, PreemptionCause::kTimeSlice);
  EXPECT_EQ(later.preempted[0].beneficiary, JobId{2});
  ASSERT_EQ(later.started.size(), 1U);
  EXPECT_EQ(later.started[0].job, JobId{2});
  EXPECT_EQ(later.started[0].admission, StartAdmission::kWithinGuarantee);
  // A is untouched and B stays within its own guarantee.
  EXPECT_EQ(s.usage_milli(kB), 16000);
  EXPECT_EQ(s.book().usage(kB, kH100), 16000);
  ASSERT_TRUE(s.pool().check_invariants().has_value());
}

TEST(Scheduler, ATimeSliceWaitsForTheVictimsCheckpointAndThePassWakesThen) {
  SchedulerConfig config = policy("tidepool");
  config.max_slice_loss = 60;
  Scheduler s = make_scheduler(config, a_and_b_book(16, 0));
  ASSERT_NO_FATAL_FAILURE(start_two_long_jobs_of_b(s));
  // At 2500 s each long job ran 100 s since its last checkpoint (every 600 s): more than 60.
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 2500, 600, 8), 2500).has_value());
  EXPECT_TRUE(s.pass(2500).preempted.empty());
  EXPECT_EQ(s.next_wakeup(2500), std::optional<Seconds>{3000});
  // At its next checkpoint one is stopped, losing nothing.
  PassResult later = s.pass(3000);
  ASSERT_EQ(later.preempted.size(), 1U);
  EXPECT_EQ(later.preempted[0].cause, PreemptionCause::kTimeSlice);
  EXPECT_EQ(later.preempted[0].lost_gpu_seconds, 0);
  ASSERT_EQ(later.started.size(), 1U);
  EXPECT_EQ(later.started[0].job, JobId{2});
  EXPECT_FALSE(s.next_wakeup(3000).has_value());
}

TEST(Scheduler, AJobOfAnotherModelIsNotHeldByTheQuotaReasonOfTheJobAheadOfIt) {
  // A and B are guaranteed 8 H100 each; B also 16 A100, which A may borrow while B leaves them
  // idle.
  const Pool pool = test_support::make_two_model_pool();
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (const std::string name : {"A", "B"}) {
    TenantSpec t;
    t.name = name;
    t.quotas.push_back({GpuModelId{0}, 8000, std::nullopt, std::nullopt});
    if (name == "B") t.quotas.push_back({GpuModelId{1}, 16000, std::nullopt, std::nullopt});
    org.tenants.push_back(std::move(t));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), pool.models());
  ASSERT_TRUE(book.has_value()) << book.error().message();
  auto made = Scheduler::create(pool, std::move(*book), policy("tidepool"));
  ASSERT_TRUE(made.has_value()) << made.error().message();
  Scheduler s = std::move(*made);
  const auto on = [](Job job, GpuModelId model) {
    job.gang.task.models = ModelSet::only(model);
    return job;
  };
  // Every H100 is taken, each tenant within its guarantee.
  ASSERT_TRUE(s.submit(on(make_test_job(1, kA, 8, 0, 100000, 8), GpuModelId{0}), 0).has_value());
  ASSERT_TRUE(s.submit(on(make_test_job(2, kB, 8, 0, 100000, 8), GpuModelId{0}), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 2U);
  // A's next H100 job can only wait; its A100 job behind it may borrow B's idle A100s.
  ASSERT_TRUE(s.submit(on(make_test_job(3, kA, 1, 10), GpuModelId{0}), 10).has_value());
  ASSERT_TRUE(s.submit(on(make_test_job(4, kA, 1, 20), GpuModelId{1}), 20).has_value());
  const PassResult pass = s.pass(30);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{4});
  const PendingReason* waits = s.reason(JobId{3});
  ASSERT_NE(waits, nullptr);
  EXPECT_EQ(waits->kind, PendingKind::kQuota);
  // In GPUs, and the job's own models.
  EXPECT_THAT(std::string(waits->message()),
              HasSubstr("tenant A uses 8 of its 8 guaranteed H100 GPUs"));
  EXPECT_THAT(std::string(waits->message()), Not(HasSubstr("A100")));
}

TEST(Scheduler, EstimatedStartCountsTheJobsAheadAndThePredictedEnds) {
  Scheduler s = make_scheduler(policy("fifo-firstfit"));
  // The pool's 32 GPUs: 16 until 1000, 16 until 3000 (their estimates, with no history).
  ASSERT_TRUE(s.submit(make_test_job(0, kB, 16, 0, 1000, 8), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(1, kB, 16, 0, 3000, 8), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 2U);
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 10, 600, 8), 10).has_value());
  ASSERT_TRUE(s.submit(make_test_job(3, kB, 16, 11, 600, 8), 11).has_value());
  ASSERT_TRUE(s.submit(make_test_job(4, kB, 64, 12, 600, 8), 12).has_value());
  (void)s.pass(20);
  // Job 2 needs 8: the first end frees 16. Job 3 needs 16 behind job 2's 8: the second end.
  EXPECT_EQ(s.estimated_start(JobId{2}, 20), 1000);
  EXPECT_EQ(s.estimated_start(JobId{3}, 20), 3000);
  // More than the pool ever frees; a running or unknown job has none.
  EXPECT_FALSE(s.estimated_start(JobId{4}, 20).has_value());
  EXPECT_FALSE(s.estimated_start(JobId{0}, 20).has_value());
  EXPECT_FALSE(s.estimated_start(JobId{77}, 20).has_value());
  // Once the first job ended, job 2's GPUs are free now.
  ASSERT_TRUE(s.finish(JobId{0}, 900, 900).has_value());
  EXPECT_EQ(s.estimated_start(JobId{2}, 900), 900);
}

TEST(Scheduler, APendingJobKnowsItsPlaceInItsTenantsLaneAndWhoIsAhead) {
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 0));
  ASSERT_TRUE(s.submit(make_test_job(0, kB, 16, 0, 100000, 8), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 1U);
  EXPECT_EQ(s.attained_gpu_seconds(JobId{0}, 100), 1600);
  for (std::uint32_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(s.submit(make_test_job(id, kB, 8, 10 * id, 600, 8), 10 * id).has_value());
  }
  // A's job does not share B's lane.
  ASSERT_TRUE(s.submit(make_test_job(9, kA, 32, 5, 600, 8), 5).has_value());
  (void)s.pass(100);
  const auto third = s.lane_place(JobId{3}, 100);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->position, 3);
  EXPECT_EQ(third->lane_size, 3);
  EXPECT_EQ(third->order, "las");
  EXPECT_FALSE(third->promoted);
  EXPECT_EQ(third->attained_gpu_seconds, 0);
  EXPECT_THAT(third->rank, HasSubstr("attained 0.0 GPU-h"));
  EXPECT_EQ(third->ahead, (std::vector<JobId>{JobId{2}, JobId{1}}));
  EXPECT_EQ(s.lane_place(JobId{1}, 100)->position, 1);
  EXPECT_EQ(s.lane_place(JobId{2}, 100, 0)->ahead.size(), 0U);
  // Only pending jobs have a place; unknown jobs have nothing.
  EXPECT_FALSE(s.lane_place(JobId{0}, 100).has_value());
  EXPECT_FALSE(s.lane_place(JobId{77}, 100).has_value());
  EXPECT_FALSE(s.attained_gpu_seconds(JobId{77}, 100).has_value());
}

TEST(Scheduler, ServiceCreditedFromEarlierRunsRanksAWaitingJobAgain) {
  // B's 32 GPUs are taken by a long job, so two later jobs of B wait, the first first.
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 16));
  ASSERT_TRUE(s.submit(make_test_job(0, kB, 32, 0, 100000, 8), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 1U);
  ASSERT_TRUE(s.submit(make_test_job(1, kB, 8, 10, 600, 8), 10).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 20, 600, 8), 20).has_value());
  (void)s.pass(100);
  ASSERT_EQ(s.lane_place(JobId{1}, 100)->position, 1);
  // Job 1 ran 8 GPUs x 10 h before (a server restarted since): it is past the first LAS band.
  ASSERT_TRUE(s.credit_attained(JobId{1}, 8 * 36'000).has_value());
  EXPECT_EQ(s.attained_gpu_seconds(JobId{1}, 100), 8 * 36'000);
  EXPECT_EQ(s.lane_place(JobId{1}, 100)->position, 2);
  EXPECT_EQ(s.lane_place(JobId{2}, 100)->position, 1);
  // The running job keeps what it attained in this run besides.
  ASSERT_TRUE(s.credit_attained(JobId{0}, 1000).has_value());
  EXPECT_EQ(s.attained_gpu_seconds(JobId{0}, 100), 32 * 100 + 1000);
  // Nothing changes for a bad amount, an unknown job or an ended one.
  EXPECT_EQ(s.credit_attained(JobId{2}, -1).error().field, "attained_gpu_seconds");
  EXPECT_EQ(s.credit_attained(JobId{77}, 1).error().field, "job");
  ASSERT_TRUE(s.finish(JobId{0}, 200, 200).has_value());
  EXPECT_FALSE(s.credit_attained(JobId{0}, 1).has_value());
  EXPECT_EQ(s.attained_gpu_seconds(JobId{2}, 200), 0);
}

TEST(Scheduler, AGangPolicyPlacesWholeGpuJobsAndAnUnknownOneIsRefused) {
  SchedulerConfig unknown = policy("tidepool");
  unknown.gang_policy = "slurm";
  auto refused = Scheduler::create(two_leaf_pool(), a_and_b_book(), unknown);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "gang_policy");
  EXPECT_THAT(refused.error().reason, HasSubstr("fgd"));
  // Eight 2-GPU jobs: the gang placement packs them onto two nodes; the random policy spreads
  // them, each still on one node, as compactly as the gang placement places it.
  auto nodes_used = [](Scheduler& s) {
    for (std::uint32_t id = 0; id < 8; ++id) {
      EXPECT_TRUE(s.submit(make_test_job(id, kA, 2, 0, 1000, 2), 0).has_value());
    }
    const PassResult pass = s.pass(0);
    EXPECT_EQ(pass.started.size(), 8U);
    std::set<std::uint32_t> nodes;
    for (const StartedJob& started : pass.started) {
      EXPECT_EQ(started.assignments.size(), 1U);
      EXPECT_EQ(gpu_set_size(started.assignments[0].gpus), 2);
      nodes.insert(started.assignments[0].node.value);
    }
    return nodes.size();
  };
  SchedulerConfig planner_alone = policy("tidepool");
  planner_alone.gang_policy.clear();
  Scheduler packed = make_scheduler(planner_alone);
  EXPECT_EQ(nodes_used(packed), 2U);
  SchedulerConfig spread = policy("tidepool");
  spread.gang_policy = "random";
  Scheduler s = make_scheduler(spread);
  EXPECT_GT(nodes_used(s), 2U);
  EXPECT_TRUE(s.pool().check_invariants().has_value());
}

TEST(Scheduler, ReclaimMakesRoomForAGangWithinOneLeafWhereOneCanHoldIt) {
  // B borrows 8 GPUs: four 4-GPU jobs fill leaf 0 (nodes 0 and 1), two fill node 2 of leaf 1;
  // node 3 is free. A's 4 x 4-GPU gang (within its guarantee) needs 8 more GPUs: taking two of
  // B's jobs on leaf 0 would split it over both leaves; taking the two on node 2 keeps it in one.
  Scheduler s = make_scheduler(policy("tidepool"));
  const std::array<std::pair<std::uint32_t, std::uint32_t>, 6> places = {
      {{0, 0x0F}, {0, 0xF0}, {1, 0x0F}, {1, 0xF0}, {2, 0x0F}, {2, 0xF0}}};
  for (std::uint32_t i = 0; i < places.size(); ++i) {
    const std::array<Assignment, 1> where{Assignment{NodeId{places[i].first}, places[i].second}};
    ASSERT_TRUE(s.adopt(make_test_job(i, kB, 4, 0, 100000, 4), where, 0, 0).has_value());
  }
  ASSERT_EQ(s.book().borrowed(kB, kH100), 8000);
  ASSERT_TRUE(s.submit(make_test_job(10, kA, 16, 3600, 1000, 4), 3600).has_value());
  const PassResult pass = s.pass(3600);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].span.leaves, 1);
  ASSERT_EQ(pass.preempted.size(), 2U);
  for (const PreemptedJob& p : pass.preempted) {
    EXPECT_EQ(p.cause, PreemptionCause::kReclaim);
    EXPECT_GE(p.job.value, 4U) << "a job of leaf 0 was taken";
  }
  ASSERT_TRUE(s.pool().check_invariants().has_value());
}

TEST(Scheduler, AJobWithNoRoomToBeMadeDoesNotHoldBackOneOfAnotherShape) {
  // B runs 6 GPUs of each node that cannot be taken and a borrowed one that can; one GPU of each
  // node is free. A, within its guarantee, asks for 6 GPUs twice: on one node (no node can be
  // cleared for it) and as six 1-GPU tasks (the 4 free GPUs and 2 reclaimed).
  Scheduler s = make_scheduler(policy("tidepool"));
  for (std::uint32_t n = 0; n < 4; ++n) {
    Job fixed = make_test_job(100 + n, kB, 6, 0, 100000, 6);
    fixed.preemptible = false;
    const std::array<Assignment, 1> on_six{Assignment{NodeId{n}, 0x3F}};
    ASSERT_TRUE(s.adopt(fixed, on_six, 0, 0).has_value());
    const std::array<Assignment, 1> on_one{Assignment{NodeId{n}, 0x40}};
    ASSERT_TRUE(s.adopt(make_test_job(200 + n, kB, 1, 0, 100000), on_one, 0, 0).has_value());
  }
  ASSERT_GT(s.book().borrowed(kB, kH100), 0);
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 6, 1000, 1000, 6), 1000).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kA, 6, 1000, 1000, 1), 1000).has_value());
  const PassResult pass = s.pass(1000);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{2});
  EXPECT_EQ(pass.preempted.size(), 2U);
  EXPECT_EQ(s.phase(JobId{1}), JobPhase::kPending);
  EXPECT_TRUE(s.pool().check_invariants().has_value());
}

TEST(Scheduler, APromotedJobStopsItsOwnTenantsJobWhateverItsRank) {
  SchedulerConfig config = policy("tidepool");
  config.lane_order = LaneOrderKind::kShortestRemaining;
  config.starvation_limit = 3600;
  Scheduler s = make_scheduler(config, a_and_b_book(16, 0));
  ASSERT_NO_FATAL_FAILURE(start_two_long_jobs_of_b(s));
  // Longer than both: under srpt it is not clearly ahead of them, so it does not slice...
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 0, 400000, 8), 0).has_value());
  EXPECT_TRUE(s.pass(0).preempted.empty());
  EXPECT_TRUE(s.pass(1800).preempted.empty());
  // ...until it has waited the starvation limit: promoted, it stops one of them at once instead
  // of waiting for them to end.
  const PassResult promoted = s.pass(3600);
  ASSERT_EQ(promoted.preempted.size(), 1U);
  EXPECT_EQ(promoted.preempted[0].cause, PreemptionCause::kTimeSlice);
  EXPECT_EQ(promoted.preempted[0].beneficiary, JobId{2});
  ASSERT_EQ(promoted.started.size(), 1U);
  EXPECT_EQ(promoted.started[0].job, JobId{2});
  EXPECT_EQ(s.book().usage(kB, kH100), 16000);
  // The stopped job is not promoted in turn: it waits its own limit again.
  const auto victim = s.lane_place(promoted.preempted[0].job, 3600);
  ASSERT_TRUE(victim.has_value());
  EXPECT_FALSE(victim->promoted);
}

TEST(Scheduler, TimeSlicingNeverTakesAnotherTenantBelowItsGuarantee) {
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 0));
  // A runs its 16 guaranteed GPUs with long jobs; B fills its own 16.
  for (std::uint32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kA, 8, 0, 100000, 8), 0).has_value());
    ASSERT_TRUE(s.submit(make_test_job(10 + i, kB, 8, 0, 100000, 8), 0).has_value());
  }
  ASSERT_EQ(s.pass(0).started.size(), 4U);
  // Many short jobs of B: they may stop B's long jobs, never A's.
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(20 + i, kB, 4, 3600, 600, 4), 3600).has_value());
  }
  PassResult pass = s.pass(7200);
  for (const PreemptedJob& p : pass.preempted) {
    EXPECT_GE(p.job.value, 10U) << "job " << p.job.value << " of A was stopped";
  }
  EXPECT_FALSE(pass.preempted.empty());
  EXPECT_EQ(s.usage_milli(kA), 16000);
  EXPECT_EQ(s.book().usage(kB, kH100), 16000);
}

TEST(Scheduler, TimeSlicingNeedsACheckpointAndCanBeSwitchedOff) {
  for (bool slicing : {true, false}) {
    SchedulerConfig config = policy("tidepool");
    config.time_slicing = slicing;
    Scheduler s = make_scheduler(config, a_and_b_book(16, 0));
    Job no_checkpoint = make_test_job(0, kB, 8, 0, 100000, 8);
    no_checkpoint.checkpoint_interval.reset();
    ASSERT_TRUE(s.submit(no_checkpoint, 0).has_value());
    ASSERT_TRUE(s.submit(make_test_job(1, kB, 8, 0, 100000, 8), 0).has_value());
    ASSERT_EQ(s.pass(0).started.size(), 2U);
    ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 3600, 600, 8), 3600).has_value());
    PassResult pass = s.pass(7200);
    if (!slicing) {
      EXPECT_TRUE(pass.preempted.empty());
      continue;
    }
    ASSERT_EQ(pass.preempted.size(), 1U);
    EXPECT_EQ(pass.preempted[0].job, JobId{1});  // the one that checkpoints
  }
}

// How long the one big job among a tenant's stream of short jobs waits (nullopt: it never
// started in 48 hours), under `starvation_limit`.
std::optional<Seconds> big_job_wait(std::uint64_t seed, Seconds starvation_limit) {
  SchedulerConfig config = policy("tidepool");
  config.starvation_limit = starvation_limit;
  Scheduler s = make_scheduler(config, a_and_b_book(16, 0));
  Rng rng(seed);
  std::map<std::uint32_t, Seconds> ends;
  std::uint32_t next = 0;
  constexpr std::uint32_t kBig = 7;
  constexpr Seconds kShort = 1200;
  Seconds big_submitted = 0;
  for (Seconds t = 0; t <= 48 * 3600; t += 300) {
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > t) {
        ++it;
        continue;
      }
      EXPECT_TRUE(s.finish(JobId{it->first}, t, std::nullopt).has_value());
      it = ends.erase(it);
    }
    if (t < 40 * 3600) {
      // More short work than B's 16 GPUs serve, so B always has a backlog.
      const int count = 4 + static_cast<int>(rng.below(3));
      for (int k = 0; k < count; ++k, ++next) {
        const bool big = next == kBig;
        Job job = make_test_job(next, kB, big ? 16 : 1, t, kShort, big ? 8 : 1);
        job.checkpoint_interval.reset();  // nothing is sliced: only aging can help
        EXPECT_TRUE(s.submit(job, t).has_value());
        if (big) big_submitted = t;
      }
    }
    PassResult pass = s.pass(t);
    EXPECT_TRUE(pass.preempted.empty());
    for (const StartedJob& started : pass.started) {
      if (started.job.value == kBig) return t - big_submitted;
      ends[started.job.value] = t + kShort;
    }
  }
  return std::nullopt;
}

TEST(SchedulerProperty, AJobThatWaitedTheStarvationLimitStartsOnceItsTenantDrains) {
  // Promoted after the limit, the big job holds its tenant's lane, so the short jobs' GPUs come to
  // it within their runtime (and a pass). Without aging the later short jobs keep overtaking it.
  constexpr Seconds kLimit = 4 * 3600;
  int starved_without = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto wait = big_job_wait(seed, kLimit);
    ASSERT_TRUE(wait.has_value()) << "seed " << seed;
    EXPECT_LE(*wait, kLimit + 1200 + 300) << "seed " << seed;
    const auto without = big_job_wait(seed, 0);
    if (!without || *without > kLimit + 1200 + 300) ++starved_without;
  }
  EXPECT_GT(starved_without, 0) << "the stream does not starve the big job: the test shows nothing";
}

TEST(Scheduler, QuotaRefusalSaysWhyWithNumbers) {
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 0));
  for (std::uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kB, 8, 0, 1000, 8), 0).has_value());
  }
  PassResult pass = s.pass(0);
  EXPECT_EQ(pass.started.size(), 2U);
  const PendingReason* why = s.reason(JobId{2});
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->kind, PendingKind::kQuota);
  EXPECT_THAT(std::string(why->message()), HasSubstr("16 of its 16 guaranteed"));
  EXPECT_THAT(std::string(why->message()), HasSubstr("its borrowing limit is 0 GPUs"));
}

// B is guaranteed 16 GPUs and may borrow 4; it runs 18, so 2 are left to borrow.
Scheduler tenant_b_with_two_gpus_to_borrow() {
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(16, 4));
  for (std::uint32_t i = 0; i < 18; ++i) {
    EXPECT_TRUE(s.submit(make_test_job(i, kB, 1, 0, 100000), 0).has_value());
  }
  EXPECT_EQ(s.pass(0).started.size(), 18U);
  return s;
}

TEST(Scheduler, BehindAJobThatAsksForNoMoreAndWaitsForQuotaTheLaneWaitsToo) {
  Scheduler s = tenant_b_with_two_gpus_to_borrow();
  // Three 4-GPU jobs: each would borrow 4, and 2 are left.
  for (std::uint32_t i = 100; i < 103; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kB, 4, 10, 1000, 4), 10).has_value());
  }
  EXPECT_TRUE(s.pass(10).started.empty());
  const PendingReason* first = s.reason(JobId{100});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->kind, PendingKind::kQuota);
  EXPECT_THAT(std::string(first->message()), HasSubstr("and 2 may be"));
  // The pass ends the lane at the first: the others wait behind it, for quota.
  for (std::uint32_t i = 101; i < 103; ++i) {
    const PendingReason* why = s.reason(JobId{i});
    ASSERT_NE(why, nullptr);
    EXPECT_EQ(why->kind, PendingKind::kQuota);
    EXPECT_THAT(std::string(why->message()), HasSubstr("behind job 100 of the same tenant"));
  }
}

TEST(Scheduler, ALaneWaitingForQuotaStillStartsALaterSmallerJob) {
  Scheduler s = tenant_b_with_two_gpus_to_borrow();
  ASSERT_TRUE(s.submit(make_test_job(100, kB, 4, 10, 1000, 4), 10).has_value());
  ASSERT_TRUE(s.submit(make_test_job(101, kB, 4, 10, 1000, 4), 10).has_value());
  ASSERT_TRUE(s.submit(make_test_job(102, kB, 2, 10, 1000, 2), 10).has_value());
  const PassResult pass = s.pass(10);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started.front().job, JobId{102});
  EXPECT_EQ(pass.started.front().admission, StartAdmission::kBorrowing);
  const PendingReason* why = s.reason(JobId{101});
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->kind, PendingKind::kQuota);
  EXPECT_THAT(std::string(why->message()), Not(HasSubstr("behind job")));
}

TEST(Scheduler, BackfillNeverDelaysTheReservedStart) {
  SchedulerConfig config = policy("tidepool");
  config.quotas = config.reclaim = config.priority_preemption = false;
  Scheduler s = make_scheduler(config);
  ASSERT_TRUE(s.submit(make_test_job(0, kA, 28, 0, 1000), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 1U);
  // Job 1 needs 30 GPUs: it is reserved for t = 1000, where 2 GPUs stay free beside it.
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 30, 10, 1000), 10).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kA, 4, 10, 5000), 10).has_value());  // runs past 1000
  ASSERT_TRUE(s.submit(make_test_job(3, kA, 4, 10, 500), 10).has_value());   // ends by 1000
  PassResult pass = s.pass(10);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{3});
  EXPECT_TRUE(pass.started[0].backfilled);
  EXPECT_EQ(s.reason(JobId{1})->kind, PendingKind::kCapacity);
  EXPECT_EQ(s.reason(JobId{2})->kind, PendingKind::kReservation);
  // For pre-warming: job 1 is expected when job 0 ends at 1000, on the nodes it then fits on.
  // Job 2 would fit when job 3 ends at 510, but not before job 1: it waits behind it.
  const std::vector<ExpectedStart> next = s.expected_starts(10, 2000, 64);
  ASSERT_EQ(next.size(), 1U);
  EXPECT_EQ(next[0].job, JobId{1});
  EXPECT_EQ(next[0].start, 1000);
  EXPECT_TRUE(std::is_sorted(next[0].nodes.begin(), next[0].nodes.end()));
  EXPECT_GE(next[0].nodes.size(), 2U);
  EXPECT_TRUE(s.expected_starts(10, 900, 64).empty());  // job 0 ends after 910
  EXPECT_THAT(std::string(s.reason(JobId{2})->message()), HasSubstr("reservation of job 1"));
}

// Asking for the expected starts (pre-warming) changes no schedule: two schedulers fed the same
// random jobs, one asked after every pass, start and preempt the same jobs in the same places,
// under every policy and with a placement policy that draws random numbers.
TEST(Scheduler, AskingForExpectedStartsChangesNoSchedule) {
  for (std::string_view name : scheduler_policy_names()) {
    for (const std::string gang_policy : {"", "random"}) {
      SchedulerConfig config = policy(name);
      config.gang_policy = gang_policy;
      Scheduler plain = make_scheduler(config);
      Scheduler asked = make_scheduler(config);
      Rng rng(7);
      std::vector<JobId> running;
      std::uint32_t next_id = 0;
      int expected = 0;
      for (Seconds t = 0; t < 40 * 300; t += 300) {
        for (auto k = rng.below(4); k > 0; --k) {
          const int gpus = std::array{1, 2, 4, 8, 16}[rng.below(5)];
          const Job job = make_test_job(next_id++, rng.below(2) == 0 ? kA : kB, gpus, t,
                                        static_cast<Seconds>(rng.below(10) + 1) * 300);
          ASSERT_TRUE(plain.submit(job, t).has_value());
          ASSERT_TRUE(asked.submit(job, t).has_value());
        }
        if (!running.empty() && rng.below(2) == 0) {
          const auto at = static_cast<std::size_t>(rng.below(running.size()));
          ASSERT_TRUE(plain.finish(running[at], t, std::nullopt).has_value());
          ASSERT_TRUE(asked.finish(running[at], t, std::nullopt).has_value());
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(at));
        }
        const PassResult a = plain.pass(t);
        const PassResult b = asked.pass(t);
        expected += static_cast<int>(asked.expected_starts(t, 3600, 64).size());
        ASSERT_EQ(a.started.size(), b.started.size()) << name << " " << gang_policy << " at " << t;
        for (std::size_t i = 0; i < a.started.size(); ++i) {
          EXPECT_EQ(a.started[i].job, b.started[i].job);
          EXPECT_EQ(a.started[i].assignments, b.started[i].assignments);
        }
        ASSERT_EQ(a.preempted.size(), b.preempted.size());
        for (std::size_t i = 0; i < a.preempted.size(); ++i) {
          EXPECT_EQ(a.preempted[i].job, b.preempted[i].job);
          std::erase(running, a.preempted[i].job);
        }
        for (const StartedJob& s : a.started) running.push_back(s.job);
      }
      EXPECT_GT(expected, 0) << name << ": the test never expected a start";
    }
  }
}

TEST(Scheduler, StrictFifoHoldsEveryoneBehindTheHead) {
  Scheduler s = make_scheduler(policy("fifo-firstfit"));
  ASSERT_TRUE(s.submit(make_test_job(0, kA, 24, 0), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 16, 1), 1).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 1, 2), 2).has_value());
  PassResult pass = s.pass(2);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(s.reason(JobId{1})->kind, PendingKind::kCapacity);
  EXPECT_EQ(s.reason(JobId{2})->kind, PendingKind::kHeadOfLine);
  EXPECT_THAT(std::string(s.reason(JobId{2})->message()), HasSubstr("behind job 1"));
}

TEST(Scheduler, FirstFitSpreadsWhereTopologyPlacementKeepsANodeWhole) {
  Scheduler fifo = make_scheduler(policy("fifo-firstfit"));
  Scheduler tide = make_scheduler(policy("tidepool"));
  for (Scheduler* s : {&fifo, &tide}) {
    ASSERT_TRUE(s->submit(make_test_job(0, kA, 4, 0), 0).has_value());
    ASSERT_TRUE(s->pass(0).started.size() == 1U);
  }
  for (Scheduler* s : {&fifo, &tide}) ASSERT_TRUE(s->submit(make_test_job(1, kA, 8, 1), 1));
  EXPECT_EQ(fifo.pass(1).started.at(0).span.nodes, 2);
  EXPECT_EQ(tide.pass(1).started.at(0).span.nodes, 1);
}

TEST(Scheduler, TidalWindowHoldsCapacityAndDrainsWithCheckpoints) {
  SchedulerConfig config = policy("tidepool");
  config.quotas = false;
  config.windows.push_back({JobClass::kInference, 12 * 3600, 24 * 3600, 8});
  config.drain_lead = 1800;
  Scheduler s = make_scheduler(config);
  // Before the drain lead, a long training job may take the whole pool.
  ASSERT_TRUE(s.submit(make_test_job(0, kA, 32, 0, 100000), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 1U);
  EXPECT_EQ(s.next_wakeup(0), 12 * 3600 - 1800);
  // At the window's opening it is drained: checkpointed, no work lost.
  PassResult open = s.pass(12 * 3600);
  ASSERT_EQ(open.preempted.size(), 1U);
  EXPECT_EQ(open.preempted[0].cause, PreemptionCause::kDrain);
  EXPECT_EQ(open.preempted[0].lost_gpu_seconds, 0);
  EXPECT_TRUE(open.started.empty());
  EXPECT_EQ(s.reason(JobId{0})->kind, PendingKind::kWindow);
  EXPECT_THAT(std::string(s.reason(JobId{0})->message()), HasSubstr("until 24:00"));
  // A replica of the protected class starts at once; training may use what is not held.
  Job replica = make_test_job(1, kB, 1, 12 * 3600 + 5);
  replica.job_class = JobClass::kInference;
  ASSERT_TRUE(s.submit(replica, 12 * 3600 + 5).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kA, 24, 12 * 3600 + 5), 12 * 3600 + 5).has_value());
  PassResult next = s.pass(12 * 3600 + 5);
  ASSERT_EQ(next.started.size(), 2U);
  EXPECT_EQ(next.started[0].job, JobId{1});
  EXPECT_EQ(next.started[0].admission, StartAdmission::kWindow);
  EXPECT_EQ(next.started[1].job, JobId{2});
}

TEST(Scheduler, WhileAWindowIsOpenATenantBelowWhatIsLeftOfItsGuaranteeReclaimsIt) {
  SchedulerConfig config = policy("tidepool");
  config.windows.push_back({JobClass::kInference, 12 * 3600, 24 * 3600, 8});
  Scheduler s = make_scheduler(config);  // A and B guaranteed 16 GPUs each of 32
  for (std::uint32_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, i < 4 ? kB : kA, 4, 0, 100000, 4), 0).has_value());
  }
  ASSERT_EQ(s.pass(0).started.size(), 6U);  // B 16 GPUs, A 8, 8 free
  // The window holds the 8 free GPUs and takes 4 out of each guarantee: B now borrows 4.
  EXPECT_TRUE(s.pass(12 * 3600).preempted.empty());
  EXPECT_EQ(s.book().guaranteed(kB, kH100), 12000);
  EXPECT_EQ(s.book().borrowed(kB, kH100), 4000);
  // A's next job is within what is left of A's guarantee: reclaim takes B's 4 back.
  ASSERT_TRUE(s.submit(make_test_job(6, kA, 4, 12 * 3600 + 5, 1000, 4), 12 * 3600 + 5).has_value());
  PassResult pass = s.pass(12 * 3600 + 5);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{6});
  ASSERT_EQ(pass.preempted.size(), 1U);
  EXPECT_LT(pass.preempted[0].job.value, 4U);  // one of B's
  EXPECT_EQ(pass.preempted[0].beneficiary, JobId{6});
  // At the window's close the whole guarantees are back.
  EXPECT_TRUE(s.pass(24 * 3600).preempted.empty());
  EXPECT_EQ(s.book().guaranteed(kB, kH100), 16000);
}

TEST(Scheduler, EmergencyLoanTakesFromBorrowersAndIsReturned) {
  Scheduler s = make_scheduler(policy("tidepool"));
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.submit(make_test_job(i, kB, 8, 0, 100000, 8), 0).has_value());
  }
  ASSERT_EQ(s.pass(0).started.size(), 4U);
  ASSERT_TRUE(s.grant_loan(Loan{kA, kH100, 8000, 100, 700}, 100).has_value());
  EXPECT_EQ(s.book().guaranteed(kA, kH100), 24000);
  Job milestone = make_test_job(9, kA, 24, 100, 600, 8);
  milestone.priority_class = 100;
  milestone.preemptible = false;
  ASSERT_TRUE(s.submit(milestone, 100).has_value());
  PassResult pass = s.pass(100);
  EXPECT_EQ(pass.preempted.size(), 3U);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{9});
  EXPECT_EQ(s.next_wakeup(100), 700);
  ASSERT_TRUE(s.finish(JobId{9}, 700, std::nullopt).has_value());
  PassResult end = s.pass(700);
  ASSERT_EQ(end.loans_returned.size(), 1U);
  EXPECT_EQ(s.book().guaranteed(kA, kH100), 16000);
}

TEST(Scheduler, LeastAttainedServicePreemptsLongRunners) {
  Scheduler s = make_scheduler(policy("tiresias"));
  ASSERT_TRUE(s.submit(make_test_job(0, kA, 32, 0, 100000), 0).has_value());
  ASSERT_EQ(s.pass(0).started.size(), 1U);
  ASSERT_TRUE(s.submit(make_test_job(1, kB, 8, 5000), 5000).has_value());
  PassResult pass = s.pass(5000);
  ASSERT_EQ(pass.preempted.size(), 1U);
  EXPECT_EQ(pass.preempted[0].cause, PreemptionCause::kLeastAttained);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{1});
}

TEST(Scheduler, FractionsArePackedByTheFragmentationAwarePolicy) {
  SchedulerConfig config = policy("tidepool");
  config.quotas = false;
  const TaskShape half = *make_task_shape(1, 500, 1000, 1024);
  config.typical_tasks = {half, *make_task_shape(1, 1000, 1000, 1024)};
  Scheduler s = make_scheduler(config);
  for (std::uint32_t i = 0; i < 2; ++i) {
    Job job = make_test_job(i, kA, 1, 0);
    job.gang.task = half;
    ASSERT_TRUE(s.submit(job, 0).has_value());
  }
  PassResult pass = s.pass(0);
  ASSERT_EQ(pass.started.size(), 2U);
  // Both halves share one GPU: no GPU is left half used.
  EXPECT_EQ(pass.started[0].assignments[0], pass.started[1].assignments[0]);
  EXPECT_EQ(s.pool().allocated_milli_gpu(), 1000);
}

TEST(Scheduler, RefusesBadCallsWithoutChangingState) {
  Scheduler s = make_scheduler(policy("tidepool"));
  Job bad = make_test_job(0, kA, 8, 0);
  bad.gang.task_count = 0;
  EXPECT_FALSE(s.submit(bad, 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 8, 0), 0).has_value());
  auto twice = s.submit(make_test_job(1, kA, 8, 0), 0);
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().field, "id");
  EXPECT_FALSE(s.finish(JobId{1}, 5, std::nullopt).has_value());  // pending, not running
  EXPECT_FALSE(s.finish(JobId{7}, 5, std::nullopt).has_value());
  EXPECT_FALSE(s.grant_loan(Loan{kA, kH100, 8000, 0, 0}, 10).has_value());
  EXPECT_EQ(s.pending_count(), 1);
}

// Random workloads: after every pass the pool keeps its invariants, gangs are whole, the book
// holds exactly the running jobs' GPUs, no tenant is above its guarantee without a recorded
// borrow, and the same input gives the same decisions.
std::vector<std::string> random_run(std::uint64_t seed, std::string_view name) {
  Scheduler s = make_scheduler(policy(name));
  Rng rng(seed);
  std::vector<std::string> log;
  std::vector<Job> jobs;
  std::map<std::uint32_t, Seconds> ends;
  std::uint32_t next_id = 0;
  for (Seconds t = 0; t < 200 * 60; t += 60) {
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second <= t) {
        EXPECT_TRUE(s.finish(JobId{it->first}, t, t % 900).has_value());
        it = ends.erase(it);
      } else {
        ++it;
      }
    }
    for (std::uint64_t k = rng.below(3); k > 0; --k) {
      const int gpus = std::array{1, 2, 4, 8, 16}[rng.below(5)];
      Job job = make_test_job(next_id++, TenantId{static_cast<std::uint32_t>(rng.below(2))}, gpus,
                              t, static_cast<Seconds>(300 + rng.below(3000)), gpus >= 8 ? 8 : 1);
      job.priority_class = static_cast<int>(rng.below(2));
      job.gang.topology.level = gpus <= 8 ? TopologyLevel::kNode : TopologyLevel::kLeaf;
      job.gang.topology.strength =
          rng.below(2) == 0 ? TopologyStrength::kRequired : TopologyStrength::kPreferred;
      EXPECT_TRUE(s.submit(job, t).has_value());
      jobs.push_back(job);
    }
    PassResult pass = s.pass(t);
    for (const PreemptedJob& p : pass.preempted) {
      ends.erase(p.job.value);
      log.push_back(fmt::format("{} preempt {} {}", t, p.job.value, p.lost_gpu_seconds));
    }
    for (const StartedJob& st : pass.started) {
      const Job& job = jobs[st.job.value];
      EXPECT_EQ(static_cast<int>(st.assignments.size()), job.gang.task_count);
      if (st.admission == StartAdmission::kWithinGuarantee) {
        EXPECT_EQ(st.borrowed_milli, 0);
      }
      if (st.admission == StartAdmission::kBorrowing) {
        EXPECT_GT(st.borrowed_milli, 0);
      }
      ends[st.job.value] = t + 60 * static_cast<Seconds>(1 + rng.below(30));
      log.push_back(
          fmt::format("{} start {} on {}", t, st.job.value, st.assignments.front().node.value));
    }
    EXPECT_TRUE(s.pool().check_invariants().has_value());
    std::int64_t allocated = 0;
    for (TenantId t2 : {kA, kB}) {
      if (s.config().quotas) {
        EXPECT_EQ(s.book().usage(t2, kH100), s.usage_milli(t2));
        EXPECT_EQ(s.book().borrowed(t2, kH100),
                  std::max<std::int64_t>(0, s.usage_milli(t2) - s.book().guaranteed(t2, kH100)));
      }
      allocated += s.usage_milli(t2);
    }
    EXPECT_EQ(allocated, s.pool().allocated_milli_gpu());
    if (s.config().quotas) {
      EXPECT_LE(s.book().reclaim_needed(kH100), 0);
    }
  }
  return log;
}

TEST(SchedulerProperty, InvariantsHoldAndTheSameInputGivesTheSameSchedule) {
  for (std::string_view name : scheduler_policy_names()) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      const auto first = random_run(seed, name);
      EXPECT_FALSE(first.empty());
      EXPECT_EQ(first, random_run(seed, name)) << name << " seed " << seed;
    }
  }
}

// Making room against its reference (scheduler_detail::find_room_naively: candidates found anew
// after every change, victims tried on copies of the pool): random workloads, mostly one-GPU
// jobs on a pool kept full, where a tenant without a guarantee borrows and the others reclaim,
// higher priorities preempt, tenants slice their own long jobs and nodes are cordoned now and
// then. Every pass must preempt the same victims for the same jobs, start the same jobs in the
// same places and wake at the same time.
struct RoomRunCounts {
  int passes = 0;
  int preempted = 0;
  int for_one_gpu = 0;  // preempted for a job of one one-GPU task that may go to any node
  std::map<PreemptionCause, int> by_cause;
};

// Tenants A (no guarantee: all it runs borrows), B (40 GPUs) and C (32), borrowing unlimited: B
// and C go above and below their guarantees.
TenantBook borrower_and_two_owners_book() {
  TenantsSpec spec;
  OrgSpec org;
  org.name = "org";
  for (const std::string name : {"A", "B", "C"}) {
    TenantSpec t;
    t.name = name;
    if (name != "A") {
      t.quotas.push_back(
          {kH100, (name == "B" ? 40 : 32) * kMilliPerGpu, std::nullopt, std::nullopt});
    }
    org.tenants.push_back(std::move(t));
  }
  spec.orgs.push_back(std::move(org));
  auto book = TenantBook::create(std::move(spec), h100_catalog());
  EXPECT_TRUE(book.has_value()) << book.error().message();
  return std::move(book).value();
}

std::string describe_pass(const PassResult& pass) {
  std::string text;
  for (const PreemptedJob& p : pass.preempted) {
    text +=
        fmt::format("preempt {} {} for {} lost {}; ", p.job.value, preemption_cause_name(p.cause),
                    p.beneficiary ? p.beneficiary->value : 0, p.lost_gpu_seconds);
  }
  for (const StartedJob& st : pass.started) {
    text += fmt::format("start {} {} {} {}", st.job.value, static_cast<int>(st.admission),
                        st.borrowed_milli, st.backfilled);
    for (const Assignment& a : st.assignments) text += fmt::format(" {}:{}", a.node.value, a.gpus);
    text += "; ";
  }
  return text;
}

RoomRunCounts room_against_reference(std::uint64_t seed, const SchedulerConfig& config) {
  RoomRunCounts counts;
  auto pool = [] {
    return test_support::make_test_pool(
        {.spine_oversubscription = {1, 1}, .leaves_per_spine = 2, .nodes_per_leaf = 3});
  };
  auto fast = Scheduler::create(pool(), borrower_and_two_owners_book(), config);
  auto naive = Scheduler::create(pool(), borrower_and_two_owners_book(), config);
  EXPECT_TRUE(fast.has_value() && naive.has_value());
  if (!fast || !naive) return counts;
  scheduler_detail::find_room_naively(*naive);
  Rng rng(seed);
  std::map<std::uint32_t, Job> jobs;
  std::map<std::uint32_t, Seconds> ends;
  std::uint32_t next_id = 0;
  for (Seconds t = 0; t < 150 * 60; t += 60) {
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second > t) {
        ++it;
        continue;
      }
      for (Scheduler* s : {&*fast, &*naive}) {
        EXPECT_TRUE(s->finish(JobId{it->first}, t, std::nullopt).has_value());
      }
      it = ends.erase(it);
    }
    if (rng.below(15) == 0) {
      const NodeId node{static_cast<std::uint32_t>(rng.below(12))};
      const bool open = rng.below(2) == 0;
      for (Scheduler* s : {&*fast, &*naive}) {
        EXPECT_TRUE(s->set_node_schedulable(node, open).has_value());
      }
    }
    for (std::uint64_t k = rng.below(t == 0 ? 120 : t % 600 == 0 ? 50 : 5); k > 0; --k) {
      const std::uint64_t kind = rng.below(10);
      const int gpus = kind < 7 ? 1 : std::array{2, 4, 8}[rng.below(3)];
      Job job = make_test_job(next_id++, TenantId{static_cast<std::uint32_t>(rng.below(3))}, gpus,
                              t, static_cast<Seconds>(300 + rng.below(6000)),
                              gpus == 8 && rng.below(2) == 0 ? 8 : 1);
      if (kind == 7) job.gang.topology = {TopologyLevel::kNode, TopologyStrength::kRequired};
      if (kind == 8) job.job_class = JobClass::kInference;
      job.priority_class = rng.below(6) == 0 ? 1 : 0;
      job.preemptible = rng.below(10) != 0;
      if (rng.below(4) == 0) job.checkpoint_interval.reset();
      for (Scheduler* s : {&*fast, &*naive}) EXPECT_TRUE(s->submit(job, t).has_value());
      jobs.emplace(job.id.value, job);
    }
    const PassResult pass = fast->pass(t);
    const PassResult reference = naive->pass(t);
    EXPECT_EQ(describe_pass(pass), describe_pass(reference)) << "seed " << seed << " at " << t;
    EXPECT_EQ(fast->next_wakeup(t), naive->next_wakeup(t)) << "seed " << seed << " at " << t;
    if (describe_pass(pass) != describe_pass(reference)) return counts;
    ++counts.passes;
    for (const PreemptedJob& p : pass.preempted) {
      ends.erase(p.job.value);
      ++counts.preempted;
      ++counts.by_cause[p.cause];
      const Job& beneficiary = jobs.at(p.beneficiary ? p.beneficiary->value : p.job.value);
      if (beneficiary.gang.task_count == 1 && beneficiary.gang.task.gpu_count == 1 &&
          !beneficiary.gang.topology.requires_level(TopologyLevel::kNode)) {
        ++counts.for_one_gpu;
      }
    }
    for (const StartedJob& st : pass.started) {
      ends[st.job.value] = t + 60 * static_cast<Seconds>(5 + rng.below(60));
    }
  }
  return counts;
}

TEST(SchedulerProperty, MakingRoomPreemptsWhatItsPlainReferenceDoes) {
  SchedulerConfig slicing = policy("tidepool");
  slicing.gang_policy = "tidepool";
  slicing.min_slice_run = 600;
  slicing.max_slice_loss = 300;
  slicing.starvation_limit = 3600;
  SchedulerConfig drawing = policy("tidepool");
  drawing.gang_policy = "random";  // draws: victims are tried on copies of the pool either way
  SchedulerConfig window = policy("tidepool");
  window.windows = {TidalWindow{JobClass::kInference, 3600, 2 * 3600, 24}};
  const std::array<std::pair<std::string_view, SchedulerConfig>, 6> configs = {{
      {"tidepool", policy("tidepool")},
      {"tidepool, slicing after 10 minutes", slicing},
      {"tidepool, 24 GPUs held for inference from 01:00 to 02:00", window},
      {"tidepool, random gang policy", drawing},
      {"quota-borrow", policy("quota-borrow")},
      {"tiresias", policy("tiresias")},
  }};
  for (const auto& [name, config] : configs) {
    RoomRunCounts total;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const RoomRunCounts counts = room_against_reference(seed, config);
      total.passes += counts.passes;
      total.preempted += counts.preempted;
      total.for_one_gpu += counts.for_one_gpu;
      for (const auto& [cause, n] : counts.by_cause) total.by_cause[cause] += n;
    }
    SCOPED_TRACE(name);
    EXPECT_EQ(total.passes, 3 * 150);
    // The workloads make room often, also for one-GPU jobs (answered on the pool itself).
    EXPECT_GT(total.preempted, 40);
    EXPECT_GT(total.for_one_gpu, 0);
    if (config.las_preemption) {
      EXPECT_GT(total.by_cause[PreemptionCause::kLeastAttained], 20);
    } else {
      EXPECT_GT(total.by_cause[PreemptionCause::kReclaim], 20);
    }
    if (config.priority_preemption) {
      EXPECT_GT(total.by_cause[PreemptionCause::kPriority], 0);
    }
    if (config.min_slice_run == 600) {
      EXPECT_GT(total.by_cause[PreemptionCause::kTimeSlice], 0);
    }
  }
}

TEST(SchedulerServerHooks, WithdrawnJobNeverStarts) {
  Scheduler s = make_scheduler(policy("tidepool"));
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 8, 0), 0).has_value());
  ASSERT_TRUE(s.withdraw(JobId{1}, 5).has_value());
  EXPECT_EQ(s.pending_count(), 0);
  EXPECT_EQ(s.phase(JobId{1}), JobPhase::kDone);
  EXPECT_TRUE(s.pass(10).started.empty());
  EXPECT_FALSE(s.withdraw(JobId{1}, 10).has_value());
  EXPECT_FALSE(s.withdraw(JobId{7}, 10).has_value());
}

TEST(SchedulerServerHooks, AdoptedJobHoldsItsPlaceAndItsQuota) {
  Scheduler s = make_scheduler(policy("tidepool"));
  const Job job = make_test_job(1, kA, 8, 0, 1000, 8);
  const std::array<Assignment, 1> where{Assignment{NodeId{2}, 0xFF}};
  ASSERT_TRUE(s.adopt(job, where, 100, 200).has_value());
  EXPECT_EQ(s.phase(JobId{1}), JobPhase::kRunning);
  EXPECT_EQ(s.running_count(), 1);
  EXPECT_EQ(s.pending_count(), 0);
  EXPECT_EQ(s.usage_milli(kA), 8000);
  EXPECT_EQ(s.book().usage(kA, kH100), 8000);
  EXPECT_EQ(s.pool().state(NodeId{2}).whole_free_gpus, 0);
  EXPECT_TRUE(s.pass(200).started.empty());
  // A second job that does not fit where the first runs goes elsewhere.
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 200, 1000, 8), 200).has_value());
  PassResult next = s.pass(200);
  ASSERT_EQ(next.started.size(), 1U);
  EXPECT_NE(next.started[0].assignments[0].node, NodeId{2});
  ASSERT_TRUE(s.finish(JobId{1}, 300, 200).has_value());
  EXPECT_EQ(s.book().usage(kA, kH100), 0);
  EXPECT_TRUE(s.pool().check_invariants().has_value());
}

TEST(SchedulerServerHooks, AdoptionThatDoesNotFitChangesNothing) {
  Scheduler s = make_scheduler(policy("tidepool"));
  const std::array<Assignment, 1> node2{Assignment{NodeId{2}, 0xFF}};
  ASSERT_TRUE(s.adopt(make_test_job(1, kA, 8, 0, 1000, 8), node2, 0, 0).has_value());
  auto clash = s.adopt(make_test_job(2, kB, 8, 0, 1000, 8), node2, 0, 0);
  ASSERT_FALSE(clash.has_value());
  EXPECT_FALSE(s.phase(JobId{2}).has_value());
  EXPECT_EQ(s.running_count(), 1);
  EXPECT_EQ(s.pending_count(), 0);
  auto wrong_count = s.adopt(make_test_job(3, kB, 16, 0, 1000, 8), node2, 0, 0);
  ASSERT_FALSE(wrong_count.has_value());
  EXPECT_EQ(wrong_count.error().field, "assignments");
  EXPECT_TRUE(s.pool().check_invariants().has_value());
}

TEST(SchedulerServerHooks, AdoptionPastTheQuotaIsRecordedAsBorrowing) {
  // Tenants are guaranteed 8 GPUs each and B may not borrow, yet 16 of B's GPUs already run (its
  // quota was lowered while they ran): they are recorded all the same.
  Scheduler s = make_scheduler(policy("tidepool"), a_and_b_book(8, 0));
  const std::array<Assignment, 2> two_nodes{Assignment{NodeId{0}, 0xFF},
                                            Assignment{NodeId{1}, 0xFF}};
  ASSERT_TRUE(s.adopt(make_test_job(1, kB, 16, 0, 1000, 8), two_nodes, 0, 0).has_value());
  EXPECT_EQ(s.book().usage(kB, kH100), 16000);
  EXPECT_EQ(s.usage_milli(kB), 16000);
  // B may not start more; A still can.
  ASSERT_TRUE(s.submit(make_test_job(2, kB, 8, 0, 1000, 8), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(3, kA, 8, 0, 1000, 8), 0).has_value());
  PassResult pass = s.pass(0);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].job, JobId{3});
  EXPECT_TRUE(s.pool().check_invariants().has_value());
}

TEST(SchedulerServerHooks, CordonedNodeTakesNoJobUntilUncordoned) {
  Scheduler s = make_scheduler(policy("tidepool"));
  for (std::uint32_t n = 0; n < 3; ++n) {
    ASSERT_TRUE(s.set_node_schedulable(NodeId{n}, false).has_value());
  }
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 8, 0, 1000, 8), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kA, 8, 0, 1000, 8), 0).has_value());
  PassResult pass = s.pass(0);
  ASSERT_EQ(pass.started.size(), 1U);
  EXPECT_EQ(pass.started[0].assignments[0].node, NodeId{3});
  ASSERT_TRUE(s.set_node_schedulable(NodeId{1}, true).has_value());
  PassResult later = s.pass(10);
  ASSERT_EQ(later.started.size(), 1U);
  EXPECT_EQ(later.started[0].assignments[0].node, NodeId{1});
}

TEST(SchedulerServerHooks, ForgetDropsOnlyEndedJobs) {
  Scheduler s = make_scheduler(policy("tidepool"));
  ASSERT_TRUE(s.submit(make_test_job(1, kA, 8, 0), 0).has_value());
  ASSERT_TRUE(s.submit(make_test_job(2, kA, 8, 0), 0).has_value());
  EXPECT_FALSE(s.forget(JobId{1}).has_value());
  ASSERT_TRUE(s.withdraw(JobId{1}, 1).has_value());
  ASSERT_TRUE(s.forget(JobId{1}).has_value());
  EXPECT_FALSE(s.phase(JobId{1}).has_value());
  EXPECT_EQ(s.phase(JobId{2}), JobPhase::kPending);
  EXPECT_EQ(s.pass(2).started.size(), 1U);
}

}  // namespace
}  // namespace tidepool

namespace tidepool {
namespace {

TEST(SchedulerBudget, AnExhaustedTenantStartsOnlyCriticalJobsUntilTheBudgetIsLifted) {
  for (std::string_view name : scheduler_policy_names()) {
    SCOPED_TRACE(name);
    Scheduler s = make_scheduler(policy(name));
    ASSERT_TRUE(
        s.set_budget_exhausted(kA, "budget exhausted: tenant A spent 12.00 of 10.00").has_value());
    EXPECT_TRUE(s.budget_exhausted(kA));
    EXPECT_FALSE(s.budget_exhausted(kB));
    Job normal = make_test_job(0, kA, 2, 0);
    Job critical = make_test_job(1, kA, 2, 0);
    critical.priority_class = s.config().budget_exempt_priority;
    Job other = make_test_job(2, kB, 2, 0);
    for (const Job& job : {normal, critical, other}) ASSERT_TRUE(s.submit(job, 0).has_value());
    const PassResult first = s.pass(0);
    std::vector<std::uint32_t> started;
    for (const StartedJob& j : first.started) started.push_back(j.job.value);
    EXPECT_THAT(started, ::testing::UnorderedElementsAre(1U, 2U));
    ASSERT_NE(s.reason(JobId{0}), nullptr);
    EXPECT_EQ(s.reason(JobId{0})->kind, PendingKind::kBudget);
    EXPECT_EQ(s.reason(JobId{0})->message(), "budget exhausted: tenant A spent 12.00 of 10.00");

    ASSERT_TRUE(s.set_budget_exhausted(kA, std::nullopt).has_value());
    const PassResult second = s.pass(10);
    ASSERT_EQ(second.started.size(), 1U);
    EXPECT_EQ(second.started[0].job, JobId{0});
    EXPECT_EQ(s.pending_seconds(JobId{0})->at(static_cast<int>(PendingKind::kBudget)), 10);
  }
}

TEST(SchedulerBudget, RefusesAnUnknownTenant) {
  Scheduler s = make_scheduler(policy("tidepool"));
  auto bad = s.set_budget_exhausted(TenantId{7}, "x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "tenant");
}

}  // namespace
}  // namespace tidepool
