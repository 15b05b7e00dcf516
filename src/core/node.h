// A GPU node: what it has (NodeSpec, fixed) and what is free on it now (NodeState).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/resources.h"
#include "core/task.h"

namespace tidepool {

// A set of GPU indexes on one node, as a bit mask (bit i = GPU i).
using GpuSet = std::uint32_t;
static_assert(kMaxGpusPerNode <= 32, "GpuSet holds one bit per GPU of a node");

[[nodiscard]] inline int gpu_set_size(GpuSet gpus) { return std::popcount(gpus); }
[[nodiscard]] inline bool gpu_set_contains(GpuSet gpus, int index) {
  return ((gpus >> index) & 1U) != 0;
}

// The most tasks one node runs at once, whatever they ask for: tasks that request no GPU, CPU or
// memory would otherwise pile onto one node without bound (each is a process its agent starts).
inline constexpr int kMaxTasksPerNode = 256;

struct NodeSpec {
  std::string name;
  GpuModelId model;
  int gpu_count = 0;  // 0..kMaxGpusPerNode
  MilliCpu milli_cpu = 0;
  MemoryMib memory_mib = 0;
  LeafId leaf;
  // NVLink domain of each GPU, numbered from 0 within the node. All zero: one domain.
  std::array<std::uint8_t, kMaxGpusPerNode> nvlink_domain{};
  // MIG (core/mig.h), on GPUs of a model that supports it (model_supports_mig). A GPU in
  // mig_on_demand is whole until a task asks for a MIG instance; it is then partitioned, its
  // instances coming and going with their tasks in any valid layout, and whole again when the
  // last one leaves (the simulator's A100s and H100s). A GPU listed in mig_partitions is in MIG
  // mode with exactly the instances listed (what the node's agent reports): a task asking for a
  // MIG profile takes one of them that is free, and no other GPU task uses that GPU.
  GpuSet mig_on_demand = 0;
  struct MigPartition {
    int gpu = 0;
    std::vector<MigInstance> instances{};  // a valid layout, at least one instance
  };
  std::vector<MigPartition> mig_partitions{};
};

// What is free on a node. Kept consistent by Pool::allocate/release; the summary fields
// (whole_free_gpus, max_free_milli, total_free_milli) are derived from free_milli and cached
// because every placement decision reads them for every node.
struct NodeState {
  MilliCpu free_cpu = 0;
  MemoryMib free_memory = 0;
  std::array<MilliGpu, kMaxGpusPerNode> free_milli{};  // per GPU; slots past gpu_count stay 0
  int whole_free_gpus = 0;
  MilliGpu max_free_milli = 0;
  std::int32_t total_free_milli = 0;
  // Running tasks per task_class(): which kinds of work already share this node.
  std::array<std::uint16_t, kTaskClassCount> tasks_by_class{};
  // Drained or down (Pool::set_schedulable): takes no new task, not even one that asks for nothing.
  bool cordoned = false;
  // GPUs in MIG mode now (partitioned, or partitioned on demand and holding an instance): their
  // free_milli is 0, as no task but one asking for a MIG instance may use them.
  GpuSet mig_gpus = 0;
  // Bit p: an instance of MigProfile p fits on some GPU of the node now (Pool keeps it).
  std::uint8_t mig_fits = 0;

  [[nodiscard]] int running_tasks() const {
    return std::accumulate(tasks_by_class.begin(), tasks_by_class.end(), 0);
  }
  friend bool operator==(const NodeState&, const NodeState&) = default;
};

// An empty node of this spec (its partitioned GPUs in MIG mode, offering their instances).
NodeState empty_state(const NodeSpec& spec);

// Recomputes the cached summary fields from free_milli.
void refresh_summary(NodeState& state, int gpu_count);

// Whether `task` fits on the node now: not cordoned, under kMaxTasksPerNode, CPU, memory, GPU
// model and GPU capacity (one GPU with room for the instance for a MIG profile, one GPU with
// enough free share for a fraction, enough wholly free GPUs otherwise). CPU-only tasks ignore the
// model constraint, as GPU-model constraints only concern GPUs.
[[nodiscard]] inline bool fits(const NodeSpec& spec, const NodeState& state,
                               const TaskShape& task) {
  if (state.cordoned || state.running_tasks() >= kMaxTasksPerNode) return false;
  if (state.free_cpu < task.milli_cpu || state.free_memory < task.memory_mib) return false;
  if (!task.needs_gpu()) return true;
  if (!task.models.accepts(spec.model)) return false;
  if (task.mig) return ((state.mig_fits >> static_cast<int>(*task.mig)) & 1U) != 0;
  if (task.is_fractional()) return state.max_free_milli >= task.milli_per_gpu;
  return state.whole_free_gpus >= task.gpu_count;
}

}  // namespace tidepool
