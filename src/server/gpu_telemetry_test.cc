#include "server/gpu_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tidepool {
namespace {

using namespace std::chrono_literals;

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr Millis kMinute = std::chrono::minutes{1};
constexpr Millis kWindow = 15 * kMinute;  // IdleGpuRule's default
constexpr Millis kBeat{5000};             // a heartbeat every 5 s

GpuReading reading(int index, int utilization, std::int64_t used_mib = 1024,
                   std::int64_t total_mib = 81920) {
  GpuReading r;
  r.index = index;
  r.model = "H100";
  r.utilization_percent = utilization;
  r.memory_used_mib = used_mib;
  r.memory_total_mib = total_mib;
  r.power_milliwatts = 70000;
  r.temperature_celsius = 35;
  return r;
}

// The instant `d` after the tests' start (the epoch).
constexpr Instant after(Millis d) { return Instant{d}; }

// Heartbeats of one node every kBeat from `from` to `to` (both included), with the same readings
// and jobs; every alert raised, with the time it was raised.
struct Raised {
  Millis at;  // after the start
  IdleGpuAlert alert;
};
std::vector<Raised> beat(GpuTelemetry& telemetry, const std::string& node,
                         const std::vector<GpuReading>& readings,
                         const std::vector<std::int64_t>& jobs, Millis from, Millis to) {
  std::vector<Raised> raised;
  for (Millis t = from; t <= to; t += kBeat) {
    for (IdleGpuAlert& a : telemetry.update(node, readings, jobs, after(t))) {
      raised.push_back({t, std::move(a)});
    }
  }
  return raised;
}

std::string metrics(const GpuTelemetry& telemetry) {
  std::string out;
  telemetry.write_metrics(out);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The position of the line `line` in `text`; npos if it is not a whole line of it.
std::size_t line_position(const std::string& text, const std::string& line) {
  if (text.starts_with(line + "\n")) return 0;
  const std::size_t at = text.find("\n" + line + "\n");
  return at == std::string::npos ? at : at + 1;
}

TEST(IdleGpuTest, RaisedOnceAtTheWindowAndNotRepeatedWhileItHolds) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> readings = {reading(0, 2), reading(1, 80)};
  const std::vector<std::int64_t> jobs = {42, 42};

  EXPECT_THAT(beat(telemetry, "gpu-a1", readings, jobs, 0ms, kWindow - kBeat), IsEmpty());
  EXPECT_THAT(telemetry.active(), IsEmpty());

  const std::vector<IdleGpuAlert> at_window =
      telemetry.update("gpu-a1", readings, jobs, after(kWindow));
  ASSERT_THAT(at_window, SizeIs(1));
  const IdleGpuAlert& a = at_window[0];
  EXPECT_EQ(a.node, "gpu-a1");
  EXPECT_EQ(a.gpu, 0);
  EXPECT_EQ(a.job, 42);
  EXPECT_EQ(a.kind, IdleKind::kIdle);
  EXPECT_EQ(a.since, after(0ms));
  EXPECT_EQ(a.reason,
            "GPU 0 on node gpu-a1, held by job 42, below 5% utilisation for 15m: 2% utilisation, "
            "1024 of 81920 MiB used");

  EXPECT_THAT(beat(telemetry, "gpu-a1", readings, jobs, kWindow + kBeat, 3 * kWindow), IsEmpty());
  const std::vector<IdleGpuAlert> active = telemetry.active();
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].gpu, 0);
  EXPECT_EQ(active[0].since, after(0ms));
  EXPECT_THAT(active[0].reason, HasSubstr("for 45m:"));
  EXPECT_THAT(metrics(telemetry), HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"idle\"} 1\n"));
}

