// What the tasks still on a node hold of its GPUs, so that the agent starts an assigned task only
// once nothing it needs is held (the server gives a GPU to the next job as soon as it preempts
// one, while the old task may still be stopping). A task on whole GPUs, or on a share of one,
// holds each of its GPUs whole. A task on a MIG instance holds only that instance's memory slices
// of its GPU (core/mig.h), so that tasks on the GPU's other instances run beside it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>

#include "core/mig.h"

namespace tidepool {

class GpuHold {
 public:
  // Adds a task's hold: its GPUs, or its MIG instance of its one GPU. An instance that overlaps
  // one already held (which a valid assignment never gives) holds its GPU whole.
  void add(std::span<const int> gpus, const std::optional<MigInstance>& mig);
  // Whether a task of these GPUs (and this instance, if any) may start: nothing it needs is held.
  [[nodiscard]] bool free_for(std::span<const int> gpus,
                              const std::optional<MigInstance>& mig) const;

 private:
  std::set<int> whole_;
  std::map<int, MigLayout> instances_;  // by GPU index: the instances held there
};

}  // namespace tidepool
