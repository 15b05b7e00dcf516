#include "core/pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <unordered_set>

namespace tidepool {

namespace {

// A node's MIG declarations: on GPUs it has, of a model that supports MIG, each GPU on demand or
// partitioned (not both, not twice), each partition a valid layout.
Result<void> check_mig_spec(const NodeSpec& node, const GpuModelCatalog& models) {
  if (node.mig_on_demand == 0 && node.mig_partitions.empty()) return {};
  if (node.gpu_count == 0 || !model_supports_mig(models.name(node.model))) {
    return fail("mig", fmt::format("{} GPUs cannot be partitioned into MIG instances",
                                   node.gpu_count == 0 ? "no" : models.name(node.model)));
  }
  if ((std::uint64_t{node.mig_on_demand} >> node.gpu_count) != 0) {
    return fail("mig_on_demand", fmt::format("names a GPU past the node's {}", node.gpu_count));
  }
  GpuSet partitioned = 0;
  for (const NodeSpec::MigPartition& partition : node.mig_partitions) {
    if (partition.gpu < 0 || partition.gpu >= node.gpu_count) {
      return fail("mig_partitions",
                  fmt::format("GPU {} is not one of the node's {}", partition.gpu, node.gpu_count));
    }
    const GpuSet bit = GpuSet{1} << partition.gpu;
    if (((partitioned | node.mig_on_demand) & bit) != 0) {
      return fail("mig_partitions", fmt::format("GPU {} is declared twice", partition.gpu));
    }
    partitioned |= bit;
    if (auto layout = MigLayout::partitioned(partition.instances); !layout) {
      return fail(fmt::format("mig_partitions (GPU {})", partition.gpu), layout.error().message());
    }
  }
  return {};
}

// A GPU's MIG figures agree: in MIG mode exactly when it is partitioned or holds an instance, then
// showing nothing free to other tasks, its instances a valid layout.
Result<void> check_mig_gpu(const MigLayout* layout, const NodeState& state, int gpu) {
  const bool in_mig_mode = gpu_set_contains(state.mig_gpus, gpu);
  if (layout == nullptr) {
    if (in_mig_mode) return fail("mig", "in MIG mode without a layout");
    return {};
  }
  if (in_mig_mode != (!layout->empty() || layout->offered() != 0)) {
    return fail("mig", in_mig_mode ? "in MIG mode without instances" : "holds instances unshown");
  }
  if (in_mig_mode && state.free_milli[gpu] != 0) {
    return fail("mig", "in MIG mode, yet shows a share free to other tasks");
  }
  if (auto valid = check_mig_layout(layout->instances()); !valid) {
    return fail("mig", valid.error().message());
  }
  return {};
}

}  // namespace

Result<Pool> Pool::create(GpuModelCatalog models, Topology topology, std::vector<NodeSpec> nodes) {
  Pool pool;
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeSpec& node = nodes[i];
    const std::string where = fmt::format("node {} ('{}')", i, node.name);
    if (node.name.empty()) return fail(where, "the node has no name");
    if (!names.insert(node.name).second) return fail(where, "the node name is used twice");
    if (node.gpu_count < 0 || node.gpu_count > kMaxGpusPerNode) {
      return fail(where,
                  fmt::format("gpu count must be 0..{}, got {}", kMaxGpusPerNode, node.gpu_count));
    }
    if (node.gpu_count > 0 && static_cast<int>(node.model.value) >= models.size()) {
      return fail(where, "the GPU model is not in the catalog");
    }
    if (node.milli_cpu < 0) return fail(where, "cpu must not be negative");
    if (node.memory_mib < 0) return fail(where, "memory must not be negative");
    if (node.leaf.value >= topology.leaves.size()) {
      return fail(where, "the leaf switch is not in the topology");
    }
    // Domains are numbered 0..k-1 without gaps, so that callers can size arrays by the highest.
    // A node has at most kMaxGpusPerNode domains, so a valid number is below that.
    int highest = -1;
    std::uint32_t seen = 0;
    bool in_range = true;
    for (int g = 0; g < node.gpu_count; ++g) {
      const int domain = node.nvlink_domain[g];
      in_range = in_range && domain < kMaxGpusPerNode;
      highest = std::max(highest, domain);
      if (domain < kMaxGpusPerNode) seen |= 1U << domain;
    }
    if (node.gpu_count > 0 && (!in_range || seen != (std::uint32_t{1} << (highest + 1)) - 1)) {
      return fail(where, "NVLink domains must be numbered 0, 1, ... without gaps");
    }
    if (auto mig = check_mig_spec(node, models); !mig) return fail(where, mig.error().message());
  }
  for (const LeafSpec& leaf : topology.leaves) {
    if (leaf.spine.value >= topology.spines.size()) {
      return fail("leaf '" + leaf.name + "'", "the spine switch is not in the topology");
    }
  }
  pool.models_ = std::move(models);
  pool.topology_ = std::move(topology);
  pool.specs_ = std::move(nodes);
  pool.states_.reserve(pool.specs_.size());
  for (const NodeSpec& spec : pool.specs_) {
    pool.states_.push_back(empty_state(spec));
    pool.total_gpus_ += spec.gpu_count;
    pool.capacity_cpu_ += spec.milli_cpu;
  }
  pool.mig_first_.assign(pool.specs_.size(), -1);
  for (std::size_t i = 0; i < pool.specs_.size(); ++i) {
    const NodeSpec& spec = pool.specs_[i];
    if (spec.mig_on_demand == 0 && spec.mig_partitions.empty()) continue;
    pool.mig_first_[i] = static_cast<std::int32_t>(pool.mig_layouts_.size());
    pool.mig_layouts_.resize(pool.mig_layouts_.size() + static_cast<std::size_t>(spec.gpu_count));
    for (const NodeSpec::MigPartition& partition : spec.mig_partitions) {
      pool.mig_layouts_[pool.mig_index(NodeId{static_cast<std::uint32_t>(i)}, partition.gpu)] =
          *MigLayout::partitioned(partition.instances);  // checked above
    }
  }
  pool.whole_free_gpus_.assign(static_cast<std::size_t>(pool.models_.size()), 0);
  pool.whole_free_nodes_.assign(
      static_cast<std::size_t>(pool.models_.size()) * (kMaxGpusPerNode + 1), 0);
  for (std::uint32_t i = 0; i < pool.specs_.size(); ++i) pool.count_whole_free(NodeId{i}, +1);
  pool.versions_.assign(pool.specs_.size(), 0);
  pool.tie_ranks_.resize(pool.specs_.size());
  for (std::uint32_t i = 0; i < pool.tie_ranks_.size(); ++i) pool.tie_ranks_[i] = i;
  return pool;
}