// What the advice reads: each GPU of a job with its latest utilisation, low for the window only
// once its alert is raised; GPUs of other jobs are not its own.
TEST(IdleGpuTest, AJobsGpusAreLowForTheWindowOnlyOnceItPassed) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> readings = {reading(0, 2), reading(1, 80), reading(2, 0)};
  const std::vector<std::int64_t> jobs = {42, 42, 7};
  (void)beat(telemetry, "n", readings, jobs, 0ms, kWindow - kBeat);
  std::vector<GpuUse> use = telemetry.use_of_job(42);
  ASSERT_EQ(use.size(), 2U);
  EXPECT_EQ(use[0].utilization_percent, 2);
  EXPECT_FALSE(use[0].low_for_window);
  EXPECT_FALSE(use[1].low_for_window);
  (void)telemetry.update("n", readings, jobs, after(kWindow));
  use = telemetry.use_of_job(42);
  EXPECT_TRUE(use[0].low_for_window);
  EXPECT_FALSE(use[1].low_for_window);
  EXPECT_THAT(telemetry.use_of_job(0), IsEmpty());
}

TEST(IdleGpuTest, RaisedAgainAfterTheConditionBreaksAndHoldsAgain) {
  GpuTelemetry telemetry;
  const std::vector<std::int64_t> jobs = {7};
  ASSERT_THAT(beat(telemetry, "n", {reading(0, 0)}, jobs, 0ms, kWindow), SizeIs(1));

  // One busy reading breaks the condition.
  EXPECT_THAT(telemetry.update("n", std::vector{reading(0, 60)}, jobs, after(kWindow + kBeat)),
              IsEmpty());
  EXPECT_THAT(telemetry.active(), IsEmpty());
  EXPECT_THAT(metrics(telemetry), Not(HasSubstr("tidepool_gpu_idle{")));

  const Millis again = kWindow + 2 * kBeat;
  const std::vector<Raised> raised =
      beat(telemetry, "n", {reading(0, 4)}, jobs, again, again + 2 * kWindow);
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].at, again + kWindow);
  EXPECT_EQ(raised[0].alert.since, after(again));
  EXPECT_THAT(metrics(telemetry), HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"idle\"} 2\n"));
}

TEST(IdleGpuTest, LowUseNowNamesAllocatedGpusBelowTheThresholdAtOnce) {
  GpuTelemetry telemetry;
  // GPU 0 busy, 1 idle, 2 stalled (memory high), 3 idle but free: at the first reading, long
  // before any alert's window.
  const std::vector<GpuReading> first = {reading(0, 90), reading(1, 1), reading(2, 0, 80000),
                                         reading(3, 0)};
  const std::vector<std::int64_t> jobs = {7, 7, 8, 0};
  EXPECT_THAT(telemetry.update("n1", first, jobs, after(Millis{0})), IsEmpty());
  const std::vector<std::int64_t> job9 = {9};
  telemetry.update("n0", std::vector<GpuReading>{reading(0, 2)}, job9, after(Millis{0}));
  const auto low = telemetry.low_use_now();
  ASSERT_THAT(low, SizeIs(3));
  EXPECT_EQ(low[0].node, "n0");
  EXPECT_EQ(low[0].job, 9);
  EXPECT_EQ(low[1].node, "n1");
  EXPECT_EQ(low[1].gpu, 1);
  EXPECT_EQ(low[1].job, 7);
  EXPECT_EQ(low[2].gpu, 2);
  EXPECT_EQ(low[2].job, 8);
  // Busy again: no longer counted.
  telemetry.update("n0", std::vector<GpuReading>{reading(0, 50)}, job9, after(kBeat));
  EXPECT_THAT(telemetry.low_use_now(), SizeIs(2));
}

TEST(IdleGpuTest, UnallocatedGpusNeverAlert) {
  GpuTelemetry telemetry;
  // GPU 0 is free (job 0); GPU 1 lies past the end of the jobs: free as well.
  const std::vector<Raised> raised =
      beat(telemetry, "n", {reading(0, 0), reading(1, 0, 70000)}, {0}, 0ms, 3 * kWindow);
  EXPECT_THAT(raised, IsEmpty());
  EXPECT_THAT(telemetry.active(), IsEmpty());
  const std::string text = metrics(telemetry);
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_in_use{node=\"n\",gpu=\"0\",model=\"H100\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_in_use{node=\"n\",gpu=\"1\",model=\"H100\"} 0\n"));
}

