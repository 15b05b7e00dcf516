#include "sim/philly_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n";

Result<PhillyTrace> read(const std::string& text) {
  std::istringstream in(text);
  return read_philly_jobs(in, "philly.csv");
}

// The error of reading one job row (line 2) after the header.
Error row_error(const std::string& row) {
  auto trace = read(std::string(kHeader) + row + "\n");
  EXPECT_FALSE(trace.has_value()) << "accepted: " << row;
  return trace ? Error{} : trace.error();
}

TEST(ReadPhillyJobsTest, ReadsJobsInFileOrderRelativeToTheEarliestSubmit) {
  auto trace = read(std::string(kHeader) +
                    "2017-09-04 10:30:41,2240194.0,8,17921552.0,7f04ca\n"
                    "2017-09-04 10:30:40,0.0,1,0.0,6214e9\n"
                    "\n"
                    "2017-09-05 00:00:00,17,2,34,6214e9\n");
  ASSERT_TRUE(trace.has_value()) << trace.error().message();
  EXPECT_EQ(trace->start_epoch, 1504521040);  // the second row's time
  ASSERT_EQ(trace->jobs.size(), 3U);
  const PhillyJob& first = trace->jobs[0];
  EXPECT_EQ(first.id, "philly-0");
  EXPECT_EQ(first.submit, 1);
  EXPECT_EQ(first.duration, 2240194);
  EXPECT_EQ(first.gpus, 8);
  EXPECT_EQ(first.tenant, "7f04ca");
  EXPECT_EQ(trace->jobs[1].id, "philly-1");
  EXPECT_EQ(trace->jobs[1].submit, 0);
  EXPECT_EQ(trace->jobs[1].duration, 0);     // a zero duration is allowed
  EXPECT_EQ(trace->jobs[2].id, "philly-2");  // the empty line is skipped
  EXPECT_EQ(trace->jobs[2].submit, 13 * 3600 + 29 * 60 + 20);
  EXPECT_EQ(trace->jobs[2].duration, 17);
  EXPECT_EQ(trace->jobs[2].tenant, "6214e9");
}

TEST(ReadPhillyJobsTest, RoundsFractionalSecondsAndIgnoresGpuTimeMismatches) {
  auto trace = read(
      "cluster,num_gpus,duration,gpu_time,timestamp,extra\r\n"  // any column order, CRLF
      "a,1,10.49,1,2017-09-04 00:00:00,x\r\n"
      "a,1,10.5,999,2017-09-04 00:00:00,y\r\n"
      "a,1,-0.0,0,2017-09-04 00:00:00,z\r\n");
  ASSERT_TRUE(trace.has_value()) << trace.error().message();
  ASSERT_EQ(trace->jobs.size(), 3U);
  EXPECT_EQ(trace->jobs[0].duration, 10);
  EXPECT_EQ(trace->jobs[1].duration, 11);
  EXPECT_EQ(trace->jobs[2].duration, 0);
}

TEST(ReadPhillyJobsTest, ErrorsNameTheLineColumnAndReason) {
  const Error error = row_error("2017-09-04 10:30:41,-5,8,17921552.0,7f04ca");
  EXPECT_EQ(error.field, "philly.csv:2 column 'duration'");
  EXPECT_EQ(error.reason, "must not be negative, got -5");

  auto trace = read(std::string(kHeader) + "2017-09-04 10:30:41,1,1,1,a\n" +
                    "2017-09-04 10:30:41,1,0,1,a\n");
  ASSERT_FALSE(trace.has_value());
  EXPECT_EQ(trace.error().field, "philly.csv:3 column 'num_gpus'");
  EXPECT_EQ(trace.error().reason, "must be 1..1024, got 0");
}

