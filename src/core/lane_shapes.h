// What the pending jobs of one lane ask for at least, kept up to date as jobs join and leave the
// lane: the smallest task demand of each resource, and the job classes present. A pass reads it
// to end a lane early: once a job of the lane that asks no more than any other cannot start,
// none of the jobs after it can (Scheduler::pass).
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "core/job.h"

namespace tidepool {

class LaneShapes {
 public:
  void add(const Job& job);
  // `job` must have been added (and not removed since).
  void remove(const Job& job);

  [[nodiscard]] bool empty() const { return jobs_ == 0; }
  // Whether one task of `task` asks for no more of any resource than each task of every job in
  // the lane (GPU milli per task, CPU, memory); true for an empty lane.
  [[nodiscard]] bool no_larger_than_every_task(const TaskShape& task) const;
  // Whether some job of the lane is of the class.
  [[nodiscard]] bool has_class(JobClass job_class) const;
  // Whether every job of the lane accepts only GPU models of `models` (a job that accepts any
  // model is within only `any`); true for an empty lane.
  [[nodiscard]] bool accepts_only(const ModelSet& models) const;

 private:
  static void count(std::map<std::int64_t, int>& values, std::int64_t value, int delta);
  void count_models(const ModelSet& models, int delta);
  static bool at_most_smallest(const std::map<std::int64_t, int>& values, std::int64_t value);

  int jobs_ = 0;
  std::map<std::int64_t, int> task_milli_gpu_;
  std::map<std::int64_t, int> task_milli_cpu_;
  std::map<std::int64_t, int> task_memory_mib_;
  std::array<int, 4> classes_{};  // per JobClass
  // Per GPU model (ModelSet's bits), how many jobs accept it; and how many accept any.
  std::array<int, 64> accepting_{};
  int accepting_any_ = 0;
};

}  // namespace tidepool
