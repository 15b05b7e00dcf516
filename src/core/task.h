// What one task asks for. A task runs on one node: either whole GPUs (gpu_count x 1000 milli-GPU)
// or a fraction of one GPU (gpu_count == 1, milli_per_gpu < 1000), or a MIG instance of one GPU
// (core/mig.h: gpu_count == 1, milli_per_gpu what the profile counts against quotas), or no GPU
// at all.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/mig.h"
#include "core/resources.h"

namespace tidepool {

struct TaskShape {
  int gpu_count = 0;           // GPUs on one node, 0..kMaxGpusPerNode
  MilliGpu milli_per_gpu = 0;  // share of each GPU, 1..1000; 0 exactly when gpu_count == 0
  MilliCpu milli_cpu = 0;
  MemoryMib memory_mib = 0;
  ModelSet models;  // GPU models the task accepts
  // A MIG instance of this profile rather than a share of a GPU (set by make_mig_task_shape).
  std::optional<MigProfile> mig{};

  [[nodiscard]] bool needs_gpu() const { return gpu_count > 0; }
  [[nodiscard]] bool is_mig() const { return mig.has_value(); }
  // A share of one GPU that other tasks share too (not a MIG instance).
  [[nodiscard]] bool is_fractional() const {
    return gpu_count == 1 && milli_per_gpu < kMilliPerGpu && !mig;
  }
  [[nodiscard]] std::int64_t total_milli_gpu() const {
    return std::int64_t{gpu_count} * milli_per_gpu;
  }

  friend auto operator<=>(const TaskShape&, const TaskShape&) = default;
};

// Validates and builds a task shape: a fraction of a GPU only with one GPU, whole GPUs otherwise,
// no negative CPU or memory. Each error names the offending field.
Result<TaskShape> make_task_shape(std::int64_t gpu_count, std::int64_t milli_per_gpu,
                                  std::int64_t milli_cpu, std::int64_t memory_mib,
                                  ModelSet models = ModelSet::any());
// A task on one MIG instance of `profile`: one GPU, mig_gpu_milli(profile) of it.
Result<TaskShape> make_mig_task_shape(MigProfile profile, std::int64_t milli_cpu,
                                      std::int64_t memory_mib, ModelSet models = ModelSet::any());

// A task on a MIG instance runs alone (a gang of one) on one GPU, counting mig_gpu_milli of it; an
// error naming task_count or mig_profile otherwise. Nothing to check for other tasks.
Result<void> check_mig_task(const TaskShape& task, std::int64_t task_count);

// Task classes by GPU demand: CPU-only, a GPU fraction or a MIG instance, or 1..kMaxGpusPerNode
// whole GPUs. Nodes count their running tasks per class (packing policies read it).
inline constexpr int kTaskClassCount = kMaxGpusPerNode + 2;
inline constexpr int kCpuOnlyClass = 0;
inline constexpr int kFractionalClass = 1;
[[nodiscard]] inline int task_class(const TaskShape& task) {
  if (!task.needs_gpu()) return kCpuOnlyClass;
  if (task.is_fractional() || task.is_mig()) return kFractionalClass;
  return 1 + task.gpu_count;
}

struct TaskShapeHash {
  std::size_t operator()(const TaskShape& t) const noexcept;
};

}  // namespace tidepool
