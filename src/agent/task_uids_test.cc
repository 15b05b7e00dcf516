#include "agent/task_uids.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

TEST(UidRangeTest, ParsesARangeAndRejectsTheRest) {
  auto range = parse_uid_range("61000-61999");
  ASSERT_TRUE(range) << range.error().message();
  EXPECT_EQ(range->first, 61000);
  EXPECT_EQ(range->last, 61999);
  EXPECT_EQ(range->size(), 1000);
  for (const char* bad : {"", "61000", "61000-", "-5", "0-10", "10-5", "a-b", "1-2x"}) {
    auto parsed = parse_uid_range(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().field, "--task-uids") << bad;
  }
}

TEST(TaskUidsTest, EachJobGetsItsOwnUidAndKeepsIt) {
  TaskUids uids(UidRange{100, 103});
  EXPECT_EQ(uids.acquire(1).value(), 101);  // 100 + 1 % 4
  EXPECT_EQ(uids.acquire(5).value(), 100);  // 101 is taken: the lowest free
  EXPECT_EQ(uids.acquire(1).value(), 101);  // the same job, the same uid
  EXPECT_EQ(uids.acquire(2).value(), 102);
  EXPECT_EQ(uids.acquire(3).value(), 103);
  auto full = uids.acquire(4);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().field, "uid");
  uids.release(2);
  EXPECT_FALSE(uids.of(2));
  EXPECT_EQ(uids.acquire(4).value(), 102);
}

TEST(TaskUidsTest, RestoreKeepsWhatTheStateFileSaysUnlessItClashes) {
  TaskUids uids(UidRange{100, 103});
  EXPECT_TRUE(uids.restore(7, 102));
  EXPECT_TRUE(uids.restore(7, 102));   // again: the same
  EXPECT_FALSE(uids.restore(8, 102));  // held by job 7
  EXPECT_FALSE(uids.restore(7, 103));  // job 7 holds 102
  EXPECT_FALSE(uids.restore(9, 99));   // out of the range
  EXPECT_EQ(uids.of(7), 102);
  EXPECT_EQ(uids.acquire(6).value(), 100);  // 102 (100 + 6 % 4) is job 7's
}

}  // namespace
}  // namespace tidepool
