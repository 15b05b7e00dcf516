// What the tasks still on a node hold of its GPUs, so that the agent starts an assigned task only
// once nothing it needs is held (the server gives a GPU to the next job as soon as it preempts
// one, while the old task may still be stopping). A task on whole GPUs holds each of its GPUs
// whole. A task on a share of one GPU (gpu_milli < 1000) holds that share, so that tasks whose
// shares add up to at most the whole GPU run beside each other. A task on a MIG instance holds
// only that instance's memory slices of its GPU (core/mig.h), so that tasks on the GPU's other
// instances run beside it. Shares and instances never mix on one GPU.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>

#include "core/mig.h"

namespace tidepool {

class GpuHold {
 public:
  // Adds a task's hold: its GPUs, its share of its one GPU (milli < 1000), or its MIG instance of
  // its one GPU. What a valid assignment never gives (an instance overlapping one held, a share
  // past the whole GPU, either with more than one GPU) holds its GPUs whole.
  void add(std::span<const int> gpus, const std::optional<MigInstance>& mig, int milli = 1000);
  // Whether a task of these GPUs (and this share or instance, if any) may start: nothing it needs
  // is held.
  [[nodiscard]] bool free_for(std::span<const int> gpus, const std::optional<MigInstance>& mig,
                              int milli = 1000) const;

 private:
  std::set<int> whole_;
  std::map<int, int> shares_;           // by GPU index: the milli-GPUs the shared tasks hold
  std::map<int, MigLayout> instances_;  // by GPU index: the instances held there
};

}  // namespace tidepool
