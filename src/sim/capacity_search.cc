#include "sim/capacity_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "sim/scaled_pool.h"

namespace tidepool {
namespace {

Result<CapacityProbe> run_probe(const CapacityInputs& in, int nodes) {
  auto cluster = scale_cluster(*in.pattern, nodes);
  if (!cluster) return std::unexpected(cluster.error());
  auto tenants = scale_tenants(*in.tenants, in.template_gpus, gpus_per_model(*cluster));
  if (!tenants) return fail("--tenants", tenants.error().message());
  auto book = TenantBook::create(std::move(*tenants), cluster->models);
  if (!book) return fail("--tenants", book.error().message());
  CapacityProbe probe;
  probe.nodes = nodes;
  probe.leaves = static_cast<int>(cluster->topology.leaves.size());
  probe.shape = pool_shape_text(*cluster);
  auto pool =
      Pool::create(cluster->models, std::move(cluster->topology), std::move(cluster->nodes));
  if (!pool) return std::unexpected(pool.error());
  probe.gpus = pool->total_gpus();
  const auto begin = std::chrono::steady_clock::now();
  auto run = run_cluster_simulation(std::move(*pool), std::move(*book), *in.config, in.workload, {},
                                    ClusterSimSettings{});
  if (!run) return fail(fmt::format("{} nodes: {}", nodes, run.error().field), run.error().reason);
  probe.summary = std::move(run->summary);
  probe.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  probe.meets = probe.summary.never_started == 0 && probe.summary.p95_queue_s <= in.target;
  return probe;
}

// Runs one probe per size, each on its own thread.
Result<std::vector<CapacityProbe>> run_round(const CapacityInputs& in, std::span<const int> sizes,
                                             int round, const ProbeDone& done) {
  std::vector<std::optional<Result<CapacityProbe>>> results(sizes.size());
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      threads.emplace_back([&in, &results, &sizes, i] { results[i] = run_probe(in, sizes[i]); });
    }
  }
  std::vector<CapacityProbe> probes;
  for (auto& result : results) {
    if (!*result) return std::unexpected(result->error());
    CapacityProbe probe = std::move(**result);
    probe.round = round;
    if (done) done(probe);
    probes.push_back(std::move(probe));
  }
  return probes;
}

}  // namespace

std::int64_t gpus_of_scaled(const ClusterSpec& pattern, std::int64_t nodes) {
  const auto n0 = static_cast<std::int64_t>(pattern.nodes.size());
  std::int64_t per_cycle = 0;
  std::int64_t partial = 0;
  for (std::int64_t i = 0; i < n0; ++i) {
    const int gpus = pattern.nodes[static_cast<std::size_t>(i)].gpu_count;
    per_cycle += gpus;
    if (i < nodes % n0) partial += gpus;
  }
  return nodes / n0 * per_cycle + partial;
}

std::string pool_shape_text(const ClusterSpec& spec) {
  std::vector<std::pair<std::pair<int, std::uint32_t>, int>> kinds;  // (gpus, model), count
  for (const NodeSpec& node : spec.nodes) {
    const std::pair<int, std::uint32_t> kind = {node.gpu_count, node.model.value};
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) {
      kinds.push_back({kind, 1});
    } else {
      ++it->second;
    }
  }
  const auto kind_text = [&](const std::pair<int, std::uint32_t>& kind) {
    return kind.first == 0
               ? std::string("no GPU")
               : fmt::format("{} {}", kind.first, spec.models.name(GpuModelId{kind.second}));
  };
  const std::size_t leaves = spec.topology.leaves.size();
  const std::string on = fmt::format("on {} lea{}", leaves, leaves == 1 ? "f" : "ves");
  if (kinds.size() == 1) {
    return fmt::format("{} node{} of {} {}", spec.nodes.size(), spec.nodes.size() == 1 ? "" : "s",
                       kind_text(kinds[0].first), on);
  }
  std::string text;
  for (const auto& [kind, count] : kinds) {
    text += fmt::format("{}{} x {}", text.empty() ? "" : " + ", count, kind_text(kind));
  }
  return fmt::format("{} nodes ({}) {}", spec.nodes.size(), text, on);
}

std::vector<int> next_probe_sizes(const std::map<int, bool>& known, int max_nodes, int threads) {
  std::optional<int> hi;
  for (const auto& [nodes, meets] : known) {
    if (meets) {
      hi = nodes;
      break;
    }
  }
  int lo = 0;  // 0: no miss known below hi
  for (const auto& [nodes, meets] : known) {
    if (!meets && (!hi || nodes < *hi)) lo = nodes;
  }
  std::vector<int> sizes;
  const auto add = [&](std::int64_t n) {
    const int size = static_cast<int>(n);
    if (size >= 1 && size <= max_nodes && !known.contains(size) &&
        std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
      sizes.push_back(size);
    }
  };
  if (!hi) {
    if (lo >= max_nodes) return sizes;  // even the largest allowed misses
    std::int64_t n = lo;
    for (int k = 0; k < threads; ++k) add(n = std::min<std::int64_t>(n * 2, max_nodes));
  } else if (lo == 0) {
    int n = *hi;
    for (int k = 0; k < threads && n > 1; ++k) add(n /= 2);
  } else {
    const std::int64_t width = *hi - lo;
    for (int k = 1; k <= threads; ++k) add(lo + (width * k + (threads + 1) / 2) / (threads + 1));
    std::erase_if(sizes, [&](int n) { return n <= lo || n >= *hi; });
  }
  return sizes;
}

Result<CapacitySearch> search_capacity(const CapacityInputs& in, int start, int max_nodes,
                                       int threads, const ProbeDone& done) {
  CapacitySearch out;
  out.max_nodes = max_nodes;
  const auto begin = std::chrono::steady_clock::now();
  std::map<int, bool> known;  // nodes -> meets
  // The first round: the start size and, with more threads, larger ones (planning usually asks
  // how much to grow).
  std::vector<int> sizes = {start};
  for (int k = 1; k < threads && sizes.back() < max_nodes; ++k) {
    sizes.push_back(static_cast<int>(std::min<std::int64_t>(sizes.back() * 2LL, max_nodes)));
  }
  for (int round = 1; !sizes.empty(); ++round) {
    auto probes = run_round(in, sizes, round, done);
    if (!probes) return std::unexpected(probes.error());
    for (CapacityProbe& probe : *probes) {
      known[probe.nodes] = probe.meets;
      out.probes.push_back(std::move(probe));
    }
    sizes = next_probe_sizes(known, max_nodes, threads);
  }
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  for (const CapacityProbe& probe : out.probes) {
    if (probe.meets && (!out.answer || probe.nodes < out.answer->nodes)) out.answer = &probe;
  }
  for (const CapacityProbe& probe : out.probes) {
    if (!probe.meets && (!out.answer || probe.nodes < out.answer->nodes) &&
        (!out.below || probe.nodes > out.below->nodes)) {
      out.below = &probe;
    }
  }
  return out;
}

}  // namespace tidepool