TEST(IdleGpuTest, ReallocationToAnotherJobResets) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> idle = {reading(0, 1)};
  EXPECT_THAT(beat(telemetry, "n", idle, {42}, 0ms, 10 * kMinute), IsEmpty());
  // Job 43 gets the GPU: its own window starts now.
  const Millis moved = 10 * kMinute + kBeat;
  const std::vector<Raised> raised = beat(telemetry, "n", idle, {43}, moved, moved + kWindow);
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].at, moved + kWindow);
  EXPECT_EQ(raised[0].alert.job, 43);
  EXPECT_EQ(raised[0].alert.since, after(moved));

  // Released, then given back to job 43: a new condition, with a new window.
  const Millis released = moved + kWindow + kBeat;
  EXPECT_THAT(telemetry.update("n", idle, std::vector<std::int64_t>{0}, after(released)),
              IsEmpty());
  EXPECT_THAT(telemetry.active(), IsEmpty());
  const std::vector<Raised> back =
      beat(telemetry, "n", idle, {43}, released + kBeat, released + kBeat + kWindow);
  ASSERT_THAT(back, SizeIs(1));
  EXPECT_EQ(back[0].at, released + kBeat + kWindow);
}

TEST(IdleGpuTest, KindFollowsTheMemoryShare) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> readings = {
      reading(0, 0, 40959, 81920),  // just below 50%: idle
      reading(1, 0, 40960, 81920),  // exactly 50%: stalled
      reading(2, 3, 80000, 81920),  // stalled
      reading(3, 0, 4096, 0),       // total unknown: idle
  };
  const std::vector<Raised> raised = beat(telemetry, "n", readings, {1, 2, 3, 4}, 0ms, kWindow);
  ASSERT_THAT(raised, SizeIs(4));
  EXPECT_EQ(raised[0].alert.kind, IdleKind::kIdle);
  EXPECT_EQ(raised[1].alert.kind, IdleKind::kStalled);
  EXPECT_EQ(raised[2].alert.kind, IdleKind::kStalled);
  EXPECT_EQ(raised[3].alert.kind, IdleKind::kIdle);
  EXPECT_EQ(raised[1].alert.reason,
            "GPU 1 on node n, held by job 2, below 5% utilisation with memory at or above 50% for "
            "15m (a stalled data loader?): 0% utilisation, 40960 of 81920 MiB used");
  EXPECT_THAT(raised[3].alert.reason, HasSubstr("4096 MiB used of an unknown total"));

  const std::string text = metrics(telemetry);
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle{node=\"n\",gpu=\"0\",kind=\"idle\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle{node=\"n\",gpu=\"1\",kind=\"stalled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"idle\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"stalled\"} 2\n"));
}

TEST(IdleGpuTest, MemoryCrossingTheThresholdStartsTheOtherKind) {
  GpuTelemetry telemetry;
  EXPECT_THAT(beat(telemetry, "n", {reading(0, 0, 1024)}, {5}, 0ms, 10 * kMinute), IsEmpty());
  // The data loader filled the memory and stalled: the stalled condition starts now.
  const Millis loaded = 10 * kMinute + kBeat;
  const std::vector<Raised> raised =
      beat(telemetry, "n", {reading(0, 0, 70000)}, {5}, loaded, loaded + kWindow);
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].at, loaded + kWindow);
  EXPECT_EQ(raised[0].alert.kind, IdleKind::kStalled);
}

TEST(IdleGpuTest, GapLongerThanTheWindowResets) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> idle = {reading(0, 0)};
  const std::vector<std::int64_t> jobs = {9};
  EXPECT_THAT(beat(telemetry, "n", idle, jobs, 0ms, 10 * kMinute), IsEmpty());
  // Silent for longer than the window: the condition restarts at the next reading.
  const Millis back = 10 * kMinute + kWindow + 1ms;
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(back)), IsEmpty());
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(back + kWindow - 1ms)), IsEmpty());
  const std::vector<IdleGpuAlert> raised = telemetry.update("n", idle, jobs, after(back + kWindow));
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].since, after(back));
}

