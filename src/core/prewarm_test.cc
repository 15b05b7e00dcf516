#include "core/prewarm.h"

#include <gtest/gtest.h>

#include <vector>

namespace tidepool {
namespace {

std::vector<NodeId> nodes_of(const std::vector<std::uint32_t>& ids) {
  std::vector<NodeId> out;
  for (std::uint32_t n : ids) out.push_back(NodeId{n});
  return out;
}

ExpectedStart expected(std::uint32_t job, Seconds start, const std::vector<std::uint32_t>& nodes) {
  return ExpectedStart{JobId{job}, start, nodes_of(nodes)};
}

PrewarmPlanner planner_with_lead(Seconds lead) {
  return PrewarmPlanner(
      PrewarmConfig{.lead = lead, .horizon = 2 * lead, .max_expected = 64, .refresh = 60});
}

TEST(PrewarmPlannerTest, CallsALeadTimeBeforeThePredictedStart) {
  PrewarmPlanner planner = planner_with_lead(600);
  // Expected at 2000: due at 1400, not at 1000.
  EXPECT_TRUE(planner.expect({expected(7, 2000, {3, 4})}, 1000).empty());
  EXPECT_EQ(planner.due_at(), 1400);
  EXPECT_TRUE(planner.advance(1399).empty());
  const std::vector<PrewarmCall> calls = planner.advance(1400);
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0], (PrewarmCall{JobId{7}, nodes_of({3, 4}), 2000, 1400}));
  // Once.
  EXPECT_TRUE(planner.advance(1500).empty());
  EXPECT_FALSE(planner.due_at());
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({3, 4}), 2100);
  EXPECT_TRUE(s.prewarmed);
  EXPECT_EQ(s.lead, 700);
  EXPECT_EQ(planner.called_jobs(), 0U);
}

TEST(PrewarmPlannerTest, DatesCallsThatFellDueBetweenPassesWhenTheyFellDue) {
  PrewarmPlanner planner = planner_with_lead(600);
  EXPECT_TRUE(planner.expect({expected(8, 2100, {5}), expected(7, 2000, {3})}, 1000).empty());
  EXPECT_EQ(planner.due_at(), 1400);
  // The next pass runs at 1900 (the simulator's next event): the calls were due at 1400, 1500.
  const std::vector<PrewarmCall> calls = planner.advance(1900);
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].job, JobId{7});
  EXPECT_EQ(calls[0].at, 1400);
  EXPECT_EQ(calls[1].job, JobId{8});
  EXPECT_EQ(calls[1].at, 1500);
}

TEST(PrewarmPlannerTest, CallsAtOnceWhenTheStartIsCloserThanTheLead) {
  PrewarmPlanner planner = planner_with_lead(600);
  const std::vector<PrewarmCall> calls = planner.expect({expected(7, 1100, {3})}, 1000);
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0].at, 1000);
  EXPECT_EQ(planner.started(JobId{7}, nodes_of({3}), 1100).lead, 100);
}

TEST(PrewarmPlannerTest, CallsOnlyTheNewNodesWhenTheExpectationMoves) {
  PrewarmPlanner planner = planner_with_lead(600);
  ASSERT_EQ(planner.expect({expected(7, 1100, {3, 4})}, 1000).size(), 1U);
  const std::vector<PrewarmCall> moved = planner.expect({expected(7, 1200, {4, 5})}, 1050);
  ASSERT_EQ(moved.size(), 1U);
  EXPECT_EQ(moved[0].nodes, nodes_of({5}));
  // The same nodes again: nothing to call.
  EXPECT_TRUE(planner.expect({expected(7, 1300, {3, 5})}, 1060).empty());
  // It starts on 4 and 5: pre-warmed, the last of them called at 1050.
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({4, 5}), 1200);
  EXPECT_TRUE(s.prewarmed);
  EXPECT_EQ(s.lead, 150);
}

