#include "core/prewarm.h"

#include <gtest/gtest.h>

#include <vector>

namespace tidepool {
namespace {

ExpectedStart expected(std::uint32_t job, Seconds start, const std::vector<std::uint32_t>& nodes) {
  ExpectedStart e{JobId{job}, start, {}};
  for (std::uint32_t n : nodes) e.nodes.push_back(NodeId{n});
  return e;
}

std::vector<NodeId> nodes_of(const std::vector<std::uint32_t>& ids) {
  std::vector<NodeId> out;
  for (std::uint32_t n : ids) out.push_back(NodeId{n});
  return out;
}

TEST(PrewarmPlannerTest, CallsALeadTimeBeforeThePredictedStart) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  // Expected at 2000: due at 1400, not at 1000.
  EXPECT_FALSE(planner.expect(expected(7, 2000, {3, 4}), 1000));
  EXPECT_EQ(planner.due_at(), 1400);
  EXPECT_FALSE(planner.advance(1399));
  const std::optional<PrewarmCall> call = planner.advance(1400);
  ASSERT_TRUE(call);
  EXPECT_EQ(*call, (PrewarmCall{JobId{7}, nodes_of({3, 4}), 2000, 1400}));
  // Once.
  EXPECT_FALSE(planner.advance(1500));
  EXPECT_FALSE(planner.due_at());
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({3, 4}), 2100);
  EXPECT_TRUE(s.prewarmed);
  EXPECT_EQ(s.lead, 700);
  EXPECT_EQ(planner.called_jobs(), 0U);
}

TEST(PrewarmPlannerTest, DatesACallThatFellDueBetweenPassesWhenItFellDue) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  EXPECT_FALSE(planner.expect(expected(7, 2000, {3}), 1000));
  // The next pass runs at 1900 (the simulator's next event): the call was due at 1400.
  const std::optional<PrewarmCall> call = planner.advance(1900);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->at, 1400);
}

TEST(PrewarmPlannerTest, CallsAtOnceWhenTheStartIsCloserThanTheLead) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  const std::optional<PrewarmCall> call = planner.expect(expected(7, 1100, {3}), 1000);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->at, 1000);
  EXPECT_EQ(planner.started(JobId{7}, nodes_of({3}), 1100).lead, 100);
}

TEST(PrewarmPlannerTest, CallsOnlyTheNewNodesWhenTheExpectationMoves) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  ASSERT_TRUE(planner.expect(expected(7, 1100, {3, 4}), 1000));
  const std::optional<PrewarmCall> moved = planner.expect(expected(7, 1200, {4, 5}), 1050);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->nodes, nodes_of({5}));
  // The same nodes again: nothing to call.
  EXPECT_FALSE(planner.expect(expected(7, 1300, {3, 5}), 1060));
  // It starts on 4 and 5: pre-warmed, the last of them called at 1050.
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({4, 5}), 1200);
  EXPECT_TRUE(s.prewarmed);
  EXPECT_EQ(s.lead, 150);
}

TEST(PrewarmPlannerTest, AStartOnANodeNotCalledIsNotPreWarmed) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  ASSERT_TRUE(planner.expect(expected(7, 1100, {3}), 1000));
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({3, 9}), 1100);
  EXPECT_FALSE(s.prewarmed);
  EXPECT_EQ(s.lead, 0);
  EXPECT_EQ(planner.called_jobs(), 0U);
  // A job never expected.
  EXPECT_FALSE(planner.started(JobId{8}, nodes_of({1}), 1100).prewarmed);
}

TEST(PrewarmPlannerTest, AStartBeforeItsCallFellDueIsNotPreWarmed) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  EXPECT_FALSE(planner.expect(expected(7, 5000, {3}), 1000));
  // A backfill freed room early: it starts at 1200, before its call was due.
  EXPECT_FALSE(planner.advance(1200));
  EXPECT_FALSE(planner.started(JobId{7}, nodes_of({3}), 1200).prewarmed);
  EXPECT_FALSE(planner.due_at());
}

TEST(PrewarmPlannerTest, ForgetsAJobThatLeavesWithoutStarting) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  ASSERT_TRUE(planner.expect(expected(7, 1100, {3}), 1000));
  EXPECT_EQ(planner.called_jobs(), 1U);
  planner.forget(JobId{7});
  EXPECT_EQ(planner.called_jobs(), 0U);
  EXPECT_FALSE(planner.due_at());
}

TEST(PrewarmPlannerTest, ANewExpectationReplacesTheOldOne) {
  PrewarmPlanner planner(PrewarmConfig{.lead = 600});
  EXPECT_FALSE(planner.expect(expected(7, 5000, {3}), 1000));
  EXPECT_FALSE(planner.expect(expected(8, 6000, {4}), 1100));
  EXPECT_EQ(planner.due_at(), 5400);
  EXPECT_FALSE(planner.expect(std::nullopt, 1200));
  EXPECT_FALSE(planner.due_at());
  EXPECT_FALSE(planner.advance(9000));
}

}  // namespace
}  // namespace tidepool