TEST(ReadPhillyJobsTest, RejectsBadValues) {
  struct Case {
    std::string row;
    std::string column;
    std::string reason;  // a part of the reason
  };
  const Case cases[] = {
      {"2017-09-04,1,1,1,a", "timestamp", "expected a date and time"},
      {"2017-02-30 00:00:00,1,1,1,a", "timestamp", "got '2017-02-30 00:00:00'"},
      {",1,1,1,a", "timestamp", "expected a date and time"},
      {"2017-09-04 00:00:00,,1,1,a", "duration", "missing"},
      {"2017-09-04 00:00:00,abc,1,1,a", "duration", "expected a number, got 'abc'"},
      {"2017-09-04 00:00:00,1e3,1,1,a", "duration", "expected a number"},
      {"2017-09-04 00:00:00,1.,1,1,a", "duration", "expected a number"},
      {"2017-09-04 00:00:00,.5,1,1,a", "duration", "expected a number"},
      {"2017-09-04 00:00:00,-0.5,1,1,a", "duration", "must not be negative"},
      {"2017-09-04 00:00:00,10000000001,1,1,a", "duration", "must be 0..10000000000"},
      {"2017-09-04 00:00:00,99999999999999999999999,1,1,a", "duration", "must be 0.."},
      {"2017-09-04 00:00:00,1,1025,1,a", "num_gpus", "must be 1..1024, got 1025"},
      {"2017-09-04 00:00:00,1,-1,1,a", "num_gpus", "must be 1..1024"},
      {"2017-09-04 00:00:00,1,1.0,1,a", "num_gpus", "expected an integer"},
      {"2017-09-04 00:00:00,1,,1,a", "num_gpus", "missing"},
      {"2017-09-04 00:00:00,1,1,-1,a", "gpu_time", "must not be negative"},
      {"2017-09-04 00:00:00,1,1,x,a", "gpu_time", "expected a number"},
      {"2017-09-04 00:00:00,1,1,1,", "cluster", "the job has no cluster"},
      {"2017-09-04 00:00:00,1,1,1", "cluster", "the job has no cluster"},
  };
  for (const Case& c : cases) {
    const Error error = row_error(c.row);
    EXPECT_EQ(error.field, "philly.csv:2 column '" + c.column + "'") << c.row;
    EXPECT_THAT(error.reason, HasSubstr(c.reason)) << c.row;
  }
}

TEST(ReadPhillyJobsTest, RejectsMissingColumnsAndEmptyTraces) {
  auto trace = read("timestamp,duration,gpus,cluster\n");
  ASSERT_FALSE(trace.has_value());
  EXPECT_EQ(trace.error().field, "philly.csv:1");
  EXPECT_THAT(trace.error().reason, HasSubstr("num_gpus, gpu_time"));

  trace = read(kHeader);
  ASSERT_FALSE(trace.has_value());
  EXPECT_EQ(trace.error().field, "philly.csv");
  EXPECT_EQ(trace.error().reason, "the trace has no jobs");

  trace = read("");
  ASSERT_FALSE(trace.has_value());
  EXPECT_THAT(trace.error().reason, HasSubstr("empty"));
}

TEST(LoadPhillyJobsTest, ReportsAMissingFile) {
  auto trace = load_philly_jobs("/nonexistent/philly.csv");
  ASSERT_FALSE(trace.has_value());
  EXPECT_EQ(trace.error().field, "/nonexistent/philly.csv");
}

// The September-October 2017 trace of ../shared/traces (beside the source tree), when present.
TEST(LoadPhillyJobsTest, ReadsTheSharedTrace) {
  const auto root = test_support::test_source_root();
  if (!root) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  const auto path = *root / ".." / "shared" / "traces" / "philly" / "philly-2017-09-10.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path.string() << " is absent";
  auto trace = load_philly_jobs(path.string());
  ASSERT_TRUE(trace.has_value()) << trace.error().message();
  ASSERT_EQ(trace->jobs.size(), 52849U);
  EXPECT_EQ(trace->start_epoch, 1504521041);  // 2017-09-04 10:30:41, the first row
  EXPECT_EQ(trace->jobs.front().id, "philly-0");
  EXPECT_EQ(trace->jobs.front().submit, 0);
  EXPECT_EQ(trace->jobs.front().gpus, 8);
  EXPECT_EQ(trace->jobs.front().duration, 2240194);
  EXPECT_EQ(trace->jobs.back().id, "philly-52848");
  std::set<std::string> tenants;
  Seconds last_submit = 0;
  for (const PhillyJob& job : trace->jobs) {
    tenants.insert(job.tenant);
    last_submit = std::max(last_submit, job.submit);
  }
  EXPECT_EQ(tenants.size(), 12U);
  EXPECT_EQ(last_submit, 1509493931 - 1504521041);  // 2017-10-31 23:52:11
}

}  // namespace
}  // namespace tidepool
