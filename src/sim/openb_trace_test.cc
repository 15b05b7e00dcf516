#include "sim/openb_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "config/test_source_dir.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

constexpr const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";
constexpr const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
constexpr const char* kShortPodHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n";

Result<std::vector<NodeSpec>> read_nodes(const std::string& text, GpuModelCatalog& models) {
  std::istringstream in(text);
  return read_openb_nodes(in, "nodes.csv", models);
}

Result<std::vector<PodRecord>> read_pods(const std::string& text, GpuModelCatalog& models) {
  std::istringstream in(text);
  return read_openb_pods(in, "pods.csv", models);
}

// The error of reading one node row after the header.
Error node_error(const std::string& row) {
  GpuModelCatalog models;
  auto nodes = read_nodes(std::string(kNodeHeader) + row + "\n", models);
  EXPECT_FALSE(nodes.has_value()) << "accepted: " << row;
  return nodes ? Error{} : nodes.error();
}

// The error of reading one pod row after the full header.
Error pod_error(const std::string& row) {
  GpuModelCatalog models;
  auto pods = read_pods(std::string(kPodHeader) + row + "\n", models);
  EXPECT_FALSE(pods.has_value()) << "accepted: " << row;
  return pods ? Error{} : pods.error();
}

// --- nodes ---------------------------------------------------------------------------------------

TEST(ReadOpenbNodesTest, ReadsEveryColumn) {
  GpuModelCatalog models;
  auto nodes = read_nodes(std::string(kNodeHeader) +
                              "openb-node-0000,64000,262144,2,P100\n"
                              "openb-node-0001,96000,786432,8,V100M32\n"
                              "openb-node-0002,32000,131072,4,P100\n",
                          models);
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 3U);
  const NodeSpec& first = (*nodes)[0];
  EXPECT_EQ(first.name, "openb-node-0000");
  EXPECT_EQ(first.milli_cpu, 64000);
  EXPECT_EQ(first.memory_mib, 262144);
  EXPECT_EQ(first.gpu_count, 2);
  EXPECT_EQ(models.name(first.model), "P100");
  EXPECT_EQ(first.leaf, LeafId{0});
  EXPECT_EQ((*nodes)[1].gpu_count, 8);
  EXPECT_EQ(models.name((*nodes)[1].model), "V100M32");
  // Models are interned once, in order of first appearance.
  EXPECT_EQ(models.size(), 2);
  EXPECT_EQ((*nodes)[2].model, first.model);
}

TEST(ReadOpenbNodesTest, CpuOnlyNodeNeedsNoModel) {
  GpuModelCatalog models;
  auto nodes = read_nodes(std::string(kNodeHeader) + "cpu-node,32000,65536,0,\n", models);
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 1U);
  EXPECT_EQ((*nodes)[0].gpu_count, 0);
  EXPECT_EQ(models.size(), 0);
}

TEST(ReadOpenbNodesTest, HeaderOnlyGivesNoNodes) {
  GpuModelCatalog models;
  auto nodes = read_nodes(kNodeHeader, models);
  ASSERT_TRUE(nodes.has_value());
  EXPECT_TRUE(nodes->empty());
}

TEST(ReadOpenbNodesTest, MissingColumnsAreNamed) {
  GpuModelCatalog models;
  auto nodes = read_nodes("sn,cpu_milli,gpu\nn0,1000,1\n", models);
  ASSERT_FALSE(nodes.has_value());
  EXPECT_EQ(nodes.error().field, "nodes.csv:1");
  EXPECT_THAT(nodes.error().reason, HasSubstr("memory_mib"));
  EXPECT_THAT(nodes.error().reason, HasSubstr("model"));
}

TEST(ReadOpenbNodesTest, RejectsNegativeCpu) {
  const Error error = node_error("n0,-1,1024,1,T4");
  EXPECT_EQ(error.field, "nodes.csv:2 column 'cpu_milli'");
  EXPECT_THAT(error.reason, HasSubstr("negative"));
}

TEST(ReadOpenbNodesTest, RejectsNegativeMemory) {
  const Error error = node_error("n0,1000,-5,1,T4");
  EXPECT_EQ(error.field, "nodes.csv:2 column 'memory_mib'");
  EXPECT_THAT(error.reason, HasSubstr("negative"));
}

