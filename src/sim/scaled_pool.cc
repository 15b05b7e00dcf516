#include "sim/scaled_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

namespace tidepool {
namespace {

constexpr std::int64_t kPpm = 1'000'000;

// floor(value x to / from), exact for value x to up to INT64_MAX (checked by the caller).
std::int64_t scale_down(std::int64_t value, std::int64_t to, std::int64_t from) {
  return value * to / from;
}

std::int64_t scale_half_up(std::int64_t value, std::int64_t to, std::int64_t from) {
  return (value * to + from / 2) / from;
}

std::int64_t scale_up(std::int64_t value, std::int64_t to, std::int64_t from) {
  return (value * to + from - 1) / from;
}

// A per-model scale factor to / from, or none (the model is left unchanged).
struct Factor {
  std::int64_t to = 1;
  std::int64_t from = 1;
};

}  // namespace

Result<ClusterSpec> scale_cluster(const ClusterSpec& pattern, int nodes) {
  if (pattern.nodes.empty()) return fail("cluster", "the template pool has no nodes");
  if (nodes < 1 || nodes > kMaxClusterNodes) {
    return fail("nodes", fmt::format("must be 1..{}, got {}", kMaxClusterNodes, nodes));
  }
  const Topology& from = pattern.topology;
  // Non-empty leaves in order with their node counts, and per spine its non-empty leaves.
  std::vector<int> leaf_nodes(from.leaves.size(), 0);
  for (const NodeSpec& node : pattern.nodes) ++leaf_nodes[node.leaf.value];
  std::vector<int> leaf_sizes;
  std::vector<int> spine_leaves(from.spines.size(), 0);
  for (std::size_t l = 0; l < from.leaves.size(); ++l) {
    if (leaf_nodes[l] == 0) continue;
    leaf_sizes.push_back(leaf_nodes[l]);
    ++spine_leaves[from.leaves[l].spine.value];
  }
  std::vector<int> spine_sizes;
  std::vector<int> spine_oversubscription;
  for (std::size_t s = 0; s < from.spines.size(); ++s) {
    if (spine_leaves[s] == 0) continue;
    spine_sizes.push_back(spine_leaves[s]);
    spine_oversubscription.push_back(from.spines[s].oversubscription);
  }

  ClusterSpec out;
  out.models = pattern.models;
  out.topology.site = from.site;
  out.topology.links = from.links;
  out.nodes.reserve(static_cast<std::size_t>(nodes));
  int placed = 0;
  int leaves_on_spine = 0;  // leaves already under the last spine
  for (std::size_t k = 0; placed < nodes; ++k) {
    if (out.topology.spines.empty() ||
        leaves_on_spine == spine_sizes[(out.topology.spines.size() - 1) % spine_sizes.size()]) {
      const std::size_t s = out.topology.spines.size();
      out.topology.spines.push_back(
          SpineSpec{.name = fmt::format("spine-{}", s + 1),
                    .oversubscription = spine_oversubscription[s % spine_oversubscription.size()]});
      leaves_on_spine = 0;
    }
    const LeafId leaf{static_cast<std::uint32_t>(k)};
    out.topology.leaves.push_back(
        LeafSpec{.name = fmt::format("leaf-{}", k + 1),
                 .spine = SpineId{static_cast<std::uint32_t>(out.topology.spines.size() - 1)}});
    ++leaves_on_spine;
    const int size = std::min(leaf_sizes[k % leaf_sizes.size()], nodes - placed);
    const int digits = std::max<int>(2, static_cast<int>(std::to_string(size).size()));
    for (int j = 1; j <= size; ++j, ++placed) {
      NodeSpec node = pattern.nodes[static_cast<std::size_t>(placed) % pattern.nodes.size()];
      node.name = fmt::format("node-{}-{:0{}}", k + 1, j, digits);
      node.leaf = leaf;
      out.nodes.push_back(std::move(node));
    }
  }
  return out;
}

std::vector<std::int64_t> gpus_per_model(const ClusterSpec& spec) {
  std::vector<std::int64_t> gpus(static_cast<std::size_t>(spec.models.size()), 0);
  for (const NodeSpec& node : spec.nodes) {
    if (node.gpu_count > 0 && node.model.value < gpus.size())
      gpus[node.model.value] += node.gpu_count;
  }
  return gpus;
}

Result<TenantsSpec> scale_tenants(const TenantsSpec& spec, std::span<const std::int64_t> from,
                                  std::span<const std::int64_t> to) {
  // A scaled figure past kMaxQuotaMilli is refused, so value x to must stay below INT64_MAX.
  const auto factor = [&](GpuModelId m) -> std::optional<Factor> {
    if (m.value >= from.size() || m.value >= to.size() || from[m.value] <= 0) return std::nullopt;
    return Factor{.to = to[m.value], .from = from[m.value]};
  };
  const auto check = [](std::int64_t value, const Factor& f,
                        const std::string& what) -> Result<void> {
    if (f.to < 0 || (f.to > 0 && value > std::numeric_limits<std::int64_t>::max() / f.to / 2) ||
        value / f.from * f.to > kMaxQuotaMilli) {
      return fail(what, fmt::format("{}m scaled by {}/{} passes the largest quota, {}m", value,
                                    f.to, f.from, kMaxQuotaMilli));
    }
    return {};
  };

  TenantsSpec out = spec;
  // Guarantees: largest-remainder rounding per model over all tenants.
  struct Share {
    ModelQuota* quota;
    std::int64_t remainder;
    std::size_t order;
  };
  std::vector<std::vector<Share>> shares(std::max(from.size(), to.size()));
  std::size_t order = 0;
  for (OrgSpec& org : out.orgs) {
    for (TenantSpec& tenant : org.tenants) {
      for (ModelQuota& quota : tenant.quotas) {
        const auto f = factor(quota.model);
        if (!f) continue;
        const std::string what = fmt::format("tenant {}", tenant.name);
        for (std::int64_t v : {quota.guaranteed_milli, quota.borrowing_limit_milli.value_or(0),
                               quota.lending_limit_milli.value_or(0)}) {
          if (auto ok = check(v, *f, what); !ok) return std::unexpected(ok.error());
        }
        const std::int64_t scaled_guarantee = scale_down(quota.guaranteed_milli, f->to, f->from);
        shares[quota.model.value].push_back(
            Share{.quota = &quota,
                  .remainder = quota.guaranteed_milli * f->to - scaled_guarantee * f->from,
                  .order = order++});
        quota.guaranteed_milli = scaled_guarantee;
        if (quota.borrowing_limit_milli) {
          quota.borrowing_limit_milli = scale_half_up(*quota.borrowing_limit_milli, f->to, f->from);
        }
      }
    }
  }
  for (std::size_t m = 0; m < shares.size(); ++m) {
    std::vector<Share>& list = shares[m];
    if (list.empty()) continue;
    const std::int64_t f_from = from[m];
    std::int64_t remainders = 0;
    for (const Share& s : list) remainders += s.remainder;
    std::int64_t left = remainders / f_from;  // milli-GPUs still to hand out (< list.size())
    std::stable_sort(list.begin(), list.end(), [](const Share& a, const Share& b) {
      return a.remainder != b.remainder ? a.remainder > b.remainder : a.order < b.order;
    });
    for (Share& s : list) {
      if (left == 0) break;
      ++s.quota->guaranteed_milli;
      --left;
    }
  }
  // Lending limits (at most the new guarantee) and org caps.
  for (std::size_t o = 0; o < out.orgs.size(); ++o) {
    OrgSpec& org = out.orgs[o];
    for (std::size_t t = 0; t < org.tenants.size(); ++t) {
      for (std::size_t q = 0; q < org.tenants[t].quotas.size(); ++q) {
        ModelQuota& quota = org.tenants[t].quotas[q];
        const auto f = factor(quota.model);
        if (!f || !quota.lending_limit_milli) continue;
        const std::int64_t before = spec.orgs[o].tenants[t].quotas[q].lending_limit_milli.value();
        quota.lending_limit_milli =
            std::min(scale_half_up(before, f->to, f->from), quota.guaranteed_milli);
      }
    }
    for (OrgModelCaps& caps : org.caps) {
      const auto f = factor(caps.model);
      if (!f) continue;
      const std::string what = fmt::format("org {}", org.name);
      for (const auto* figure :
           {&caps.guaranteed_milli, &caps.borrowing_limit_milli, &caps.lending_limit_milli}) {
        if (*figure) {
          if (auto ok = check(**figure, *f, what); !ok) return std::unexpected(ok.error());
        }
      }
      if (caps.guaranteed_milli) {
        std::int64_t tenants_sum = 0;
        for (const TenantSpec& tenant : org.tenants) {
          for (const ModelQuota& quota : tenant.quotas) {
            if (quota.model == caps.model) tenants_sum += quota.guaranteed_milli;
          }
        }
        caps.guaranteed_milli =
            std::max(scale_up(*caps.guaranteed_milli, f->to, f->from), tenants_sum);
      }
      if (caps.borrowing_limit_milli) {
        caps.borrowing_limit_milli = scale_half_up(*caps.borrowing_limit_milli, f->to, f->from);
      }
      if (caps.lending_limit_milli) {
        caps.lending_limit_milli = scale_half_up(*caps.lending_limit_milli, f->to, f->from);
      }
    }
  }
  return out;
}

Result<void> compress_submit_times(std::vector<SimJob>& jobs, std::int64_t growth_ppm) {
  if (growth_ppm < 0 || growth_ppm > kMaxGrowthPpm) {
    return fail("growth", fmt::format("must be 0..{} (parts per million), got {}", kMaxGrowthPpm,
                                      growth_ppm));
  }
  if (growth_ppm == 0) return {};
  const std::int64_t divisor = kPpm + growth_ppm;
  // floor(t x 10^6 / divisor) without forming t x 10^6.
  const auto compress = [divisor](Seconds t) {
    return t / divisor * kPpm + t % divisor * kPpm / divisor;
  };
  for (SimJob& job : jobs) {
    job.job.submit_time = compress(job.job.submit_time);
    if (job.job.deadline) {
      job.job.deadline = std::max(compress(*job.job.deadline), job.job.submit_time + 1);
    }
  }
  return {};
}

}  // namespace tidepool