Result<void> Pool::set_tie_order(std::span<const NodeId> order) {
  if (order.size() != specs_.size()) {
    return fail("tie order",
                fmt::format("lists {} nodes, the pool has {}", order.size(), specs_.size()));
  }
  std::vector<std::uint32_t> ranks(specs_.size(), UINT32_MAX);
  for (std::uint32_t rank = 0; rank < order.size(); ++rank) {
    const NodeId node = order[rank];
    if (node.value >= specs_.size() || ranks[node.value] != UINT32_MAX) {
      return fail("tie order", fmt::format("node id {} is unknown or listed twice", node.value));
    }
    ranks[node.value] = rank;
  }
  tie_ranks_ = std::move(ranks);
  for (std::uint32_t n = 0; n < specs_.size(); ++n) changed(NodeId{n});
  return {};
}

Result<void> Pool::check_assignment(const TaskShape& task, const Assignment& where) const {
  if (where.node.value >= specs_.size()) {
    return fail("node", fmt::format("no node with id {}", where.node.value));
  }
  const NodeSpec& spec = specs_[where.node.value];
  const int wanted = task.gpu_count;
  if (gpu_set_size(where.gpus) != wanted) {
    return fail("gpus", fmt::format("the task needs {} GPU(s), {} given on {}", wanted,
                                    gpu_set_size(where.gpus), spec.name));
  }
  if ((std::uint64_t{where.gpus} >> spec.gpu_count) != 0) {
    return fail("gpus", fmt::format("{} has only {} GPU(s)", spec.name, spec.gpu_count));
  }
  if (wanted > 0 && !task.models.accepts(spec.model)) {
    return fail("gpu model", fmt::format("{} has {} GPUs, which the task does not accept",
                                         spec.name, models_.name(spec.model)));
  }
  if (!task.mig && where.mig_start != -1) {
    return fail("mig_start", "only a task asking for a MIG instance has one");
  }
  if (task.mig && (where.mig_start < 0 || where.mig_start >= kMigMemorySlices)) {
    return fail("mig_start", fmt::format("a MIG instance starts at memory slice 0..{}, got {}",
                                         kMigMemorySlices - 1, where.mig_start));
  }
  return {};
}

