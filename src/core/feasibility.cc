#include "core/feasibility.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <string>

#include "core/gpus_text.h"

namespace tidepool {
namespace {

constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max();

// How many of the job's tasks one node holds, empty: by which resource it holds the fewest.
struct NodeFit {
  std::int64_t tasks = 0;
  std::string_view short_of;  // the core field of the resource that binds: "gpu_count", ...
};

// The node's GPUs that could ever hold an instance of `profile`: those partitioned on demand, and
// those partitioned with such an instance.
std::int64_t gpus_for_mig(const NodeSpec& node, MigProfile profile) {
  std::int64_t gpus = std::popcount(node.mig_on_demand);
  for (const NodeSpec::MigPartition& partition : node.mig_partitions) {
    gpus += std::ranges::any_of(partition.instances,
                                [&](const MigInstance& i) { return i.profile == profile; })
                ? 1
                : 0;
  }
  return gpus;
}

NodeFit tasks_on(const NodeSpec& node, const TaskShape& task) {
  NodeFit fit{kUnbounded, {}};
  const auto bound = [&](std::int64_t n, std::string_view field) {
    if (n < fit.tasks) fit = NodeFit{n, field};
  };
  if (task.mig) {
    bound(gpus_for_mig(node, *task.mig), "mig_profile");
  } else if (task.needs_gpu()) {
    bound(task.is_fractional() ? std::int64_t{node.gpu_count} * (kMilliPerGpu / task.milli_per_gpu)
                               : node.gpu_count / task.gpu_count,
          "gpu_count");
  }
  if (task.milli_cpu > 0) bound(node.milli_cpu / task.milli_cpu, "milli_cpu");
  if (task.memory_mib > 0) bound(node.memory_mib / task.memory_mib, "memory_mib");
  return fit;
}

// What one GPU model's nodes can do for the job.
struct ModelRoom {
  std::int64_t nodes = 0;
  std::int64_t gpus = 0;      // on those nodes
  std::int64_t tasks = 0;     // of the job's, summed over the nodes
  std::string_view short_of;  // when some node holds none of its tasks: why (the last found)
};

std::string what_a_task_asks(const TaskShape& task) {
  std::string text = task.mig ? fmt::format("a MIG {} instance", mig_profile_spec(*task.mig).name)
                     : task.needs_gpu() ? gpus_text(task.total_milli_gpu())
                                        : "no GPU";
  if (task.milli_cpu > 0) text += fmt::format(", {} CPU milli", task.milli_cpu);
  if (task.memory_mib > 0) text += fmt::format(", {} MiB", task.memory_mib);
  return text;
}

}  // namespace

Result<void> check_can_ever_start(const Job& job, const Pool& pool, const TenantBook* book) {
  const TaskShape& task = job.gang.task;
  const GpuModelCatalog& models = pool.models();
  // Without GPUs, the job may go on any node: all of them count as one "model".
  const int kinds = task.needs_gpu() ? models.size() : 1;
  std::optional<Error> pool_refusal;
  std::optional<Error> quota_refusal;
  bool accepted_any = false;
  for (int k = 0; k < kinds; ++k) {
    const GpuModelId model{static_cast<std::uint32_t>(k)};
    if (task.needs_gpu() && !task.models.accepts(model)) continue;
    accepted_any = true;
    ModelRoom room;
    for (int n = 0; n < pool.node_count(); ++n) {
      const NodeSpec& node = pool.spec(NodeId{static_cast<std::uint32_t>(n)});
      if (task.needs_gpu() && node.model != model) continue;
      ++room.nodes;
      room.gpus += node.gpu_count;
      const NodeFit fit = tasks_on(node, task);
      room.tasks = room.tasks > kUnbounded - fit.tasks ? kUnbounded : room.tasks + fit.tasks;
      if (fit.tasks == 0) room.short_of = fit.short_of;
    }
    const std::string where = task.needs_gpu()
                                  ? fmt::format("the pool's {} nodes", models.name(model))
                                  : "the pool's nodes";
    if (room.tasks < job.gang.task_count) {
      if (pool_refusal) continue;  // the first model's answer stands for all
      if (room.nodes == 0) {
        pool_refusal = Error{"models", fmt::format("the pool has no {} nodes", models.name(model))};
      } else if (room.tasks == 0) {
        pool_refusal =
            Error{std::string(room.short_of),
                  fmt::format("no node of {} ({} nodes, {}) holds one task ({})", where, room.nodes,
                              gpus_text(room.gpus * kMilliPerGpu), what_a_task_asks(task))};
      } else {
        pool_refusal = Error{"task_count",
                             fmt::format("{} ({} nodes, {}) hold at most {} tasks of {}; the job "
                                         "asks {}",
                                         where, room.nodes, gpus_text(room.gpus * kMilliPerGpu),
                                         room.tasks, what_a_task_asks(task), job.gang.task_count)};
      }
      continue;
    }
    if (book != nullptr && task.needs_gpu()) {
      const std::int64_t guaranteed = book->guaranteed(job.tenant, model);
      const std::optional<std::int64_t> limit = book->borrowing_limit(job.tenant, model);
      if (limit && job.total_milli_gpu() > guaranteed + *limit) {
        if (!quota_refusal) {
          quota_refusal =
              Error{"tenant",
                    fmt::format("tenant {} may hold at most {} {} GPUs (guaranteed {} + borrowing "
                                "limit {}); the job asks {}",
                                book->tenant_name(job.tenant), gpus_number(guaranteed + *limit),
                                models.name(model), gpus_number(guaranteed), gpus_number(*limit),
                                gpus_text(job.total_milli_gpu()))};
        }
        continue;
      }
    }
    return {};
  }
  if (!accepted_any) {
    return fail("models", "the pool has none of the GPU models the job accepts");
  }
  // The tenant's ceiling is the nearer answer when the pool could hold the job on some model.
  const Error& refusal = quota_refusal ? *quota_refusal : *pool_refusal;
  return std::unexpected(refusal);
}

}  // namespace tidepool
