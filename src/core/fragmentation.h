// GPU fragmentation as defined by FGD (Weng et al., "Beware of Fragmentation: Scheduling
// GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC'23): the free GPU
// capacity of a node that the workload's typical tasks could not use, weighted by how often each
// typical task occurs.
//
// For one node and one typical task t, the node's free GPU capacity counts as fragment
//   - in full, if t cannot run there at all: t needs no GPU (its arrival cannot use GPUs), the
//     node's model is not accepted by t, the node lacks CPU for t, or too few GPUs have t's share
//     free;
//   - otherwise in part: the free share of each GPU whose free share is below t's per-GPU demand.
// The node's fragmentation is the frequency-weighted sum over typical tasks. Memory is not part
// of the measure (as in the paper and its reference simulator).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/node.h"
#include "core/task.h"

namespace tidepool {

// A task shape with its number of occurrences in a workload.
struct TypicalTask {
  TaskShape shape;  // memory_mib is 0: shapes differing only in memory are one typical task
  std::int64_t count = 0;
};

// The distribution of task shapes a workload is made of, as FGD measures fragmentation against.
class WorkloadProfile {
 public:
  // The most frequent shapes of `tasks` that together cover at least `coverage_percent` of them
  // (FGD's "typical pods", 95% in its experiments), most frequent first; ties are ordered by
  // shape so that the result does not depend on input order.
  static WorkloadProfile from_tasks(std::span<const TaskShape> tasks, int coverage_percent = 95);

  [[nodiscard]] std::span<const TypicalTask> tasks() const { return tasks_; }
  // Every shape of the workload with its count (typical or not), in the same order.
  [[nodiscard]] std::span<const TypicalTask> all_shapes() const { return all_shapes_; }
  // Sum of the counts of the typical tasks: fragmentation amounts are scaled by it.
  [[nodiscard]] std::int64_t total_count() const { return total_count_; }
  // Sum of the counts of typical tasks that need no GPU.
  [[nodiscard]] std::int64_t cpu_only_count() const { return cpu_only_count_; }

 private:
  void finish();
  std::vector<TypicalTask> tasks_;      // all typical tasks
  std::vector<TypicalTask> gpu_tasks_;  // those that need a GPU
  std::vector<TypicalTask> all_shapes_;
  std::int64_t total_count_ = 0;
  std::int64_t cpu_only_count_ = 0;

  friend std::int64_t scaled_node_fragmentation(const NodeSpec&, MilliCpu,
                                                std::span<const MilliGpu>, const WorkloadProfile&);
};

// FGD fragmentation of a node with `free_cpu` and per-GPU `free_milli` (one entry per GPU), in
// milli-GPU multiplied by profile.total_count(): an exact integer, so that comparisons between
// placements are exact. Divide by total_count() for milli-GPUs.
std::int64_t scaled_node_fragmentation(const NodeSpec& spec, MilliCpu free_cpu,
                                       std::span<const MilliGpu> free_milli,
                                       const WorkloadProfile& profile);

inline std::int64_t scaled_node_fragmentation(const NodeSpec& spec, const NodeState& state,
                                              const WorkloadProfile& profile) {
  return scaled_node_fragmentation(
      spec, state.free_cpu, std::span<const MilliGpu>(state.free_milli.data(), spec.gpu_count),
      profile);
}

}  // namespace tidepool
