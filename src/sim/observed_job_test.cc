#include "sim/observed_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace tidepool {
namespace {

using ::testing::HasSubstr;

ObservedJob valid_job() {
  ObservedJob job;
  job.id = "17";
  job.tenant = "vision";
  job.submit = 1'700'000'000;
  job.start = 1'700'000'060;
  job.end = 1'700'003'600;
  job.gpus = 8;
  job.node_count = 2;
  job.milli_cpu = 32'000;
  job.memory_mib = 65'536;
  job.time_limit = 7'200;
  job.nodes = {"tp1", "tp2"};
  return job;
}

TEST(ObservedJob, AJobWithinTheBoundsIsKept) {
  EXPECT_TRUE(check_observed(valid_job()));
  ObservedJob waiting = valid_job();
  waiting.start.reset();
  waiting.end.reset();
  waiting.nodes.clear();
  EXPECT_TRUE(check_observed(waiting));
  ObservedJob edges = valid_job();
  edges.submit = 0;
  edges.start = kMaxObservedTime;
  edges.end = kMaxObservedTime;
  edges.gpus = static_cast<int>(kMaxObservedGpus);
  edges.node_count = static_cast<int>(kMaxObservedNodes);
  edges.milli_cpu = kMaxObservedCpus * 1000;
  edges.memory_mib = kMaxObservedMemoryMib;
  EXPECT_TRUE(check_observed(edges));
}

TEST(ObservedJob, EachFigureOutOfBoundsIsNamed) {
  const auto field_of = [](auto change) {
    ObservedJob job = valid_job();
    change(job);
    const auto kept = check_observed(job);
    return kept ? std::string("kept") : kept.error().field;
  };
  EXPECT_EQ(field_of([](ObservedJob& j) { j.id.clear(); }), "id");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.tenant.clear(); }), "tenant");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.submit = -1; }), "submit");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.start = kMaxObservedTime + 1; }), "start");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.end = std::numeric_limits<std::int64_t>::max(); }),
            "end");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.end = *j.start - 1; }), "end");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.start.reset(); }), "end");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.time_limit = 0; }), "time_limit");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.node_count = 0; }), "node_count");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.gpus = -1; }), "gpus");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.milli_cpu = kMaxObservedCpus * 1000 + 1; }),
            "milli_cpu");
  EXPECT_EQ(field_of([](ObservedJob& j) { j.memory_mib = -1; }), "memory_mib");
}

TEST(ObservedJob, ProductsAreCheckedBeforeTheyOverflow) {
  EXPECT_EQ(observed_product(3, 4, 12, "f").value(), 12);
  EXPECT_EQ(observed_product(0, std::numeric_limits<std::int64_t>::max(), 0, "f").value(), 0);
  const auto big = observed_product(std::int64_t{1} << 62, 4, kMaxObservedMemoryMib, "memory");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().field, "memory");
  EXPECT_THAT(big.error().reason, HasSubstr("not within"));
  EXPECT_FALSE(observed_product(-1, 1, 10, "f"));
  EXPECT_FALSE(observed_product(4, 4, 15, "f"));
  EXPECT_FALSE(observed_time(-1, "t"));
  EXPECT_EQ(observed_count(5, 5, "c").value(), 5);
  EXPECT_THAT(observed_count(6, 5, "c").error().reason, HasSubstr("0..5, got 6"));
}

}  // namespace
}  // namespace tidepool