TEST(IdleGpuTest, GapOfExactlyTheWindowContinues) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> idle = {reading(0, 0)};
  const std::vector<std::int64_t> jobs = {9};
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(1s)), IsEmpty());
  const std::vector<IdleGpuAlert> raised = telemetry.update("n", idle, jobs, after(1s + kWindow));
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].since, after(1s));
}

TEST(IdleGpuTest, TimeGoingBackResets) {
  GpuTelemetry telemetry;
  const std::vector<GpuReading> idle = {reading(0, 0)};
  const std::vector<std::int64_t> jobs = {9};
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(10 * kMinute)), IsEmpty());
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(5 * kMinute)), IsEmpty());
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(5 * kMinute + kWindow - 1ms)), IsEmpty());
  EXPECT_THAT(telemetry.update("n", idle, jobs, after(5 * kMinute + kWindow)), SizeIs(1));
}

TEST(IdleGpuTest, ShorterWindowFromTheRule) {
  IdleGpuRule rule;
  rule.window = kMinute;
  rule.low_utilization_percent = 10;
  rule.high_memory_percent = 90;
  GpuTelemetry telemetry(rule);
  // 9% is low under this rule; 80% of the memory is not high.
  const std::vector<Raised> raised =
      beat(telemetry, "n", {reading(0, 9, 65536), reading(1, 10)}, {1, 1}, 0ms, 3 * kMinute);
  ASSERT_THAT(raised, SizeIs(1));
  EXPECT_EQ(raised[0].at, kMinute);
  EXPECT_EQ(raised[0].alert.gpu, 0);
  EXPECT_EQ(raised[0].alert.kind, IdleKind::kIdle);
  EXPECT_THAT(raised[0].alert.reason, HasSubstr("below 10% utilisation for 1m:"));
}

TEST(IdleGpuTest, RuleValidation) {
  EXPECT_TRUE(validate_idle_gpu_rule(IdleGpuRule{}).has_value());
  IdleGpuRule rule;
  rule.window = Millis{0};
  ASSERT_FALSE(validate_idle_gpu_rule(rule).has_value());
  EXPECT_EQ(validate_idle_gpu_rule(rule).error().field, "window_ms");
  rule = IdleGpuRule{};
  rule.low_utilization_percent = 101;
  ASSERT_FALSE(validate_idle_gpu_rule(rule).has_value());
  EXPECT_EQ(validate_idle_gpu_rule(rule).error().field, "low_utilization_percent");
  rule = IdleGpuRule{};
  rule.high_memory_percent = 0;
  ASSERT_FALSE(validate_idle_gpu_rule(rule).has_value());
  EXPECT_EQ(validate_idle_gpu_rule(rule).error().field, "high_memory_percent");
  EXPECT_EQ(idle_kind_name(IdleKind::kIdle), "idle");
  EXPECT_EQ(idle_kind_name(IdleKind::kStalled), "stalled");
}

TEST(GpuTelemetryTest, ForgetNodeRemovesItsSeries) {
  GpuTelemetry telemetry;
  ASSERT_THAT(beat(telemetry, "a", {reading(0, 0)}, {1}, 0ms, kWindow), SizeIs(1));
  ASSERT_THAT(beat(telemetry, "b", {reading(0, 0)}, {2}, 0ms, kWindow), SizeIs(1));
  telemetry.forget_node("a");

  const std::string text = metrics(telemetry);
  EXPECT_THAT(text, Not(HasSubstr("node=\"a\"")));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_utilization_percent{node=\"b\",gpu=\"0\""));
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"idle\"} 2\n"));
  const std::vector<IdleGpuAlert> active = telemetry.active();
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].node, "b");

  // Back again: a new window.
  EXPECT_THAT(telemetry.update("a", std::vector{reading(0, 0)}, std::vector<std::int64_t>{1},
                               after(kWindow + kBeat)),
              IsEmpty());
}