TEST(ReadOpenbNodesTest, RejectsGpuCountOutOfRange) {
  EXPECT_EQ(node_error("n0,1000,1024,-1,T4").field, "nodes.csv:2 column 'gpu'");
  const Error error = node_error("n0,1000,1024," + std::to_string(kMaxGpusPerNode + 1) + ",T4");
  EXPECT_EQ(error.field, "nodes.csv:2 column 'gpu'");
  EXPECT_THAT(error.reason, HasSubstr(std::to_string(kMaxGpusPerNode + 1)));
}

TEST(ReadOpenbNodesTest, RejectsGpuNodeWithoutModel) {
  EXPECT_EQ(node_error("n0,1000,1024,2,").field, "nodes.csv:2 column 'model'");
}

TEST(ReadOpenbNodesTest, RejectsNodeWithoutName) {
  EXPECT_EQ(node_error(",1000,1024,2,T4").field, "nodes.csv:2 column 'sn'");
}

TEST(ReadOpenbNodesTest, RejectsBadIntegerNamingLineAndColumn) {
  GpuModelCatalog models;
  auto nodes =
      read_nodes(std::string(kNodeHeader) + "n0,1000,1024,1,T4\nn1,1000,lots,1,T4\n", models);
  ASSERT_FALSE(nodes.has_value());
  EXPECT_EQ(nodes.error().field, "nodes.csv:3 column 'memory_mib'");
  EXPECT_THAT(nodes.error().reason, HasSubstr("'lots'"));
}

// --- pods ----------------------------------------------------------------------------------------

TEST(ReadOpenbPodsTest, ReadsTheFullLayout) {
  GpuModelCatalog models;
  auto pods = read_pods(std::string(kPodHeader) +
                            "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
                            "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                            "openb-pod-0002,88000,327680,8,1000,,LS,Running,100,200,\n"
                            "openb-pod-0003,4000,8192,0,0,,BE,Failed,,,\n",
                        models);
  ASSERT_TRUE(pods.has_value()) << pods.error().message();
  ASSERT_EQ(pods->size(), 4U);

  const PodRecord& whole = (*pods)[0];
  EXPECT_EQ(whole.name, "openb-pod-0000");
  EXPECT_EQ(whole.shape.gpu_count, 1);
  EXPECT_EQ(whole.shape.milli_per_gpu, 1000);
  EXPECT_EQ(whole.shape.milli_cpu, 12000);
  EXPECT_EQ(whole.shape.memory_mib, 16384);
  EXPECT_TRUE(whole.shape.models.is_any());
  EXPECT_EQ(whole.creation_time, Seconds{0});
  EXPECT_EQ(whole.deletion_time, Seconds{12537496});
  EXPECT_EQ(whole.scheduled_time, Seconds{0});

  const PodRecord& shared = (*pods)[1];
  EXPECT_TRUE(shared.shape.is_fractional());
  EXPECT_EQ(shared.shape.milli_per_gpu, 460);
  EXPECT_EQ(shared.shape.total_milli_gpu(), 460);

  const PodRecord& multi = (*pods)[2];
  EXPECT_EQ(multi.shape.gpu_count, 8);
  EXPECT_EQ(multi.shape.total_milli_gpu(), 8000);
  EXPECT_EQ(multi.scheduled_time, std::nullopt);  // never ran

  const PodRecord& cpu_only = (*pods)[3];
  EXPECT_FALSE(cpu_only.shape.needs_gpu());
  EXPECT_EQ(cpu_only.creation_time, std::nullopt);
  EXPECT_EQ(cpu_only.deletion_time, std::nullopt);
  EXPECT_EQ(models.size(), 0);
}

TEST(ReadOpenbPodsTest, ReadsTheFiveColumnVariant) {
  // The multigpuNN pod lists carry only the first five columns.
  GpuModelCatalog models;
  auto pods = read_pods(std::string(kShortPodHeader) +
                            "openb-pod-0000,8000,30517,2,1000\n"
                            "openb-pod-0001,4000,15258,1,250\n",
                        models);
  ASSERT_TRUE(pods.has_value()) << pods.error().message();
  ASSERT_EQ(pods->size(), 2U);
  EXPECT_EQ((*pods)[0].shape.gpu_count, 2);
  EXPECT_EQ((*pods)[1].shape.milli_per_gpu, 250);
  for (const PodRecord& pod : *pods) {
    EXPECT_TRUE(pod.shape.models.is_any());
    EXPECT_EQ(pod.creation_time, std::nullopt);
    EXPECT_EQ(pod.deletion_time, std::nullopt);
    EXPECT_EQ(pod.scheduled_time, std::nullopt);
  }
}

