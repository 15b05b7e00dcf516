#include "sim/pack_simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "config/csv.h"
#include "config/test_source_dir.h"
#include "sim/fgd_results.h"
#include "sim/pack_grid.h"

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

TaskShape gpu_task(int gpus, int milli_per_gpu, std::int64_t milli_cpu = 1000) {
  return make_task_shape(gpus, milli_per_gpu, milli_cpu, 1024).value();
}

// `count` tasks of one whole GPU each.
std::vector<TaskShape> whole_gpu_tasks(int count) {
  return std::vector<TaskShape>(static_cast<std::size_t>(count), gpu_task(1, 1000));
}

std::int64_t demand_of(std::span<const TaskShape> tasks, std::span<const std::uint32_t> order) {
  std::int64_t demand = 0;
  for (std::uint32_t i : order) demand += tasks[i].total_milli_gpu();
  return demand;
}

std::vector<std::uint32_t> iota(std::size_t n) {
  std::vector<std::uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0U);
  return all;
}

// --- pack_arrival_order --------------------------------------------------------------------------

TEST(PackArrivalOrderTest, AtTheTargetItIsAShuffleOfTheList) {
  // Demand equals tune x capacity exactly: nothing is appended or removed.
  const std::vector<TaskShape> tasks = {gpu_task(1, 1000), gpu_task(2, 1000), gpu_task(1, 500),
                                        gpu_task(4, 1000), gpu_task(1, 250),  gpu_task(1, 250),
                                        gpu_task(0, 0),    gpu_task(8, 1000)};
  const std::int64_t capacity = demand_of(tasks, iota(tasks.size()));
  Rng rng(42);
  const auto order = pack_arrival_order(tasks, capacity, PackSettings{1.0, 42}, rng);
  EXPECT_THAT(order, UnorderedElementsAreArray(iota(tasks.size())));
  EXPECT_NE(order, iota(tasks.size())) << "42 should not shuffle 8 items into the identity";
}