const MigLayout* Pool::mig_layout(NodeId node, int gpu) const {
  if (node.value >= mig_first_.size() || mig_first_[node.value] < 0 || gpu < 0 ||
      gpu >= specs_[node.value].gpu_count) {
    return nullptr;
  }
  const MigLayout& layout = mig_layouts_[mig_index(node, gpu)];
  // Partitioned (it offers instances) or on demand; another GPU of the node takes no instance.
  if (layout.offered() == 0 && !gpu_set_contains(specs_[node.value].mig_on_demand, gpu)) {
    return nullptr;
  }
  return &layout;
}

bool Pool::mig_open(NodeId node, const NodeState& state, int gpu) const {
  return mig_layout(node, gpu) != nullptr &&
         (gpu_set_contains(state.mig_gpus, gpu) || state.free_milli[gpu] == kMilliPerGpu);
}

bool Pool::mig_usable(NodeId node, int gpu) const {
  return node.value < specs_.size() && schedulable(node) &&
         mig_open(node, states_[node.value], gpu);
}

void Pool::refresh_mig_fits(NodeId node, NodeState& state) const {
  state.mig_fits = 0;
  if (mig_first_[node.value] < 0 || state.cordoned) return;
  for (int g = 0; g < specs_[node.value].gpu_count; ++g) {
    if (!mig_open(node, state, g)) continue;
    state.mig_fits =
        static_cast<std::uint8_t>(state.mig_fits | mig_layout(node, g)->profiles_that_fit());
  }
}

Result<void> Pool::check_mig_assignment(const TaskShape& task, const Assignment& where,
                                        const NodeState& state, bool releasing) const {
  const NodeSpec& spec = specs_[where.node.value];
  const int gpu = std::countr_zero(where.gpus);
  const MigLayout* layout = mig_layout(where.node, gpu);
  const MigInstance instance{*task.mig, where.mig_start};
  const std::string_view name = mig_profile_spec(*task.mig).name;
  if (releasing) {
    if (layout == nullptr ||
        std::ranges::find(layout->instances(), instance) == layout->instances().end()) {
      return fail("release", fmt::format("GPU {} of {} holds no {} instance at memory slice {}",
                                         gpu, spec.name, name, where.mig_start));
    }
    return {};
  }
  if (layout == nullptr) {
    return fail("gpus", fmt::format("GPU {} of {} cannot hold MIG instances", gpu, spec.name));
  }
  if (!mig_open(where.node, state, gpu) || !layout->fits(*task.mig, where.mig_start)) {
    return fail("gpus", fmt::format("GPU {} of {} has no room for a {} instance at memory slice {}",
                                    gpu, spec.name, name, where.mig_start));
  }
  return {};
}

namespace {

// A cordoned node as placement sees it: its running tasks, nothing free.
NodeState shown_cordoned(NodeState state, int gpu_count) {
  state.free_cpu = 0;
  state.free_memory = 0;
  state.free_milli.fill(0);
  state.cordoned = true;
  state.mig_fits = 0;
  refresh_summary(state, gpu_count);
  return state;
}

}  // namespace

const NodeState& Pool::actual(NodeId node) const {
  if (!cordoned_.empty()) {
    if (auto it = cordoned_.find(node.value); it != cordoned_.end()) return it->second;
  }
  return states_[node.value];
}

Result<void> Pool::set_schedulable(NodeId node, bool schedulable) {
  if (node.value >= specs_.size()) {
    return fail("node", fmt::format("unknown node #{}", node.value));
  }
  if (schedulable == this->schedulable(node)) return {};
  const int gpu_count = specs_[node.value].gpu_count;
  count_whole_free(node, -1);
  if (schedulable) {
    states_[node.value] = cordoned_.at(node.value);
    cordoned_.erase(node.value);
  } else {
    cordoned_.emplace(node.value, states_[node.value]);
    states_[node.value] = shown_cordoned(states_[node.value], gpu_count);
  }
  count_whole_free(node, +1);
  changed(node);
  return {};
}

