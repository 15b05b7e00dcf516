#include "core/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tidepool {
namespace {

// Total order used to break frequency ties: larger shapes first.
bool larger_shape(const TaskShape& a, const TaskShape& b) {
  return std::tuple(a.milli_cpu, a.milli_per_gpu, a.gpu_count, a.models.bits(),
                    !a.models.is_any()) >
         std::tuple(b.milli_cpu, b.milli_per_gpu, b.gpu_count, b.models.bits(), !b.models.is_any());
}

}  // namespace

WorkloadProfile WorkloadProfile::from_tasks(std::span<const TaskShape> tasks,
                                            int coverage_percent) {
  std::map<TaskShape, std::int64_t> counts;
  for (TaskShape shape : tasks) {
    shape.memory_mib = 0;
    ++counts[shape];
  }
  std::vector<TypicalTask> sorted;
  sorted.reserve(counts.size());
  for (const auto& [shape, count] : counts) sorted.push_back({shape, count});
  std::sort(sorted.begin(), sorted.end(), [](const TypicalTask& a, const TypicalTask& b) {
    if (a.count != b.count) return a.count > b.count;
    return larger_shape(a.shape, b.shape);
  });

  WorkloadProfile profile;
  const auto all = static_cast<std::int64_t>(tasks.size());
  std::int64_t covered = 0;
  // Take shapes until they cover the requested share: covered / all >= coverage_percent / 100.
  for (const TypicalTask& typical : sorted) {
    if (covered * 100 >= all * coverage_percent) break;
    covered += typical.count;
    profile.tasks_.push_back(typical);
  }
  profile.all_shapes_ = sorted;
  profile.finish();
  return profile;
}

void WorkloadProfile::finish() {
  total_count_ = 0;
  cpu_only_count_ = 0;
  gpu_tasks_.clear();
  for (const TypicalTask& typical : tasks_) {
    total_count_ += typical.count;
    if (typical.shape.needs_gpu()) {
      gpu_tasks_.push_back(typical);
    } else {
      cpu_only_count_ += typical.count;
    }
  }
}

std::int64_t scaled_node_fragmentation(const NodeSpec& spec, MilliCpu free_cpu,
                                       std::span<const MilliGpu> free_milli,
                                       const WorkloadProfile& profile) {
  std::int64_t idle = 0;
  for (MilliGpu free : free_milli) idle += free;
  if (idle == 0) return 0;

  std::int64_t fragment = idle * profile.cpu_only_count_;
  for (const TypicalTask& typical : profile.gpu_tasks_) {
    const TaskShape& t = typical.shape;
    bool usable = t.models.accepts(spec.model) && free_cpu >= t.milli_cpu;
    std::int64_t below_share = 0;
    int gpus_with_share = 0;
    if (usable) {
      for (MilliGpu free : free_milli) {
        if (free >= t.milli_per_gpu) {
          ++gpus_with_share;
        } else {
          below_share += free;
        }
      }
      usable = gpus_with_share >= t.gpu_count;
    }
    fragment += typical.count * (usable ? below_share : idle);
  }
  return fragment;
}

}  // namespace tidepool