TEST(ReadOpenbPodsTest, ParsesGpuSpecIntoAModelSet) {
  GpuModelCatalog models;
  ASSERT_TRUE(models.intern("T4").has_value());
  auto pods = read_pods(std::string(kPodHeader) +
                            "p0,1000,1024,1,1000,V100M16|V100M32,LS,Running,0,10,0\n"
                            "p1,1000,1024,1,1000,T4,LS,Running,0,10,0\n"
                            "p2,1000,1024,1,1000,,LS,Running,0,10,0\n",
                        models);
  ASSERT_TRUE(pods.has_value()) << pods.error().message();
  ASSERT_EQ(models.size(), 3);  // T4 known before; the two V100 models added
  const GpuModelId t4 = *models.find("T4");
  const GpuModelId v100m16 = *models.find("V100M16");
  const GpuModelId v100m32 = *models.find("V100M32");

  const ModelSet& either_v100 = (*pods)[0].shape.models;
  EXPECT_FALSE(either_v100.is_any());
  EXPECT_TRUE(either_v100.accepts(v100m16));
  EXPECT_TRUE(either_v100.accepts(v100m32));
  EXPECT_FALSE(either_v100.accepts(t4));

  const ModelSet& only_t4 = (*pods)[1].shape.models;
  EXPECT_TRUE(only_t4.accepts(t4));
  EXPECT_FALSE(only_t4.accepts(v100m16));

  EXPECT_TRUE((*pods)[2].shape.models.is_any());
}

TEST(ReadOpenbPodsTest, MissingColumnsAreNamed) {
  GpuModelCatalog models;
  auto pods = read_pods("name,cpu_milli,memory_mib,num_gpu\np0,1000,1024,1\n", models);
  ASSERT_FALSE(pods.has_value());
  EXPECT_EQ(pods.error().field, "pods.csv:1");
  EXPECT_EQ(pods.error().reason, "missing column(s): gpu_milli");
}

TEST(ReadOpenbPodsTest, RejectsNegativeCpu) {
  const Error error = pod_error("p0,-1000,1024,1,1000,,LS,Running,0,10,0");
  EXPECT_EQ(error.field, "pods.csv:2 column 'cpu_milli'");
  EXPECT_THAT(error.reason, HasSubstr("negative"));
}

TEST(ReadOpenbPodsTest, RejectsNegativeMemory) {
  const Error error = pod_error("p0,1000,-1,1,1000,,LS,Running,0,10,0");
  EXPECT_EQ(error.field, "pods.csv:2 column 'memory_mib'");
  EXPECT_THAT(error.reason, HasSubstr("negative"));
}

TEST(ReadOpenbPodsTest, RejectsNegativeGpuCount) {
  EXPECT_EQ(pod_error("p0,1000,1024,-1,1000,,LS,Running,0,10,0").field,
            "pods.csv:2 column 'num_gpu'");
}

TEST(ReadOpenbPodsTest, RejectsTooManyGpus) {
  const Error error =
      pod_error("p0,1000,1024," + std::to_string(kMaxGpusPerNode + 1) + ",1000,,LS,Running,0,10,0");
  EXPECT_EQ(error.field, "pods.csv:2 column 'num_gpu'");
}

TEST(ReadOpenbPodsTest, RejectsAFractionOfAGpuWithTwoGpus) {
  const Error error = pod_error("p0,1000,1024,2,500,,LS,Running,0,10,0");
  EXPECT_EQ(error.field, "pods.csv:2 column 'gpu_milli'");
  EXPECT_THAT(error.reason, HasSubstr("only with one GPU"));
}

TEST(ReadOpenbPodsTest, RejectsGpuShareOutOfRange) {
  EXPECT_EQ(pod_error("p0,1000,1024,1,0,,LS,Running,0,10,0").field,
            "pods.csv:2 column 'gpu_milli'");
  EXPECT_EQ(pod_error("p0,1000,1024,1,1001,,LS,Running,0,10,0").field,
            "pods.csv:2 column 'gpu_milli'");
  EXPECT_EQ(pod_error("p0,1000,1024,0,500,,LS,Running,0,10,0").field,
            "pods.csv:2 column 'gpu_milli'");
}