void Pool::count_whole_free(NodeId node, int sign) {
  // A node without GPUs may name a model outside the catalog: it counts nowhere.
  const std::size_t model = specs_[node.value].model.value;
  if (model >= whole_free_gpus_.size()) return;
  const int free = states_[node.value].whole_free_gpus;
  whole_free_gpus_[model] += sign * free;
  whole_free_nodes_[model * (kMaxGpusPerNode + 1) + static_cast<std::size_t>(free)] += sign;
}

void Pool::changed(NodeId node) {
  ++versions_[node.value];
  // Kept to about twice the node count: a reader further behind starts afresh.
  const std::size_t keep = 2 * specs_.size() + 64;
  if (changes_.size() >= 2 * keep) {
    changes_dropped_ += changes_.size() - keep;
    changes_.erase(changes_.begin(), changes_.end() - static_cast<std::ptrdiff_t>(keep));
  }
  changes_.push_back(node.value);
}

std::optional<std::span<const std::uint32_t>> Pool::changes_since(std::uint64_t seq) const {
  if (seq < changes_dropped_ || seq > change_count()) return std::nullopt;
  return std::span<const std::uint32_t>(changes_).subspan(seq - changes_dropped_);
}

Result<void> Pool::allocate(const TaskShape& task, const Assignment& where) {
  if (auto ok = check_assignment(task, where); !ok) return ok;
  const NodeSpec& spec = specs_[where.node.value];
  if (!schedulable(where.node)) {
    return fail("node", fmt::format("{} is cordoned: it takes no new tasks", spec.name));
  }
  const NodeState& state = states_[where.node.value];
  if (state.running_tasks() >= kMaxTasksPerNode) {
    return fail("tasks", fmt::format("{} runs {} tasks, the most one node runs", spec.name,
                                     kMaxTasksPerNode));
  }
  if (state.free_cpu < task.milli_cpu) {
    return fail("cpu", fmt::format("{} has {}m CPU free, the task needs {}m", spec.name,
                                   state.free_cpu, task.milli_cpu));
  }
  if (state.free_memory < task.memory_mib) {
    return fail("memory", fmt::format("{} has {} MiB free, the task needs {} MiB", spec.name,
                                      state.free_memory, task.memory_mib));
  }
  if (task.mig) {
    if (auto ok = check_mig_assignment(task, where, state, false); !ok) return ok;
  }
  for (int g = 0; g < spec.gpu_count && !task.mig; ++g) {
    if (gpu_set_contains(where.gpus, g) && state.free_milli[g] < task.milli_per_gpu) {
      return fail("gpus", fmt::format("GPU {} of {} has {}m free, the task needs {}m", g, spec.name,
                                      state.free_milli[g], task.milli_per_gpu));
    }
  }
  apply(task, where, -1);
  return {};
}

Result<void> Pool::release(const TaskShape& task, const Assignment& where) {
  if (auto ok = check_assignment(task, where); !ok) return ok;
  const NodeSpec& spec = specs_[where.node.value];
  const NodeState& state = actual(where.node);
  if (state.free_cpu + task.milli_cpu > spec.milli_cpu ||
      state.free_memory + task.memory_mib > spec.memory_mib ||
      state.tasks_by_class[task_class(task)] == 0) {
    return fail("release", fmt::format("{} does not hold this task", spec.name));
  }
  if (task.mig) {
    if (auto ok = check_mig_assignment(task, where, state, true); !ok) return ok;
  }
  for (int g = 0; g < spec.gpu_count && !task.mig; ++g) {
    if (gpu_set_contains(where.gpus, g) &&
        state.free_milli[g] + task.milli_per_gpu > kMilliPerGpu) {
      return fail("release", fmt::format("GPU {} of {} does not hold this task", g, spec.name));
    }
  }
  apply(task, where, +1);
  return {};
}

