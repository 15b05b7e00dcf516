#include "core/task.h"

#include <string>

namespace tidepool {

Result<TaskShape> make_task_shape(std::int64_t gpu_count, std::int64_t milli_per_gpu,
                                  std::int64_t milli_cpu, std::int64_t memory_mib,
                                  ModelSet models) {
  if (gpu_count < 0 || gpu_count > kMaxGpusPerNode) {
    return fail("gpu_count", "must be between 0 and " + std::to_string(kMaxGpusPerNode) + ", got " +
                                 std::to_string(gpu_count));
  }
  if (gpu_count == 0 && milli_per_gpu != 0) {
    return fail("gpu_milli", "a task without GPUs must ask for 0 milli-GPU, got " +
                                 std::to_string(milli_per_gpu));
  }
  if (gpu_count > 0 && (milli_per_gpu < 1 || milli_per_gpu > kMilliPerGpu)) {
    return fail("gpu_milli",
                "must be between 1 and 1000 per GPU, got " + std::to_string(milli_per_gpu));
  }
  if (gpu_count > 1 && milli_per_gpu != kMilliPerGpu) {
    return fail("gpu_milli", "a fraction of a GPU is allowed only with one GPU; " +
                                 std::to_string(gpu_count) + " GPUs need 1000 each, got " +
                                 std::to_string(milli_per_gpu));
  }
  if (milli_cpu < 0)
    return fail("cpu_milli", "must not be negative, got " + std::to_string(milli_cpu));
  if (memory_mib < 0) {
    return fail("memory_mib", "must not be negative, got " + std::to_string(memory_mib));
  }
  TaskShape shape;
  shape.gpu_count = static_cast<int>(gpu_count);
  shape.milli_per_gpu = static_cast<MilliGpu>(milli_per_gpu);
  shape.milli_cpu = milli_cpu;
  shape.memory_mib = memory_mib;
  shape.models = models;
  return shape;
}

Result<TaskShape> make_mig_task_shape(MigProfile profile, std::int64_t milli_cpu,
                                      std::int64_t memory_mib, ModelSet models) {
  auto task = make_task_shape(1, mig_gpu_milli(profile), milli_cpu, memory_mib, models);
  if (task) task->mig = profile;
  return task;
}

Result<void> check_mig_task(const TaskShape& task, std::int64_t task_count) {
  if (!task.mig) return {};
  if (task.gpu_count != 1 || task.milli_per_gpu != mig_gpu_milli(*task.mig)) {
    return fail("mig_profile", "a task on a " + std::string(mig_profile_spec(*task.mig).name) +
                                   " instance has one GPU of " +
                                   std::to_string(mig_gpu_milli(*task.mig)) + " milli-GPU, got " +
                                   std::to_string(task.gpu_count) + " x " +
                                   std::to_string(task.milli_per_gpu));
  }
  if (task_count != 1) {
    return fail("task_count",
                "a task on a MIG instance runs alone, got a gang of " + std::to_string(task_count));
  }
  return {};
}

std::size_t TaskShapeHash::operator()(const TaskShape& t) const noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::uint64_t>(t.gpu_count));
  mix(static_cast<std::uint64_t>(t.milli_per_gpu));
  mix(static_cast<std::uint64_t>(t.milli_cpu));
  mix(static_cast<std::uint64_t>(t.memory_mib));
  mix(t.models.bits() ^ (t.models.is_any() ? 0x5555ULL : 0));
  mix(t.mig ? static_cast<std::uint64_t>(*t.mig) + 1 : 0);
  return h;
}

}  // namespace tidepool