TEST(ReadOpenbPodsTest, RejectsDeletionBeforeCreation) {
  const Error error = pod_error("p0,1000,1024,1,1000,,LS,Running,100,99,100");
  EXPECT_EQ(error.field, "pods.csv:2 column 'deletion_time'");
  EXPECT_THAT(error.reason, HasSubstr("before"));
}

TEST(ReadOpenbPodsTest, RejectsNegativeTimes) {
  EXPECT_EQ(pod_error("p0,1000,1024,1,1000,,LS,Running,-1,10,0").field,
            "pods.csv:2 column 'creation_time'");
  EXPECT_EQ(pod_error("p0,1000,1024,1,1000,,LS,Running,0,-10,0").field,
            "pods.csv:2 column 'deletion_time'");
  EXPECT_EQ(pod_error("p0,1000,1024,1,1000,,LS,Running,0,10,-3").field,
            "pods.csv:2 column 'scheduled_time'");
}

TEST(ReadOpenbPodsTest, RejectsBadIntegers) {
  const Error gpu = pod_error("p0,1000,1024,one,1000,,LS,Running,0,10,0");
  EXPECT_EQ(gpu.field, "pods.csv:2 column 'num_gpu'");
  EXPECT_THAT(gpu.reason, HasSubstr("'one'"));
  EXPECT_EQ(pod_error("p0,1000,1024,1,1000,,LS,Running,soon,10,0").field,
            "pods.csv:2 column 'creation_time'");
}

TEST(ReadOpenbPodsTest, RejectsMissingRequiredValue) {
  EXPECT_EQ(pod_error("p0,,1024,1,1000,,LS,Running,0,10,0").field, "pods.csv:2 column 'cpu_milli'");
}

TEST(ReadOpenbPodsTest, RejectsPodWithoutName) {
  EXPECT_EQ(pod_error(",1000,1024,1,1000,,LS,Running,0,10,0").field, "pods.csv:2 column 'name'");
}

TEST(ReadOpenbPodsTest, ErrorNamesTheLineOfTheBadRow) {
  GpuModelCatalog models;
  auto pods = read_pods(std::string(kShortPodHeader) + "p0,1000,1024,1,1000\n\np1,1000,1024,3,10\n",
                        models);
  ASSERT_FALSE(pods.has_value());
  EXPECT_EQ(pods.error().field, "pods.csv:4 column 'gpu_milli'");
}

// --- files ---------------------------------------------------------------------------------------

TEST(LoadOpenbTest, MissingFileIsAnError) {
  GpuModelCatalog models;
  const std::string path = "/nonexistent/tidepool/nodes.csv";
  auto nodes = load_openb_nodes(path, models);
  ASSERT_FALSE(nodes.has_value());
  EXPECT_EQ(nodes.error().field, path);
  EXPECT_THAT(nodes.error().reason, HasSubstr("cannot open"));
  auto pods = load_openb_pods(path, models);
  ASSERT_FALSE(pods.has_value());
  EXPECT_EQ(pods.error().field, path);
}

// The openb files shipped in data/openb (set by the build: TIDEPOOL_SOURCE_DIR).
std::filesystem::path shipped_openb() {
  const auto root = test_support::test_source_root();
  return root ? *root / "data" / "openb" : std::filesystem::path();
}

TEST(LoadOpenbTest, ReadsTheShippedTrace) {
  const auto dir = shipped_openb();
  if (dir.empty()) GTEST_SKIP() << "TIDEPOOL_SOURCE_DIR is not set";
  GpuModelCatalog models;
  auto nodes = load_openb_nodes((dir / "openb_node_list_gpu_node.csv").string(), models);
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message();
  EXPECT_EQ(nodes->size(), 1213U);
  int gpus = 0;
  for (const NodeSpec& node : *nodes) gpus += node.gpu_count;
  EXPECT_EQ(gpus, 6212);
  EXPECT_EQ(models.size(), 7);  // G2, G3, T4, P100, V100M16, V100M32, A10

  auto pods = load_openb_pods((dir / "openb_pod_list_default.csv").string(), models);
  ASSERT_TRUE(pods.has_value()) << pods.error().message();
  EXPECT_EQ(pods->size(), 8152U);
}

}  // namespace
}  // namespace tidepool