void Pool::apply(const TaskShape& task, const Assignment& where, int sign) {
  const NodeSpec& spec = specs_[where.node.value];
  const auto cordoned = cordoned_.empty() ? cordoned_.end() : cordoned_.find(where.node.value);
  NodeState& state = cordoned != cordoned_.end() ? cordoned->second : states_[where.node.value];
  count_whole_free(where.node, -1);
  state.free_cpu += sign * task.milli_cpu;
  state.free_memory += sign * task.memory_mib;
  if (task.mig) {
    apply_mig(where, MigInstance{*task.mig, where.mig_start}, sign, state);
  } else {
    for (int g = 0; g < spec.gpu_count; ++g) {
      if (gpu_set_contains(where.gpus, g)) state.free_milli[g] += sign * task.milli_per_gpu;
    }
  }
  refresh_summary(state, spec.gpu_count);
  refresh_mig_fits(where.node, state);
  auto& running = state.tasks_by_class[task_class(task)];
  running = static_cast<std::uint16_t>(sign < 0 ? running + 1 : running - 1);
  if (cordoned != cordoned_.end()) {
    states_[where.node.value] = shown_cordoned(state, spec.gpu_count);
  }
  count_whole_free(where.node, +1);
  allocated_milli_gpu_ -= sign * task.total_milli_gpu();
  allocated_cpu_ -= sign * task.milli_cpu;
  changed(where.node);
}

void Pool::apply_mig(const Assignment& where, MigInstance instance, int sign, NodeState& state) {
  const int gpu = std::countr_zero(where.gpus);
  MigLayout& layout = mig_layouts_[mig_index(where.node, gpu)];
  (void)(sign < 0 ? layout.add(instance) : layout.remove(instance));  // checked by the caller
  const GpuSet bit = GpuSet{1} << gpu;
  if (!layout.empty() || layout.offered() != 0) {
    state.mig_gpus |= bit;
    state.free_milli[gpu] = 0;
  } else {  // an on-demand GPU whole again
    state.mig_gpus &= ~bit;
    state.free_milli[gpu] = kMilliPerGpu;
  }
}

Result<void> Pool::check_invariants() const {
  std::int64_t allocated_gpu = 0;
  MilliCpu allocated_cpu = 0;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const NodeSpec& spec = specs_[i];
    const NodeState& state = actual(NodeId{static_cast<std::uint32_t>(i)});
    if (&state != &states_[i] &&
        shown_cordoned(state, spec.gpu_count).tasks_by_class != states_[i].tasks_by_class) {
      return fail(spec.name, "cordoned node shows other running tasks than it has");
    }
    if (state.free_cpu < 0 || state.free_cpu > spec.milli_cpu) {
      return fail(spec.name,
                  fmt::format("free CPU {}m outside 0..{}m", state.free_cpu, spec.milli_cpu));
    }
    if (state.free_memory < 0 || state.free_memory > spec.memory_mib) {
      return fail(spec.name, fmt::format("free memory {} MiB outside 0..{} MiB", state.free_memory,
                                         spec.memory_mib));
    }
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      const MilliGpu free = state.free_milli[g];
      const MilliGpu capacity = g < spec.gpu_count ? kMilliPerGpu : 0;
      if (free < 0 || free > capacity) {
        return fail(spec.name,
                    fmt::format("GPU {} has {}m free, outside 0..{}m", g, free, capacity));
      }
      const MigLayout* layout = mig_layout(NodeId{static_cast<std::uint32_t>(i)}, g);
      if (auto mig = check_mig_gpu(layout, state, g); !mig) {
        return fail(spec.name, fmt::format("GPU {}: {}", g, mig.error().message()));
      }
      allocated_gpu += gpu_set_contains(state.mig_gpus, g) ? layout->used_milli() : capacity - free;
    }
    NodeState expected = state;
    refresh_summary(expected, spec.gpu_count);
    refresh_mig_fits(NodeId{static_cast<std::uint32_t>(i)}, expected);
    if (expected.whole_free_gpus != state.whole_free_gpus ||
        expected.max_free_milli != state.max_free_milli ||
        expected.total_free_milli != state.total_free_milli ||
        expected.mig_fits != state.mig_fits) {
      return fail(spec.name, "cached GPU summary disagrees with the per-GPU figures");
    }
    allocated_cpu += spec.milli_cpu - state.free_cpu;
  }
  std::vector<std::int64_t> whole_free(whole_free_gpus_.size(), 0);
  std::vector<std::int64_t> whole_free_nodes(whole_free_nodes_.size(), 0);
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const std::size_t model = specs_[i].model.value;
    if (model >= whole_free.size()) continue;  // a node without GPUs, of no model of the catalog
    whole_free[model] += states_[i].whole_free_gpus;
    ++whole_free_nodes[model * (kMaxGpusPerNode + 1) +
                       static_cast<std::size_t>(states_[i].whole_free_gpus)];
  }
  if (whole_free != whole_free_gpus_ || whole_free_nodes != whole_free_nodes_) {
    return fail("pool", "whole free GPUs per model disagree with the per-node figures");
  }
  if (allocated_gpu != allocated_milli_gpu_) {
    return fail("pool", fmt::format("allocated GPU {}m, per-node sum {}m", allocated_milli_gpu_,
                                    allocated_gpu));
  }
  if (allocated_cpu != allocated_cpu_) {
    return fail("pool",
                fmt::format("allocated CPU {}m, per-node sum {}m", allocated_cpu_, allocated_cpu));
  }
  return {};
}