TEST(GpuTelemetryTest, UpdateReplacesTheNodesGpus) {
  GpuTelemetry telemetry;
  telemetry.update("n", std::vector{reading(0, 10), reading(1, 20)}, {}, after(0ms));
  telemetry.update("n", std::vector{reading(1, 30), reading(1, 40)}, {}, after(kBeat));
  const std::string text = metrics(telemetry);
  EXPECT_THAT(text, Not(HasSubstr("gpu=\"0\"")));
  // Of two readings with one index, the later counts.
  EXPECT_THAT(
      text,
      HasSubstr("tidepool_gpu_utilization_percent{node=\"n\",gpu=\"1\",model=\"H100\"} 40\n"));
}

// Two nodes, two GPUs each: one busy, one idle past the window.
GpuTelemetry small_example(bool reversed) {
  GpuReading busy = reading(2, 87, 40960, 81920);
  busy.power_milliwatts = 312500;
  busy.temperature_celsius = 61;
  busy.throttle_reasons = 0x4;
  busy.ecc_errors_uncorrected = 3;
  GpuReading free = reading(10, 0, 0, 81920);
  free.power_milliwatts = 1;
  GpuReading odd = reading(0, 1, 0, 40960);
  odd.model = "A100 \"SXM\" \\ 40GB\n";
  odd.power_milliwatts = 300000;

  GpuTelemetry telemetry;
  std::vector<GpuReading> node_b = {busy, free};
  const std::vector<GpuReading> node_a = {odd};
  const std::vector<std::int64_t> jobs_b = {0, 0, 17};
  if (reversed) std::swap(node_b[0], node_b[1]);
  for (Instant t = after(0ms); t <= after(kWindow); t += kBeat) {
    if (reversed) {
      telemetry.update("gpu-b", node_b, jobs_b, t);
      telemetry.update("gpu-a", node_a, std::vector<std::int64_t>{5}, t);
    } else {
      telemetry.update("gpu-a", node_a, std::vector<std::int64_t>{5}, t);
      telemetry.update("gpu-b", node_b, jobs_b, t);
    }
  }
  return telemetry;
}

TEST(GpuTelemetryTest, MetricsTextOfASmallExample) {
  const std::string text = metrics(small_example(false));
  // NOLINTBEGIN(bugprone-suspicious-missing-comma): long lines are written in two literals.
  const std::vector<std::string> expected = {
      "# HELP tidepool_gpu_utilization_percent Share of the last sample period a kernel ran on the "
      "GPU, as its agent last reported",
      "# TYPE tidepool_gpu_utilization_percent gauge",
      "tidepool_gpu_utilization_percent{node=\"gpu-a\",gpu=\"0\",model=\"A100 \\\"SXM\\\" \\\\ "
      "40GB\\n\"} 1",
      "tidepool_gpu_utilization_percent{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 87",
      "tidepool_gpu_utilization_percent{node=\"gpu-b\",gpu=\"10\",model=\"H100\"} 0",
      "tidepool_gpu_memory_used_bytes{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 42949672960",
      "tidepool_gpu_memory_total_bytes{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 85899345920",
      "# TYPE tidepool_gpu_power_watts gauge",
      "tidepool_gpu_power_watts{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 312.5",
      "tidepool_gpu_power_watts{node=\"gpu-b\",gpu=\"10\",model=\"H100\"} 0.001",
      "tidepool_gpu_temperature_celsius{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 61",
      "tidepool_gpu_throttle_reasons{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 4",
      "# TYPE tidepool_gpu_ecc_errors_uncorrected_total counter",
      "tidepool_gpu_ecc_errors_uncorrected_total{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 3",
      "tidepool_gpu_in_use{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 1",
      "tidepool_gpu_in_use{node=\"gpu-b\",gpu=\"10\",model=\"H100\"} 0",
      "# TYPE tidepool_gpu_idle gauge",
      "tidepool_gpu_idle{node=\"gpu-a\",gpu=\"0\",kind=\"idle\"} 1",
      "# TYPE tidepool_gpu_idle_alerts_total counter",
      "tidepool_gpu_idle_alerts_total{kind=\"idle\"} 1",
      "tidepool_gpu_idle_alerts_total{kind=\"stalled\"} 0",
  };
  // NOLINTEND(bugprone-suspicious-missing-comma)
  for (const std::string& line : expected) {
    EXPECT_NE(line_position(text, line), std::string::npos) << line << "\nin:\n" << text;
  }
  EXPECT_THAT(text, HasSubstr("power_watts{node=\"gpu-a\",gpu=\"0\",model=\"A100 \\\"SXM\\\" "
                              "\\\\ 40GB\\n\"} 300\n"));

  // HELP and TYPE once per family, every line a comment or a sample of the family above it.
  std::vector<std::string> families;
  std::string family;
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with("# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_THAT(families, Not(::testing::Contains(family))) << family;
      families.push_back(family);
    } else if (!line.starts_with("# HELP ")) {
      EXPECT_TRUE(line.starts_with(family + "{")) << line;
    }
  }
  EXPECT_THAT(families, ::testing::ElementsAre(
                            "tidepool_gpu_utilization_percent", "tidepool_gpu_memory_used_bytes",
                            "tidepool_gpu_memory_total_bytes", "tidepool_gpu_power_watts",
                            "tidepool_gpu_temperature_celsius", "tidepool_gpu_throttle_reasons",
                            "tidepool_gpu_ecc_errors_uncorrected_total", "tidepool_gpu_in_use",
                            "tidepool_gpu_idle", "tidepool_gpu_idle_alerts_total"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '#'), 2 * 10);
}