TEST(PackArrivalOrderTest, TuneUpAppendsDrawsUntilTheTarget) {
  const auto tasks = whole_gpu_tasks(10);
  Rng rng(7);
  // Target 13 GPUs: 3 draws of one GPU are appended, the 4th would pass it.
  const auto order = pack_arrival_order(tasks, 10'000, PackSettings{1.3, 7}, rng);
  ASSERT_EQ(order.size(), 13U);
  // The list itself comes first, shuffled; the draws follow.
  EXPECT_THAT(std::vector<std::uint32_t>(order.begin(), order.begin() + 10),
              UnorderedElementsAreArray(iota(10)));
  for (std::uint32_t index : order) EXPECT_LT(index, 10U);
}

TEST(PackArrivalOrderTest, TuneUpStopsBeforeTheDrawThatWouldPassTheTarget) {
  const std::vector<TaskShape> tasks = {gpu_task(1, 1000), gpu_task(2, 1000), gpu_task(1, 300),
                                        gpu_task(4, 1000)};
  // The list asks for 7300; the target is 1.3 x 20000 = 26000.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const auto order = pack_arrival_order(tasks, 20'000, PackSettings{1.3, seed}, rng);
    const std::int64_t demand = demand_of(tasks, order);
    EXPECT_LE(demand, 26'000) << "seed " << seed;
    // Every draw asks for at most 4000, so stopping further below the target is stopping early.
    EXPECT_GT(demand + 4000, 26'000) << "seed " << seed;
    EXPECT_GT(order.size(), tasks.size()) << "seed " << seed;
  }
}

TEST(PackArrivalOrderTest, TuneDownRemovesTasks) {
  const auto tasks = whole_gpu_tasks(10);
  Rng rng(3);
  const auto order = pack_arrival_order(tasks, 10'000, PackSettings{0.5, 3}, rng);
  ASSERT_EQ(order.size(), 5U);
  std::vector<std::uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "an index repeats";
  for (std::uint32_t index : order) EXPECT_LT(index, 10U);
}

TEST(PackArrivalOrderTest, TuneDownStopsAtOrBelowTheTarget) {
  const std::vector<TaskShape> tasks = {gpu_task(1, 1000), gpu_task(2, 1000), gpu_task(1, 300),
                                        gpu_task(4, 1000), gpu_task(8, 1000), gpu_task(1, 700)};
  const std::int64_t demand = demand_of(tasks, iota(tasks.size()));  // 16000
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const auto order = pack_arrival_order(tasks, 10'000, PackSettings{1.0, seed}, rng);
    EXPECT_LE(demand_of(tasks, order), 10'000) << "seed " << seed;
    EXPECT_LT(order.size(), tasks.size());
  }
  EXPECT_EQ(demand, 16'000);
}

TEST(PackArrivalOrderTest, SameSeedSameOrder) {
  const std::vector<TaskShape> tasks = {gpu_task(1, 1000), gpu_task(2, 1000), gpu_task(1, 500),
                                        gpu_task(4, 1000), gpu_task(1, 250)};
  for (double tune : {0.5, 1.0, 1.3, 3.0}) {
    Rng first(42);
    Rng second(42);
    const auto a = pack_arrival_order(tasks, 5000, PackSettings{tune, 42}, first);
    const auto b = pack_arrival_order(tasks, 5000, PackSettings{tune, 42}, second);
    EXPECT_EQ(a, b) << "tune " << tune;
  }
  Rng one(42);
  Rng two(43);
  const auto tasks20 = whole_gpu_tasks(20);
  EXPECT_NE(pack_arrival_order(tasks20, 20'000, PackSettings{1.0, 42}, one),
            pack_arrival_order(tasks20, 20'000, PackSettings{1.0, 43}, two));
}

TEST(PackArrivalOrderTest, EmptyListGivesEmptyOrder) {
  Rng rng(1);
  EXPECT_TRUE(pack_arrival_order({}, 10'000, PackSettings{}, rng).empty());
}

// --- run_pack ------------------------------------------------------------------------------------

// Two nodes of two T4 GPUs each.
Pool tiny_pool() {
  GpuModelCatalog models;
  const GpuModelId t4 = models.intern("T4").value();
  std::vector<NodeSpec> nodes(2);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = "node-" + std::to_string(i);
    nodes[i].model = t4;
    nodes[i].gpu_count = 2;
    nodes[i].milli_cpu = 32'000;
    nodes[i].memory_mib = 131'072;
  }
  return Pool::create(std::move(models), Topology::single_leaf(), std::move(nodes)).value();
}

// GPU tasks only, so that a failure shows in the samples as arrived demand not allocated.
std::vector<TaskShape> tiny_workload() {
  return {gpu_task(1, 1000), gpu_task(1, 500), gpu_task(2, 1000), gpu_task(1, 250),
          gpu_task(1, 750)};
}

PackRun run_pack_with(std::string_view policy_name, std::span<const TaskShape> tasks,
                      const PackSettings& settings) {
  const WorkloadProfile profile = WorkloadProfile::from_tasks(tasks);
  auto policy = make_placement_policy(policy_name, profile);
  EXPECT_TRUE(policy.has_value());
  return run_pack(tiny_pool(), tasks, profile, **policy, settings);
}

TEST(RunPackTest, AllocationNeverExceedsCapacity) {
  const auto tasks = tiny_workload();
  const std::int64_t capacity = tiny_pool().capacity_milli_gpu();
  ASSERT_EQ(capacity, 4000);
  for (const PolicyInfo& info : placement_policies()) {
    for (std::uint64_t seed : {42, 43, 44}) {
      SCOPED_TRACE(std::string(info.name) + " seed " + std::to_string(seed));
      const PackRun run = run_pack_with(info.name, tasks, PackSettings{1.3, seed});
      EXPECT_EQ(run.total_gpus, 4);
      for (const PackSample& s : run.samples) {
        EXPECT_GE(s.allocated_milli_gpu, 0);
        EXPECT_LE(s.allocated_milli_gpu, capacity);
        EXPECT_LE(s.allocated_milli_gpu, s.arrived_milli_gpu);
        EXPECT_GE(s.fragmented_milli_gpu, 0.0);
        // Fragmentation is part of the free capacity.
        EXPECT_LE(s.fragmented_milli_gpu,
                  static_cast<double>(capacity - s.allocated_milli_gpu) + 1e-6);
      }
      // Arrived demand ends at tune x capacity or just below.
      EXPECT_LE(run.samples.back().arrived_milli_gpu, 5200);
    }
  }
}

TEST(RunPackTest, OneSampleBeforeTheFirstArrivalAndOneAfterEach) {
  const auto tasks = tiny_workload();
  for (const PolicyInfo& info : placement_policies()) {
    SCOPED_TRACE(info.name);
    const PackRun run = run_pack_with(info.name, tasks, PackSettings{1.3, 42});
    Rng rng(42);
    const auto order = pack_arrival_order(tasks, 4000, PackSettings{1.3, 42}, rng);
    EXPECT_EQ(run.arrived_tasks, static_cast<int>(order.size()));
    ASSERT_EQ(run.samples.size(), static_cast<std::size_t>(run.arrived_tasks) + 1);
    EXPECT_EQ(run.samples.front().arrived_milli_gpu, 0);
    EXPECT_EQ(run.samples.front().allocated_milli_gpu, 0);
    EXPECT_EQ(run.samples.back().arrived_milli_gpu, demand_of(tasks, order));
  }
}

TEST(RunPackTest, CountsFailedTasks) {
  const auto tasks = tiny_workload();
  for (const PolicyInfo& info : placement_policies()) {
    SCOPED_TRACE(info.name);
    const PackRun run = run_pack_with(info.name, tasks, PackSettings{1.3, 42});
    // Each arrival is either placed (allocation grows by its demand) or failed (it does not).
    int failed = 0;
    for (std::size_t i = 1; i < run.samples.size(); ++i) {
      const std::int64_t arrived =
          run.samples[i].arrived_milli_gpu - run.samples[i - 1].arrived_milli_gpu;
      const std::int64_t allocated =
          run.samples[i].allocated_milli_gpu - run.samples[i - 1].allocated_milli_gpu;
      ASSERT_GT(arrived, 0);
      if (allocated == 0) {
        ++failed;
      } else {
        EXPECT_EQ(allocated, arrived);
      }
    }
    EXPECT_EQ(run.failed_tasks, failed);
    // 130% of capacity arrives: at least 30% of it cannot be placed.
    EXPECT_GE(run.failed_tasks, 1);
  }
}

TEST(RunPackTest, TasksThatFitNowhereAllFail) {
  // Four GPUs on two-GPU nodes.
  const std::vector<TaskShape> tasks = {gpu_task(4, 1000), gpu_task(4, 1000), gpu_task(4, 1000)};
  for (const PolicyInfo& info : placement_policies()) {
    SCOPED_TRACE(info.name);
    const PackRun run = run_pack_with(info.name, tasks, PackSettings{1.3, 42});
    EXPECT_GT(run.arrived_tasks, 0);
    EXPECT_EQ(run.failed_tasks, run.arrived_tasks);
    for (const PackSample& s : run.samples) {
      EXPECT_EQ(s.allocated_milli_gpu, 0);
      // No typical task can use any GPU: all free capacity is fragmented.
      EXPECT_NEAR(s.fragmented_milli_gpu, 4000.0, 1e-6);
    }
  }
}

TEST(RunPackTest, SameSeedSameSamples) {
  const auto tasks = tiny_workload();
  for (const PolicyInfo& info : placement_policies()) {
    SCOPED_TRACE(info.name);
    const PackRun a = run_pack_with(info.name, tasks, PackSettings{1.3, 45});
    const PackRun b = run_pack_with(info.name, tasks, PackSettings{1.3, 45});
    ASSERT_EQ(a.samples.size(), b.samples.size());
    EXPECT_EQ(a.failed_tasks, b.failed_tasks);
    for (std::size_t i = 0; i < a.samples.size(); ++i) {
      EXPECT_EQ(a.samples[i].arrived_milli_gpu, b.samples[i].arrived_milli_gpu);
      EXPECT_EQ(a.samples[i].allocated_milli_gpu, b.samples[i].allocated_milli_gpu);
      // Bit for bit: the same computation on the same inputs.
      EXPECT_EQ(a.samples[i].fragmented_milli_gpu, b.samples[i].fragmented_milli_gpu);
    }
  }
}

TEST(RunPackTest, LeavesTheCallersPoolUntouched) {
  const Pool pool = tiny_pool();
  const auto tasks = tiny_workload();
  const WorkloadProfile profile = WorkloadProfile::from_tasks(tasks);
  auto policy = make_placement_policy("best-fit", profile).value();
  const PackRun run = run_pack(pool, tasks, profile, *policy, PackSettings{1.3, 42});
  EXPECT_GT(run.samples.back().allocated_milli_gpu, 0);
  EXPECT_EQ(pool.allocated_milli_gpu(), 0);
}

// --- allocation_curve / fragmentation_curve ------------------------------------------------------

// A run on `total_gpus` GPUs with samples (arrived, allocated, fragmented) in milli-GPUs.
PackRun make_run(std::int64_t total_gpus,
                 const std::vector<std::tuple<std::int64_t, std::int64_t, double>>& samples) {
  PackRun run;
  run.total_gpus = total_gpus;
  for (const auto& [arrived, allocated, fragmented] : samples) {
    run.samples.push_back({arrived, allocated, fragmented});
  }
  return run;
}

TEST(PercentCurveTest, MeanOfTheSamplesWhoseArrivedShareRoundsToK) {
  // 10 GPUs: 1% of capacity is 100 milli-GPU.
  const PackRun run = make_run(10, {{0, 0, 0}, {100, 100, 0}, {140, 120, 0}, {160, 160, 0}});
  const PercentCurve curve = allocation_curve(run);
  ASSERT_TRUE(curve[0].has_value());
  EXPECT_DOUBLE_EQ(*curve[0], 0.0);
  ASSERT_TRUE(curve[1].has_value());
  EXPECT_DOUBLE_EQ(*curve[1], 1.1);  // 1.00% and 1.20% arrived at 1.0% and 1.4%
  ASSERT_TRUE(curve[2].has_value());
  EXPECT_DOUBLE_EQ(*curve[2], 1.6);  // 1.6% arrived rounds to 2%
}

TEST(PercentCurveTest, EmptyBucketTakesItsNeighbours) {
  const PackRun run = make_run(10, {{0, 0, 10}, {200, 200, 30}});
  const PercentCurve allocation = allocation_curve(run);
  ASSERT_TRUE(allocation[1].has_value());
  EXPECT_DOUBLE_EQ(*allocation[1], 1.0);  // mean of 0% and 2%
  ASSERT_TRUE(allocation[3].has_value());
  EXPECT_DOUBLE_EQ(*allocation[3], 2.0);  // only 2% is near
  EXPECT_FALSE(allocation[4].has_value());
  EXPECT_FALSE(allocation[130].has_value());

  const PercentCurve fragmentation = fragmentation_curve(run);
  ASSERT_TRUE(fragmentation[1].has_value());
  EXPECT_DOUBLE_EQ(*fragmentation[1], 0.2);  // mean of 0.1% and 0.3%
  EXPECT_FALSE(fragmentation[4].has_value());
}

TEST(PercentCurveTest, ABucketWithSamplesIgnoresItsNeighbours) {
  const PackRun run = make_run(10, {{0, 0, 0}, {100, 50, 0}, {200, 200, 0}});
  const PercentCurve curve = allocation_curve(run);
  ASSERT_TRUE(curve[1].has_value());
  EXPECT_DOUBLE_EQ(*curve[1], 0.5);
}

TEST(PercentCurveTest, ArrivedShareRoundsHalfToEven) {
  // 1.5% and 2.5% both round to 2%, as Python's round() does.
  const PackRun run = make_run(10, {{150, 100, 0}, {250, 300, 0}, {350, 500, 0}});
  const PercentCurve curve = allocation_curve(run);
  ASSERT_TRUE(curve[2].has_value());
  EXPECT_DOUBLE_EQ(*curve[2], 2.0);  // mean of 1% and 3%
  ASSERT_TRUE(curve[4].has_value());
  EXPECT_DOUBLE_EQ(*curve[4], 5.0);  // 3.5% arrived rounds to 4%
  EXPECT_FALSE(curve[0].has_value());
}

TEST(PercentCurveTest, RoundsToTwoDecimalsHalfToEven) {
  const PackRun run = make_run(10, {{0, 0, 100.0 / 3}, {100, 0, 12.5}, {200, 0, 37.5}});
  const PercentCurve curve = fragmentation_curve(run);
  ASSERT_TRUE(curve[0] && curve[1] && curve[2]);
  EXPECT_DOUBLE_EQ(*curve[0], 0.33);  // 0.333...%
  EXPECT_DOUBLE_EQ(*curve[1], 0.12);  // 0.125% rounds to even
  EXPECT_DOUBLE_EQ(*curve[2], 0.38);  // 0.375% rounds to even
}

TEST(PercentCurveTest, AllocationRoundsEachSampleBeforeTheMean) {
  // 1000 GPUs: 1% is 10,000 milli-GPU. Allocations of 0.014%, 0.014% and 0.018% round to 0.01,
  // 0.01 and 0.02 (mean 0.0133 -> 0.01) as the FGD scripts do; unrounded their mean would be 0.02.
  const PackRun run = make_run(1000, {{500'000, 140, 0}, {500'000, 140, 0}, {500'000, 180, 0}});
  const PercentCurve curve = allocation_curve(run);
  ASSERT_TRUE(curve[50].has_value());
  EXPECT_DOUBLE_EQ(*curve[50], 0.01);
}

TEST(PercentCurveTest, RealRunCurvesAgreeAndStayInRange) {
  const auto tasks = tiny_workload();
  const PackRun run = run_pack_with("fgd", tasks, PackSettings{1.3, 42});
  const PercentCurve allocation = allocation_curve(run);
  const PercentCurve fragmentation = fragmentation_curve(run);
  ASSERT_TRUE(allocation[0].has_value());
  EXPECT_DOUBLE_EQ(*allocation[0], 0.0);
  for (std::size_t k = 0; k <= 130; ++k) {
    EXPECT_EQ(allocation[k].has_value(), fragmentation[k].has_value()) << k;
    if (allocation[k]) {
      EXPECT_GE(*allocation[k], 0.0);
      EXPECT_LE(*allocation[k], 100.0);
    }
  }
}

// --- fgd_results ---------------------------------------------------------------------------------

PackGridResult grid_result(std::string workload, std::string label, std::uint64_t seed,
                           double alloc_at_100, double frag_at_100) {
  PackGridResult r;
  r.workload = std::move(workload);
  r.policy_label = std::move(label);
  r.tune = 1.3;
  r.seed = seed;
  r.total_gpus = 6212;
  r.allocation[0] = 0.0;
  r.allocation[1] = 1.04;
  r.allocation[100] = alloc_at_100;
  r.fragmentation[0] = 2.0;
  r.fragmentation[100] = frag_at_100;
  return r;
}

std::string expected_header(bool allocation) {
  std::string header =
      allocation ? "workload,sc_policy,tune,seed,total_gpus" : "workload,sc_policy,tune,seed";
  for (int k = 0; k <= 130; ++k) header += "," + std::to_string(k);
  return header;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A file in the temporary folder, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& stem)
      : path_(std::filesystem::temp_directory_path() /
              (stem + "_" + std::to_string(::getpid()) + ".csv")) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  [[nodiscard]] std::string path() const { return path_.string(); }
  void write(const std::string& text) const { std::ofstream(path_) << text; }

 private:
  std::filesystem::path path_;
};

TEST(FgdResultsTest, WritesThePublishedAllocationLayout) {
  const std::vector<PackGridResult> results = {grid_result("w", "06-FGD", 42, 95.23, 4.73)};
  std::ostringstream out;
  write_fgd_results(out, results, PackMetric::kAllocation);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0], expected_header(true));
  EXPECT_THAT(lines[1], testing::StartsWith("w,06-FGD,1.3,42,6212,0.0,1.04,,"));
  EXPECT_EQ(std::count(lines[1].begin(), lines[1].end(), ','), 4 + 131);
  const auto fields = split_csv_line(lines[1]);
  ASSERT_EQ(fields.size(), 136U);
  EXPECT_EQ(fields[5 + 100], "95.23");
  EXPECT_EQ(fields[5 + 130], "");
}

TEST(FgdResultsTest, WritesThePublishedFragmentationLayout) {
  const std::vector<PackGridResult> results = {grid_result("w", "06-FGD", 42, 95.23, 4.73)};
  std::ostringstream out;
  write_fgd_results(out, results, PackMetric::kFragmentation);
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0], expected_header(false));
  EXPECT_THAT(lines[1], testing::StartsWith("w,06-FGD,1.3,42,2.0,,"));
  const auto fields = split_csv_line(lines[1]);
  ASSERT_EQ(fields.size(), 135U);
  EXPECT_EQ(fields[4 + 100], "4.73");
}

TEST(FgdResultsTest, HeadersMatchTheShippedPublishedFiles) {
  const auto root = test_support::test_source_root();
  if (!root) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  const std::filesystem::path dir = *root / "data/openb/fgd-results";
  for (const auto& [file, allocation] : {std::pair{"analysis_allo_discrete.csv", true},
                                         std::pair{"analysis_frag_discrete.csv", false}}) {
    std::ifstream in(dir / file);
    ASSERT_TRUE(in) << file;
    std::string header;
    std::getline(in, header);
    EXPECT_EQ(header, expected_header(allocation)) << file;
  }
}

TEST(FgdResultsTest, RoundTripsThroughAFile) {
  const std::vector<PackGridResult> results = {
      grid_result("openb_pod_list_default", "06-FGD", 42, 95.23, 4.73),
      grid_result("openb_pod_list_default", "06-FGD", 43, 96.0, 5.5),
      grid_result("openb_pod_list_default", "01-Random", 42, 86.25, 13.55),
      grid_result("openb_pod_list_gpushare40", "06-FGD", 42, 94.5, 3.25),
  };
  for (PackMetric metric : {PackMetric::kAllocation, PackMetric::kFragmentation}) {
    const bool allocation = metric == PackMetric::kAllocation;
    SCOPED_TRACE(allocation ? "allocation" : "fragmentation");
    TempFile file(allocation ? "tidepool_fgd_allocation" : "tidepool_fgd_fragmentation");
    {
      std::ofstream out(file.path());
      write_fgd_results(out, results, metric);
    }
    auto at_100 = read_fgd_results(file.path(), 100);
    ASSERT_TRUE(at_100.has_value()) << at_100.error().message();
    EXPECT_EQ(*at_100, collect_samples(results, metric, 100));
    ASSERT_EQ(at_100->size(), 3U);
    const auto& fgd = at_100->at({"openb_pod_list_default", "06-FGD"});
    if (allocation) {
      EXPECT_THAT(fgd, ElementsAre(95.23, 96.0));  // file order
    } else {
      EXPECT_THAT(fgd, ElementsAre(4.73, 5.5));
    }
    // A column left empty in every row gives no samples.
    auto at_130 = read_fgd_results(file.path(), 130);
    ASSERT_TRUE(at_130.has_value());
    EXPECT_TRUE(at_130->empty());
  }
}

TEST(FgdResultsTest, ReadFailsOnAMissingFile) {
  const std::string path = "/nonexistent/tidepool/analysis_allo_discrete.csv";
  auto samples = read_fgd_results(path, 100);
  ASSERT_FALSE(samples.has_value());
  EXPECT_EQ(samples.error().field, path);
}

TEST(FgdResultsTest, ReadFailsOnAMissingColumn) {
  TempFile file("tidepool_fgd_missing_column");
  file.write("workload,sc_policy,tune,seed,0,1\nw,p,1.3,42,0.0,1.0\n");
  auto samples = read_fgd_results(file.path(), 100);
  ASSERT_FALSE(samples.has_value());
  EXPECT_EQ(samples.error().reason, "missing column(s): 100");
}

TEST(FgdResultsTest, ReadFailsOnABadNumberNamingTheColumn) {
  TempFile file("tidepool_fgd_bad_number");
  file.write("workload,sc_policy,tune,seed,0,1\nw,p,1.3,42,0.0,1.0\nw,p,1.3,43,zero,1.0\n");
  auto samples = read_fgd_results(file.path(), 0);
  ASSERT_FALSE(samples.has_value());
  EXPECT_EQ(samples.error().field, file.path() + ":3 column '0'");
  EXPECT_THAT(samples.error().reason, HasSubstr("'zero'"));
}

TEST(FgdResultsTest, ShippedPublishedMediansMatchThePaper) {
  const auto root = test_support::test_source_root();
  if (!root) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  const std::string dir = root->string() + "/data/openb/fgd-results/";
  auto allocation = read_fgd_results(dir + "analysis_allo_discrete.csv", 100);
  auto fragmentation = read_fgd_results(dir + "analysis_frag_discrete.csv", 100);
  ASSERT_TRUE(allocation.has_value()) << allocation.error().message();
  ASSERT_TRUE(fragmentation.has_value()) << fragmentation.error().message();
  const std::string workload = "openb_pod_list_default";
  const std::vector<std::tuple<std::string, double, double>> expected = {
      {"01-Random", 86.25, 13.555},      {"02-DotProd", 90.555, 9.345},
      {"03-GpuClustering", 91.58, 8.28}, {"04-GpuPacking", 91.805, 8.125},
      {"05-BestFit", 92.91, 7.015},      {"06-FGD", 95.23, 4.735},
  };
  EXPECT_EQ(allocation->size(), expected.size());
  for (const auto& [label, alloc, frag] : expected) {
    ASSERT_TRUE(allocation->contains({workload, label})) << label;
    EXPECT_EQ(allocation->at({workload, label}).size(), 10U) << label;
    EXPECT_NEAR(median(allocation->at({workload, label})), alloc, 1e-9) << label;
    EXPECT_NEAR(median(fragmentation->at({workload, label})), frag, 1e-9) << label;
  }
}

TEST(CollectSamplesTest, GroupsByWorkloadAndPolicyAndSkipsAbsentValues) {
  std::vector<PackGridResult> results = {grid_result("w", "06-FGD", 42, 95.0, 4.0),
                                         grid_result("w", "06-FGD", 43, 96.0, 5.0),
                                         grid_result("w", "05-BestFit", 42, 92.0, 7.0)};
  results[1].allocation[1].reset();
  const MetricSamples at_100 = collect_samples(results, PackMetric::kAllocation, 100);
  ASSERT_EQ(at_100.size(), 2U);
  EXPECT_THAT(at_100.at({"w", "06-FGD"}), ElementsAre(95.0, 96.0));
  EXPECT_THAT(at_100.at({"w", "05-BestFit"}), ElementsAre(92.0));
  const MetricSamples at_1 = collect_samples(results, PackMetric::kAllocation, 1);
  EXPECT_THAT(at_1.at({"w", "06-FGD"}), ElementsAre(1.04));
  EXPECT_THAT(collect_samples(results, PackMetric::kFragmentation, 100).at({"w", "06-FGD"}),
              ElementsAre(4.0, 5.0));
  EXPECT_TRUE(collect_samples(results, PackMetric::kAllocation, 50).empty());
}

TEST(MedianTest, MiddleValueOfAnOddCount) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({7.5}), 7.5);
}

TEST(MedianTest, MeanOfTheTwoMiddleValuesOfAnEvenCount) {
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({90.56, 90.55}), 90.555);
}

TEST(MedianTest, EmptyIsNotANumber) { EXPECT_TRUE(std::isnan(median({}))); }

}  // namespace
}  // namespace tidepool