std::string describe(const TaskShape& task, const GpuModelCatalog& models) {
  if (task.mig) {
    return fmt::format("MIG {} ({}m of a GPU, {}), {}m CPU, {} MiB",
                       mig_profile_spec(*task.mig).name, task.milli_per_gpu,
                       describe(task.models, models), task.milli_cpu, task.memory_mib);
  }
  std::string gpus = task.needs_gpu()
                         ? fmt::format("{} GPU x {}m ({}), ", task.gpu_count, task.milli_per_gpu,
                                       describe(task.models, models))
                         : std::string("no GPU, ");
  return fmt::format("{}{}m CPU, {} MiB", gpus, task.milli_cpu, task.memory_mib);
}

FreeGpuCount count_free_gpus(const Pool& pool) {
  FreeGpuCount count;
  for (int n = 0; n < pool.node_count(); ++n) {
    const NodeId node{static_cast<std::uint32_t>(n)};
    const int free = pool.state(node).whole_free_gpus;
    count.free += free;
    if (free > 0 && free < pool.spec(node).gpu_count) count.fragmented += free;
  }
  return count;
}

std::string explain_unplaceable(const Pool& pool, const TaskShape& task) {
  int lack_cpu = 0, lack_memory = 0, other_model = 0, lack_gpu = 0;
  int best_whole = 0;
  MilliGpu best_share = 0;
  for (int i = 0; i < pool.node_count(); ++i) {
    const NodeSpec& spec = pool.spec(NodeId{static_cast<std::uint32_t>(i)});
    const NodeState& state = pool.state(NodeId{static_cast<std::uint32_t>(i)});
    if (task.needs_gpu() && !task.models.accepts(spec.model)) {
      ++other_model;
    } else if (state.free_cpu < task.milli_cpu) {
      ++lack_cpu;
    } else if (state.free_memory < task.memory_mib) {
      ++lack_memory;
    } else if (!fits(spec, state, task)) {
      ++lack_gpu;
      best_whole = std::max(best_whole, state.whole_free_gpus);
      best_share = std::max(best_share, state.max_free_milli);
    }
  }
  std::string gpu_detail;
  if (lack_gpu > 0 && task.mig) {
    gpu_detail = fmt::format(" (no GPU of theirs in or open to MIG has room for a {} instance)",
                             mig_profile_spec(*task.mig).name);
  } else if (lack_gpu > 0) {
    gpu_detail = task.is_fractional()
                     ? fmt::format(" (largest free share on one GPU: {}m)", best_share)
                     : fmt::format(" (most whole GPUs free on one node: {})", best_whole);
  }
  return fmt::format(
      "no node fits {}: of {} nodes, {} have other GPU models, {} lack CPU, {} lack memory, {} "
      "lack free GPUs{}",
      describe(task, pool.models()), pool.node_count(), other_model, lack_cpu, lack_memory,
      lack_gpu, gpu_detail);
}

}  // namespace tidepool