TEST(GpuTelemetryTest, MetricsOrderIsDeterministic) {
  const std::string text = metrics(small_example(false));
  // Node, then GPU by number (2 before 10), whatever order the updates and readings came in.
  const std::size_t a0 = line_position(text,
                                       "tidepool_gpu_temperature_celsius{node=\"gpu-a\","
                                       "gpu=\"0\",model=\"A100 \\\"SXM\\\" \\\\ 40GB\\n\"} 35");
  const std::size_t b2 = line_position(
      text, "tidepool_gpu_temperature_celsius{node=\"gpu-b\",gpu=\"2\",model=\"H100\"} 61");
  const std::size_t b10 = line_position(
      text, "tidepool_gpu_temperature_celsius{node=\"gpu-b\",gpu=\"10\",model=\"H100\"} 35");
  ASSERT_NE(a0, std::string::npos);
  ASSERT_NE(b2, std::string::npos);
  ASSERT_NE(b10, std::string::npos);
  EXPECT_LT(a0, b2);
  EXPECT_LT(b2, b10);
  EXPECT_EQ(metrics(small_example(true)), text);
  EXPECT_EQ(metrics(small_example(false)), text);
}

TEST(GpuTelemetryTest, MetricsWithoutGpusStillNameEveryFamily) {
  const std::string text = metrics(GpuTelemetry{});
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2 * 10 + 2);
  EXPECT_THAT(text, HasSubstr("tidepool_gpu_idle_alerts_total{kind=\"stalled\"} 0\n"));
}

TEST(GpuTelemetryTest, MetricsPassPromtool) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not on PATH";
  }
  std::string text = metrics(small_example(false));
  std::string path =
      (std::filesystem::temp_directory_path() / "tidepool_gpu_metrics_XXXXXX").string();
  const int fd = mkstemp(path.data());
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream file(path, std::ios::binary);
    file << text;
  }
  const std::string report = path + ".out";
  const int status =
      std::system(("promtool check metrics < '" + path + "' > '" + report + "' 2>&1").c_str());
  std::ifstream in(report);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  std::filesystem::remove(report);
  EXPECT_EQ(status, 0) << said << "\nfor:\n" << text;
}

}  // namespace
}  // namespace tidepool
