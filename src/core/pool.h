// The pool: every node of a site with what is free on it. The only mutable state of the
// scheduling core; allocate() and release() keep it consistent (no overcommit, allocated + free =
// capacity) and refuse, with a reason, any change that would break that.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/mig.h"
#include "core/node.h"
#include "core/task.h"
#include "core/topology.h"

namespace tidepool {

// Where one task runs: a node and the GPUs it holds there (empty for CPU-only tasks); for a task
// on a MIG instance, its one GPU and the instance's first memory slice there.
struct Assignment {
  NodeId node;
  GpuSet gpus = 0;
  int mig_start = -1;  // 0..7 for a MIG instance, else -1

  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// A token unique to each Pool object while it lives: a copy gets a new one (a copy changes apart
// from its original), a move keeps it. What a reader keeps about one pool (an index of its nodes,
// core/policies/score_index.h) is never taken for another's: the reader holds a weak reference,
// which no other pool's token can equal while it is held.
class PoolIdentity {
 public:
  PoolIdentity() : token_(std::make_shared<const char>('\0')) {}
  PoolIdentity(const PoolIdentity& /*other*/) : PoolIdentity() {}
  PoolIdentity& operator=(const PoolIdentity& other) {
    if (this != &other) token_ = std::make_shared<const char>('\0');
    return *this;
  }
  PoolIdentity(PoolIdentity&&) noexcept = default;
  PoolIdentity& operator=(PoolIdentity&&) noexcept = default;
  ~PoolIdentity() = default;

  [[nodiscard]] std::weak_ptr<const char> reference() const { return token_; }
  [[nodiscard]] bool is(const std::weak_ptr<const char>& reference) const {
    return !reference.owner_before(token_) && !token_.owner_before(reference) && token_ != nullptr;
  }

 private:
  std::shared_ptr<const char> token_;
};

class Pool {
 public:
  // Validates the node list (unique names, GPU counts within bounds, known models and leaves,
  // NVLink domains numbered densely, MIG only on GPUs of a model that supports it, in valid
  // layouts) and builds an empty pool.
  static Result<Pool> create(GpuModelCatalog models, Topology topology,
                             std::vector<NodeSpec> nodes);

  [[nodiscard]] int node_count() const { return static_cast<int>(specs_.size()); }
  [[nodiscard]] const NodeSpec& spec(NodeId node) const { return specs_[node.value]; }
  [[nodiscard]] const NodeState& state(NodeId node) const { return states_[node.value]; }
  [[nodiscard]] std::span<const NodeSpec> specs() const { return specs_; }
  [[nodiscard]] std::span<const NodeState> states() const { return states_; }
  // Bumped on every change of the node; lets callers cache per-node computations.
  [[nodiscard]] std::uint32_t version(NodeId node) const { return versions_[node.value]; }
  // The pool's changes in order, for readers that follow it (core/policies/score_index.h): how
  // many node changes there have been, and the nodes changed since change `seq` (one entry per
  // change; a tie order set anew lists every node), or nullopt when that is older than what the
  // pool keeps (about twice its node count), so that the reader starts afresh.
  [[nodiscard]] std::uint64_t change_count() const { return changes_dropped_ + changes_.size(); }
  [[nodiscard]] std::optional<std::span<const std::uint32_t>> changes_since(
      std::uint64_t seq) const;
  [[nodiscard]] const PoolIdentity& identity() const { return identity_; }
  [[nodiscard]] const GpuModelCatalog& models() const { return models_; }

  // Where the node stands in the order that breaks ties between equally good placements:
  // lower ranks win. By default the node list order; set_tie_order changes it (the FGD
  // experiments draw a random order per run, as their simulator does with node names).
  [[nodiscard]] std::uint32_t tie_rank(NodeId node) const { return tie_ranks_[node.value]; }
  // `order` lists every node once, best first.
  Result<void> set_tie_order(std::span<const NodeId> order);
  [[nodiscard]] const Topology& topology() const { return topology_; }

  [[nodiscard]] std::int64_t total_gpus() const { return total_gpus_; }
  [[nodiscard]] std::int64_t capacity_milli_gpu() const { return total_gpus_ * kMilliPerGpu; }
  [[nodiscard]] std::int64_t allocated_milli_gpu() const { return allocated_milli_gpu_; }
  // Whole free GPUs of `model`, as placement sees them (cordoned nodes show none), and the nodes
  // of `model` showing exactly `count` (0..kMaxGpusPerNode) whole free GPUs: kept as the pool
  // changes, so that asking costs O(1) whatever the node count.
  [[nodiscard]] std::int64_t whole_free_gpus(GpuModelId model) const {
    return whole_free_gpus_[model.value];
  }
  [[nodiscard]] std::int64_t nodes_with_whole_free(GpuModelId model, int count) const {
    return whole_free_nodes_[static_cast<std::size_t>(model.value) * (kMaxGpusPerNode + 1) +
                             static_cast<std::size_t>(count)];
  }
  [[nodiscard]] MilliCpu capacity_milli_cpu() const { return capacity_cpu_; }
  [[nodiscard]] MilliCpu allocated_milli_cpu() const { return allocated_cpu_; }

