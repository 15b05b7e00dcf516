#include "core/task.h"

#include <gtest/gtest.h>

#include <string>

namespace tidepool {
namespace {

// The field named by the error of make_task_shape, or "" if it succeeded.
std::string failing_shape_field(std::int64_t gpus, std::int64_t milli, std::int64_t cpu,
                                std::int64_t memory) {
  auto shape = make_task_shape(gpus, milli, cpu, memory);
  return shape ? std::string() : shape.error().field;
}

TEST(MakeTaskShapeTest, BuildsValidShapes) {
  ModelSet t4;
  t4.add(GpuModelId{2});
  auto shape = make_task_shape(2, 1000, 8000, 16384, t4);
  ASSERT_TRUE(shape.has_value()) << shape.error().message();
  EXPECT_EQ(shape->gpu_count, 2);
  EXPECT_EQ(shape->milli_per_gpu, 1000);
  EXPECT_EQ(shape->milli_cpu, 8000);
  EXPECT_EQ(shape->memory_mib, 16384);
  EXPECT_EQ(shape->models, t4);
  EXPECT_EQ(shape->total_milli_gpu(), 2000);
  EXPECT_TRUE(shape->needs_gpu());
}

TEST(MakeTaskShapeTest, AcceptsTheBoundaries) {
  EXPECT_EQ(failing_shape_field(0, 0, 0, 0), "");                   // nothing at all
  EXPECT_EQ(failing_shape_field(1, 1, 0, 0), "");                   // smallest fraction
  EXPECT_EQ(failing_shape_field(1, 1000, 0, 0), "");                // one whole GPU
  EXPECT_EQ(failing_shape_field(kMaxGpusPerNode, 1000, 0, 0), "");  // a full node
}

TEST(MakeTaskShapeTest, DefaultModelsAreAny) {
  auto shape = make_task_shape(1, 500, 1000, 0);
  ASSERT_TRUE(shape.has_value());
  EXPECT_TRUE(shape->models.is_any());
}

TEST(MakeTaskShapeTest, GpuCountOutOfRangeNamesGpuCount) {
  EXPECT_EQ(failing_shape_field(-1, 0, 0, 0), "gpu_count");
  EXPECT_EQ(failing_shape_field(kMaxGpusPerNode + 1, 1000, 0, 0), "gpu_count");
  auto shape = make_task_shape(17, 1000, 0, 0);
  ASSERT_FALSE(shape.has_value());
  EXPECT_NE(shape.error().reason.find("17"), std::string::npos) << shape.error().reason;
}

TEST(MakeTaskShapeTest, BadGpuShareNamesGpuMilli) {
  EXPECT_EQ(failing_shape_field(0, 500, 0, 0), "gpu_milli");   // share without GPUs
  EXPECT_EQ(failing_shape_field(1, 0, 0, 0), "gpu_milli");     // GPU without share
  EXPECT_EQ(failing_shape_field(1, -5, 0, 0), "gpu_milli");    // negative share
  EXPECT_EQ(failing_shape_field(1, 1001, 0, 0), "gpu_milli");  // more than a GPU
  EXPECT_EQ(failing_shape_field(2, 500, 0, 0), "gpu_milli");   // fraction with several GPUs
  EXPECT_EQ(failing_shape_field(8, 999, 0, 0), "gpu_milli");
}

TEST(MakeTaskShapeTest, NegativeCpuNamesCpuMilli) {
  EXPECT_EQ(failing_shape_field(0, 0, -1, 0), "cpu_milli");
  EXPECT_EQ(failing_shape_field(1, 500, -1000, 10), "cpu_milli");
}

TEST(MakeTaskShapeTest, NegativeMemoryNamesMemoryMib) {
  EXPECT_EQ(failing_shape_field(0, 0, 0, -1), "memory_mib");
  EXPECT_EQ(failing_shape_field(4, 1000, 4000, -100), "memory_mib");
}

TEST(MakeTaskShapeTest, ErrorMessageJoinsFieldAndReason) {
  auto shape = make_task_shape(0, 0, -3, 0);
  ASSERT_FALSE(shape.has_value());
  EXPECT_EQ(shape.error().message(), "cpu_milli: " + shape.error().reason);
  EXPECT_NE(shape.error().reason.find("-3"), std::string::npos);
}

TEST(TaskShapeTest, IsFractionalOnlyForAPartOfOneGpu) {
  auto fraction = make_task_shape(1, 250, 0, 0);
  auto whole = make_task_shape(1, 1000, 0, 0);
  auto several = make_task_shape(4, 1000, 0, 0);
  auto cpu_only = make_task_shape(0, 0, 1000, 0);
  ASSERT_TRUE(fraction && whole && several && cpu_only);
  EXPECT_TRUE(fraction->is_fractional());
  EXPECT_FALSE(whole->is_fractional());
  EXPECT_FALSE(several->is_fractional());
  EXPECT_FALSE(cpu_only->is_fractional());
  EXPECT_FALSE(cpu_only->needs_gpu());
  EXPECT_EQ(fraction->total_milli_gpu(), 250);
  EXPECT_EQ(several->total_milli_gpu(), 4000);
  EXPECT_EQ(cpu_only->total_milli_gpu(), 0);
}

TEST(TaskClassTest, ClassesByGpuDemand) {
  EXPECT_EQ(task_class(*make_task_shape(0, 0, 4000, 0)), kCpuOnlyClass);
  EXPECT_EQ(task_class(*make_task_shape(1, 1, 0, 0)), kFractionalClass);
  EXPECT_EQ(task_class(*make_task_shape(1, 999, 0, 0)), kFractionalClass);
  EXPECT_EQ(task_class(*make_task_shape(1, 1000, 0, 0)), 2);
  EXPECT_EQ(task_class(*make_task_shape(2, 1000, 0, 0)), 3);
  EXPECT_EQ(task_class(*make_task_shape(8, 1000, 0, 0)), 9);
  EXPECT_EQ(task_class(*make_task_shape(kMaxGpusPerNode, 1000, 0, 0)), kTaskClassCount - 1);
}

TEST(TaskShapeHashTest, EqualShapesHashAlikeAndFieldsMatter) {
  const TaskShapeHash hash;
  const TaskShape a = *make_task_shape(1, 500, 2000, 1024);
  const TaskShape b = *make_task_shape(1, 500, 2000, 1024);
  EXPECT_EQ(a, b);
  EXPECT_EQ(hash(a), hash(b));
  // Not a guarantee of a hash in general, but these differ in one field each and a hash that
  // ignored a field would collide on them.
  EXPECT_NE(hash(a), hash(*make_task_shape(1, 500, 2000, 2048)));
  EXPECT_NE(hash(a), hash(*make_task_shape(1, 600, 2000, 1024)));
  EXPECT_NE(hash(a), hash(*make_task_shape(1, 500, 3000, 1024)));
  EXPECT_NE(hash(a), hash(*make_task_shape(1, 500, 2000, 1024, ModelSet::none())));
}

}  // namespace
}  // namespace tidepool
