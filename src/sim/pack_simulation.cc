#include "sim/pack_simulation.h"

#include <cmath>

namespace tidepool {

std::vector<std::uint32_t> pack_arrival_order(std::span<const TaskShape> tasks,
                                              std::int64_t capacity_milli_gpu,
                                              const PackSettings& settings, Rng& rng) {
  std::vector<std::uint32_t> order(tasks.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  rng.shuffle(std::span(order));
  if (tasks.empty()) return order;

  const double target = settings.tune * static_cast<double>(capacity_milli_gpu);
  std::int64_t demand = 0;
  for (const TaskShape& task : tasks) demand += task.total_milli_gpu();
  if (static_cast<double>(demand) < target) {
    while (true) {
      const auto pick = static_cast<std::uint32_t>(rng.below(tasks.size()));
      const std::int64_t next = demand + tasks[pick].total_milli_gpu();
      if (static_cast<double>(next) > target) break;
      demand = next;
      order.push_back(pick);
    }
  } else {
    while (static_cast<double>(demand) > target && !order.empty()) {
      const auto at = static_cast<std::size_t>(rng.below(order.size()));
      demand -= tasks[order[at]].total_milli_gpu();
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return order;
}

PackRun run_pack(Pool pool, std::span<const TaskShape> tasks, const WorkloadProfile& profile,
                 PlacementPolicy& policy, const PackSettings& settings) {
  Rng rng(settings.seed);
  const std::vector<std::uint32_t> order =
      pack_arrival_order(tasks, pool.capacity_milli_gpu(), settings, rng);

  // Equally good nodes are taken in a random order fixed for the run, as the authors' simulator
  // does by prefixing node names with a random permutation and taking the smallest name.
  std::vector<NodeId> tie_order(static_cast<std::size_t>(pool.node_count()));
  for (std::uint32_t i = 0; i < tie_order.size(); ++i) tie_order[i] = NodeId{i};
  rng.shuffle(std::span(tie_order));
  (void)pool.set_tie_order(tie_order);  // a permutation of the pool's own nodes: cannot fail

  PackRun run;
  run.total_gpus = pool.total_gpus();
  run.samples.reserve(order.size() + 1);

  // Fragmentation is kept per node and updated only where a task lands.
  std::vector<std::int64_t> node_fragment(static_cast<std::size_t>(pool.node_count()));
  std::int64_t fragment = 0;
  for (int i = 0; i < pool.node_count(); ++i) {
    const NodeId node{static_cast<std::uint32_t>(i)};
    node_fragment[i] = scaled_node_fragmentation(pool.spec(node), pool.state(node), profile);
    fragment += node_fragment[i];
  }
  const double per_count =
      profile.total_count() > 0 ? 1.0 / static_cast<double>(profile.total_count()) : 0.0;
  auto sample = [&](std::int64_t arrived) {
    run.samples.push_back(
        {arrived, pool.allocated_milli_gpu(), static_cast<double>(fragment) * per_count});
  };

  std::int64_t arrived = 0;
  sample(arrived);
  for (std::uint32_t index : order) {
    const TaskShape& task = tasks[index];
    arrived += task.total_milli_gpu();
    ++run.arrived_tasks;
    PlacementResult where = policy.place(pool, task, rng);
    if (where && pool.allocate(task, *where)) {
      const NodeId node = where->node;
      const std::int64_t now =
          scaled_node_fragmentation(pool.spec(node), pool.state(node), profile);
      fragment += now - node_fragment[node.value];
      node_fragment[node.value] = now;
    } else {
      ++run.failed_tasks;
    }
    sample(arrived);
  }
  return run;
}

namespace {

// Python's round(x, digits) on the scripts' floats: round half to even at the given decimal.
double round_to(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::nearbyint(x * scale) / scale;
}

template <class Value>
PercentCurve percent_curve(const PackRun& run, Value&& value) {
  const double capacity = static_cast<double>(run.total_gpus) * 10.0;  // 1% of capacity, milli
  std::array<double, 131> sum{};
  std::array<int, 131> count{};
  for (const PackSample& s : run.samples) {
    const double percent = std::nearbyint(static_cast<double>(s.arrived_milli_gpu) / capacity);
    if (percent < 0 || percent > 130) continue;
    const auto k = static_cast<std::size_t>(percent);
    sum[k] += value(s, capacity);
    ++count[k];
  }
  PercentCurve curve;
  for (std::size_t k = 0; k <= 130; ++k) {
    double total = sum[k];
    int n = count[k];
    if (n == 0) {
      for (std::size_t j = (k == 0 ? 0 : k - 1); j <= std::min<std::size_t>(k + 1, 130); ++j) {
        total += sum[j];
        n += count[j];
      }
    }
    if (n > 0) curve[k] = round_to(total / n, 2);
  }
  return curve;
}

}  // namespace

PercentCurve allocation_curve(const PackRun& run) {
  return percent_curve(run, [](const PackSample& s, double capacity) {
    return round_to(static_cast<double>(s.allocated_milli_gpu) / capacity, 2);
  });
}

PercentCurve fragmentation_curve(const PackRun& run) {
  return percent_curve(
      run, [](const PackSample& s, double capacity) { return s.fragmented_milli_gpu / capacity; });
}

}  // namespace tidepool