TEST(PrewarmPlannerTest, AnUnchangedExpectationKeepsItsDueTime) {
  PrewarmPlanner planner = planner_with_lead(600);
  EXPECT_TRUE(planner.expect({expected(7, 2000, {3})}, 1000).empty());
  // The next pass expects the same: still due at 1400, not counted from 1300.
  EXPECT_TRUE(planner.expect({expected(7, 2000, {3})}, 1300).empty());
  EXPECT_EQ(planner.due_at(), 1400);
}

TEST(PrewarmPlannerTest, AsksForExpectationsAtMostEveryRefresh) {
  PrewarmPlanner planner = planner_with_lead(600);
  EXPECT_TRUE(planner.wants_expectations(0));
  (void)planner.expect({}, 1000);
  EXPECT_FALSE(planner.wants_expectations(1059));
  EXPECT_TRUE(planner.wants_expectations(1060));
}

TEST(PrewarmPlannerTest, AStartOnANodeNotCalledIsNotPreWarmed) {
  PrewarmPlanner planner = planner_with_lead(600);
  ASSERT_EQ(planner.expect({expected(7, 1100, {3})}, 1000).size(), 1U);
  const PrewarmedStart s = planner.started(JobId{7}, nodes_of({3, 9}), 1100);
  EXPECT_FALSE(s.prewarmed);
  EXPECT_EQ(s.lead, 0);
  EXPECT_EQ(planner.called_jobs(), 0U);
  // A job never expected.
  EXPECT_FALSE(planner.started(JobId{8}, nodes_of({1}), 1100).prewarmed);
}

TEST(PrewarmPlannerTest, AStartBeforeItsCallFellDueIsNotPreWarmed) {
  PrewarmPlanner planner = planner_with_lead(600);
  EXPECT_TRUE(planner.expect({expected(7, 5000, {3})}, 1000).empty());
  // A backfill freed room early: it starts at 1200, before its call was due.
  EXPECT_TRUE(planner.advance(1200).empty());
  EXPECT_FALSE(planner.started(JobId{7}, nodes_of({3}), 1200).prewarmed);
  EXPECT_FALSE(planner.due_at());
}

TEST(PrewarmPlannerTest, ForgetsAJobThatLeavesWithoutStarting) {
  PrewarmPlanner planner = planner_with_lead(600);
  ASSERT_EQ(planner.expect({expected(7, 1100, {3}), expected(8, 5000, {4})}, 1000).size(), 1U);
  EXPECT_EQ(planner.called_jobs(), 1U);
  planner.forget(JobId{7});
  planner.forget(JobId{8});
  EXPECT_EQ(planner.called_jobs(), 0U);
  EXPECT_FALSE(planner.due_at());
}

TEST(PrewarmPlannerTest, NewExpectationsReplaceTheOldOnes) {
  PrewarmPlanner planner = planner_with_lead(600);
  EXPECT_TRUE(planner.expect({expected(7, 5000, {3})}, 1000).empty());
  EXPECT_TRUE(planner.expect({expected(8, 6000, {4})}, 1100).empty());
  EXPECT_EQ(planner.due_at(), 5400);
  EXPECT_TRUE(planner.expect({}, 1200).empty());
  EXPECT_FALSE(planner.due_at());
  EXPECT_TRUE(planner.advance(9000).empty());
}

TEST(PrewarmPlannerTest, RefusesABadConfigNamingTheField) {
  EXPECT_TRUE(validate(PrewarmConfig{}).has_value());
  EXPECT_EQ(validate(PrewarmConfig{.lead = -1, .horizon = 0, .max_expected = 1, .refresh = 0})
                .error()
                .field,
            "lead");
  EXPECT_EQ(validate(PrewarmConfig{.lead = 600, .horizon = 300, .max_expected = 1, .refresh = 0})
                .error()
                .field,
            "horizon");
  EXPECT_EQ(validate(PrewarmConfig{.lead = 600, .horizon = 600, .max_expected = 0, .refresh = 0})
                .error()
                .field,
            "max_expected");
}

}  // namespace
}  // namespace tidepool
