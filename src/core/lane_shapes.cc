#include "core/lane_shapes.h"

namespace tidepool {

void LaneShapes::count(std::map<std::int64_t, int>& values, std::int64_t value, int delta) {
  auto it = values.try_emplace(value, 0).first;
  it->second += delta;
  if (it->second <= 0) values.erase(it);
}

bool LaneShapes::at_most_smallest(const std::map<std::int64_t, int>& values, std::int64_t value) {
  return values.empty() || value <= values.begin()->first;
}

void LaneShapes::add(const Job& job) {
  const TaskShape& t = job.gang.task;
  count(task_milli_gpu_, t.total_milli_gpu(), 1);
  count(task_milli_cpu_, t.milli_cpu, 1);
  count(task_memory_mib_, t.memory_mib, 1);
  ++classes_[static_cast<std::size_t>(job.job_class)];
  count_models(t.models, 1);
  ++jobs_;
}

void LaneShapes::remove(const Job& job) {
  const TaskShape& t = job.gang.task;
  count(task_milli_gpu_, t.total_milli_gpu(), -1);
  count(task_milli_cpu_, t.milli_cpu, -1);
  count(task_memory_mib_, t.memory_mib, -1);
  --classes_[static_cast<std::size_t>(job.job_class)];
  count_models(t.models, -1);
  --jobs_;
}

void LaneShapes::count_models(const ModelSet& models, int delta) {
  if (models.is_any()) {
    accepting_any_ += delta;
    return;
  }
  for (std::size_t m = 0; m < accepting_.size(); ++m) {
    if (((models.bits() >> m) & 1U) != 0) accepting_[m] += delta;
  }
}

bool LaneShapes::accepts_only(const ModelSet& models) const {
  if (models.is_any()) return true;
  if (accepting_any_ > 0) return false;
  for (std::size_t m = 0; m < accepting_.size(); ++m) {
    if (accepting_[m] > 0 && ((models.bits() >> m) & 1U) == 0) return false;
  }
  return true;
}

bool LaneShapes::no_larger_than_every_task(const TaskShape& task) const {
  return at_most_smallest(task_milli_gpu_, task.total_milli_gpu()) &&
         at_most_smallest(task_milli_cpu_, task.milli_cpu) &&
         at_most_smallest(task_memory_mib_, task.memory_mib);
}

bool LaneShapes::has_class(JobClass job_class) const {
  return classes_[static_cast<std::size_t>(job_class)] > 0;
}

}  // namespace tidepool
