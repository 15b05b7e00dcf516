#include "core/lane_shapes.h"

#include <gtest/gtest.h>

namespace tidepool {
namespace {

Job job_of(int gpus, std::int64_t milli_cpu, std::int64_t memory_mib,
           JobClass job_class = JobClass::kTraining) {
  Job job;
  job.job_class = job_class;
  job.gang.task = *make_task_shape(gpus, 1000, milli_cpu, memory_mib);
  return job;
}

TEST(LaneShapes, AnEmptyLaneHoldsNothingAndNoTaskIsLargerThanItsTasks) {
  const LaneShapes shapes;
  EXPECT_TRUE(shapes.empty());
  EXPECT_TRUE(shapes.no_larger_than_every_task(job_of(8, 64000, 1 << 20).gang.task));
  EXPECT_FALSE(shapes.has_class(JobClass::kTraining));
}

TEST(LaneShapes, ATaskMustAskNoMoreOfEachResourceThanEveryTask) {
  LaneShapes shapes;
  shapes.add(job_of(2, 4000, 8192));
  shapes.add(job_of(4, 2000, 16384));
  EXPECT_TRUE(shapes.no_larger_than_every_task(job_of(2, 2000, 8192).gang.task));
  EXPECT_TRUE(shapes.no_larger_than_every_task(job_of(1, 1000, 1024).gang.task));
  // More GPUs than the 2-GPU job's task, more CPU than the 4-GPU job's, more memory than either.
  EXPECT_FALSE(shapes.no_larger_than_every_task(job_of(3, 2000, 8192).gang.task));
  EXPECT_FALSE(shapes.no_larger_than_every_task(job_of(2, 3000, 8192).gang.task));
  EXPECT_FALSE(shapes.no_larger_than_every_task(job_of(2, 2000, 9000).gang.task));
  // A fraction of a GPU asks for less than a whole one.
  Job fraction = job_of(1, 1000, 1024);
  fraction.gang.task = *make_task_shape(1, 500, 1000, 1024);
  shapes.add(fraction);
  EXPECT_FALSE(shapes.no_larger_than_every_task(job_of(1, 1000, 1024).gang.task));
}

TEST(LaneShapes, ForgetsWhatLeftTheLaneButKeepsWhatIsStillThere) {
  LaneShapes shapes;
  const Job small = job_of(1, 1000, 1024, JobClass::kInference);
  const Job big = job_of(8, 8000, 65536);
  shapes.add(small);
  shapes.add(small);
  shapes.add(big);
  shapes.remove(small);
  // One small job is still there.
  EXPECT_FALSE(shapes.no_larger_than_every_task(big.gang.task));
  EXPECT_TRUE(shapes.has_class(JobClass::kInference));
  shapes.remove(small);
  EXPECT_TRUE(shapes.no_larger_than_every_task(big.gang.task));
  EXPECT_FALSE(shapes.has_class(JobClass::kInference));
  EXPECT_TRUE(shapes.has_class(JobClass::kTraining));
  EXPECT_FALSE(shapes.empty());
  shapes.remove(big);
  EXPECT_TRUE(shapes.empty());
}

TEST(LaneShapes, KnowsWhichModelsItsJobsAccept) {
  LaneShapes shapes;
  EXPECT_TRUE(shapes.accepts_only(ModelSet::none()));
  Job h100 = job_of(1, 1000, 1024);
  h100.gang.task.models = ModelSet::only(GpuModelId{0});
  Job a100 = job_of(1, 1000, 1024);
  a100.gang.task.models = ModelSet::only(GpuModelId{1});
  shapes.add(h100);
  EXPECT_TRUE(shapes.accepts_only(ModelSet::only(GpuModelId{0})));
  shapes.add(a100);
  EXPECT_FALSE(shapes.accepts_only(ModelSet::only(GpuModelId{0})));
  ModelSet both = ModelSet::only(GpuModelId{0});
  both.add(GpuModelId{1});
  EXPECT_TRUE(shapes.accepts_only(both));
  shapes.remove(a100);
  EXPECT_TRUE(shapes.accepts_only(ModelSet::only(GpuModelId{0})));
  // A job of any model is within only "any".
  shapes.add(job_of(1, 1000, 1024));
  EXPECT_FALSE(shapes.accepts_only(both));
  EXPECT_TRUE(shapes.accepts_only(ModelSet::any()));
}

}  // namespace
}  // namespace tidepool