  // A GPU's MIG instances in use (with, for a partitioned GPU, those it offers), or nullptr when
  // the GPU cannot hold MIG instances (NodeSpec::mig_on_demand, mig_partitions).
  [[nodiscard]] const MigLayout* mig_layout(NodeId node, int gpu) const;
  // Whether a task may take a MIG instance of the GPU now: the node is schedulable and the GPU is
  // in MIG mode, or partitioned on demand and wholly free.
  [[nodiscard]] bool mig_usable(NodeId node, int gpu) const;

  // Places `task` on `where`. Fails, changing nothing, if the node lacks CPU or memory, the GPU
  // model is not accepted, the GPU set does not match the task, or a GPU lacks the share (for a
  // MIG task: the GPU cannot take the instance at where.mig_start).
  Result<void> allocate(const TaskShape& task, const Assignment& where);

  // Returns what `task` held on `where`. Fails, changing nothing, if that would free more than
  // the node's capacity (the task was not there).
  Result<void> release(const TaskShape& task, const Assignment& where);

  // A node that is not schedulable (cordoned: drained for maintenance, or down) takes no new
  // tasks: to placement it shows nothing free, allocate() refuses it, and release() still returns
  // its running tasks' resources, which it shows again once it is schedulable again. All nodes
  // start schedulable.
  Result<void> set_schedulable(NodeId node, bool schedulable);
  [[nodiscard]] bool schedulable(NodeId node) const {
    return cordoned_.empty() || !cordoned_.contains(node.value);
  }

  // Checks every node: 0 <= free <= capacity for CPU, memory and each GPU, and the cached summary
  // fields and pool totals agree with the per-GPU figures.
  Result<void> check_invariants() const;

 private:
  Pool() = default;
  Result<void> check_assignment(const TaskShape& task, const Assignment& where) const;
  void apply(const TaskShape& task, const Assignment& where, int sign);
  // What is really free on the node (its shown state unless cordoned).
  [[nodiscard]] const NodeState& actual(NodeId node) const;
  // Records a change of `node`: its version, and the change list (changes_since).
  void changed(NodeId node);
  // Adds (+1) or takes out (-1) the node's shown state in the whole-free counts.
  void count_whole_free(NodeId node, int sign);
  // Whether GPU `gpu` of `state` may take a MIG instance (see mig_usable), its layout aside.
  [[nodiscard]] bool mig_open(NodeId node, const NodeState& state, int gpu) const;
  // Where GPU `gpu` of a node with layouts has its layout in mig_layouts_.
  [[nodiscard]] std::size_t mig_index(NodeId node, int gpu) const {
    return static_cast<std::size_t>(mig_first_[node.value]) + static_cast<std::size_t>(gpu);
  }
  // Recomputes state.mig_fits from the node's layouts.
  void refresh_mig_fits(NodeId node, NodeState& state) const;
  // Adds (sign < 0) or removes the instance on the assigned GPU, and shows the GPU in MIG mode
  // while it holds one (a partitioned GPU always).
  void apply_mig(const Assignment& where, MigInstance instance, int sign, NodeState& state);
  Result<void> check_mig_assignment(const TaskShape& task, const Assignment& where,
                                    const NodeState& state, bool releasing) const;

  GpuModelCatalog models_;
  Topology topology_;
  std::vector<NodeSpec> specs_;
  std::vector<NodeState> states_;  // as placement sees them: cordoned nodes show nothing free
  std::map<std::uint32_t, NodeState> cordoned_;  // the actual state of each cordoned node
  std::vector<std::uint32_t> versions_;
  std::vector<std::uint32_t> changes_;  // the nodes of the last changes, oldest first
  std::uint64_t changes_dropped_ = 0;   // changes no longer listed
  PoolIdentity identity_;
  std::vector<std::uint32_t> tie_ranks_;
  // Per node, where its GPU 0's layout is in mig_layouts_ (one per GPU of the node), or -1 when no
  // GPU of it can hold MIG instances.
  std::vector<std::int32_t> mig_first_;
  std::vector<MigLayout> mig_layouts_;
  std::int64_t total_gpus_ = 0;
  std::vector<std::int64_t> whole_free_gpus_;   // per model
  std::vector<std::int64_t> whole_free_nodes_;  // per model and count of whole free GPUs
  std::int64_t allocated_milli_gpu_ = 0;
  MilliCpu capacity_cpu_ = 0;
  MilliCpu allocated_cpu_ = 0;
};

// The whole GPUs free in the pool (on schedulable nodes), and of those the fragmented ones: free
// on a node that is partly in use, so that no job wanting whole nodes can have them.
struct FreeGpuCount {
  std::int64_t free = 0;
  std::int64_t fragmented = 0;
};
[[nodiscard]] FreeGpuCount count_free_gpus(const Pool& pool);

// Why `task` fits on no node of `pool` now, with counts ("1213 nodes: 40 lack CPU, ...").
std::string explain_unplaceable(const Pool& pool, const TaskShape& task);

// "2 GPU x 1000m (T4|P100), 8000m CPU, 16384 MiB"
std::string describe(const TaskShape& task, const GpuModelCatalog& models);

}  // namespace tidepool
