#include "core/feasibility.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_pool.h"

namespace tidepool {
namespace {

using test_support::make_test_pool;
using test_support::TestPoolShape;
using test_support::two_tenant_book;
using ::testing::HasSubstr;

// `tasks` x `gpus` GPUs (a fraction when milli < 1000) of tenant `tenant`, any model.
Job gang_job(int tasks, int gpus, std::int64_t milli = 1000, TenantId tenant = TenantId{1}) {
  Job job;
  job.id = JobId{1};
  job.tenant = tenant;
  job.gang.task_count = tasks;
  job.gang.task.gpu_count = gpus;
  job.gang.task.milli_per_gpu = gpus > 0 ? milli : 0;
  job.gang.task.milli_cpu = 1000;
  job.gang.task.memory_mib = 1024;
  return job;
}

// 4 nodes of 8 H100 (32 GPUs), 64 cores and 512 GiB each.
Pool four_nodes() { return make_test_pool(TestPoolShape{.nodes_per_leaf = 4}); }

TEST(CanEverStart, AGangThePoolHoldsMayStart) {
  const Pool pool = four_nodes();
  EXPECT_TRUE(check_can_ever_start(gang_job(4, 8), pool, nullptr).has_value());
  EXPECT_TRUE(check_can_ever_start(gang_job(32, 1), pool, nullptr).has_value());
  EXPECT_TRUE(check_can_ever_start(gang_job(1, 1, 250), pool, nullptr).has_value());
  EXPECT_TRUE(check_can_ever_start(gang_job(1, 0), pool, nullptr).has_value());
}

TEST(CanEverStart, AGangLargerThanThePoolIsRefusedWithThePoolsCeiling) {
  const Pool pool = four_nodes();
  auto refused = check_can_ever_start(gang_job(100, 8), pool, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "task_count");
  EXPECT_EQ(refused.error().reason,
            "the pool's H100 nodes (4 nodes, 32 GPUs) hold at most 4 tasks of 8 GPUs, 1000 CPU "
            "milli, 1024 MiB; the job asks 100");
  // Tasks that fit a node by GPUs but two to a node: 5 tasks of 4 GPUs need 3 nodes, 4 hold 8.
  EXPECT_TRUE(check_can_ever_start(gang_job(8, 4), pool, nullptr).has_value());
  EXPECT_FALSE(check_can_ever_start(gang_job(9, 4), pool, nullptr).has_value());
}

TEST(CanEverStart, ATaskNoNodeHoldsNamesTheResource) {
  const Pool pool = four_nodes();
  auto wide = check_can_ever_start(gang_job(1, 9), pool, nullptr);
  ASSERT_FALSE(wide.has_value());
  EXPECT_EQ(wide.error().field, "gpu_count");
  EXPECT_THAT(wide.error().reason, HasSubstr("no node of the pool's H100 nodes"));
  Job hungry = gang_job(1, 1);
  hungry.gang.task.memory_mib = 600 * 1024;
  auto memory = check_can_ever_start(hungry, pool, nullptr);
  ASSERT_FALSE(memory.has_value());
  EXPECT_EQ(memory.error().field, "memory_mib");
  Job cpus = gang_job(1, 0);
  cpus.gang.task.milli_cpu = 65000;
  auto cpu = check_can_ever_start(cpus, pool, nullptr);
  ASSERT_FALSE(cpu.has_value());
  EXPECT_EQ(cpu.error().field, "milli_cpu");
  EXPECT_THAT(cpu.error().reason, HasSubstr("the pool's nodes"));
}

TEST(CanEverStart, AJobOnlyOfModelsThePoolLacksIsRefused) {
  const Pool pool = four_nodes();
  Job job = gang_job(1, 1);
  job.gang.task.models = ModelSet::none();
  auto refused = check_can_ever_start(job, pool, nullptr);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "models");
}

TEST(CanEverStart, AJobAboveTheTenantsCeilingIsRefusedWithIt) {
  const Pool pool = four_nodes();
  // A and B are guaranteed 8 GPUs each; B may borrow 8 more: at most 16.
  const TenantBook book = two_tenant_book(pool.models(), 8, 8);
  EXPECT_TRUE(check_can_ever_start(gang_job(2, 8), pool, &book).has_value());
  auto refused = check_can_ever_start(gang_job(3, 8), pool, &book);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "tenant");
  EXPECT_EQ(refused.error().reason,
            "tenant B may hold at most 16 H100 GPUs (guaranteed 8 + borrowing limit 8); the job "
            "asks 24 GPUs");
  // A has no borrowing limit: the pool is its ceiling.
  EXPECT_TRUE(check_can_ever_start(gang_job(4, 8, 1000, TenantId{0}), pool, &book).has_value());
  // Without quotas the tenant's ceiling does not count.
  EXPECT_TRUE(check_can_ever_start(gang_job(3, 8), pool, nullptr).has_value());
}

}  // namespace
}  // namespace tidepool
