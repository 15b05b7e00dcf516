#include "sim/tenants_from_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "core/gpus_text.h"

namespace tidepool {
namespace {

// Products C_m x w_t reach about 1e12 x 9.2e18: exact only in 128 bits.
__extension__ using Wide = __int128;

// A YAML double-quoted scalar: a team named "103959" or "true" stays a name.
std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string quota_figures(std::optional<std::int64_t> guaranteed,
                          std::optional<std::int64_t> borrowing,
                          std::optional<std::int64_t> lending) {
  std::string out;
  for (auto [key, value] :
       {std::pair{"guaranteed_gpus", guaranteed}, std::pair{"borrowing_limit_gpus", borrowing},
        std::pair{"lending_limit_gpus", lending}}) {
    if (!value) continue;
    out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", key, gpus_number(*value));
  }
  return "{" + out + "}";
}

}  // namespace

Result<TraceTenants> derive_tenants_from_trace(std::span<const PhillyJob> jobs,
                                               std::span<const ModelCapacity> capacity,
                                               std::string_view org) {
  if (org.empty()) return fail("org", "must not be empty");
  if (jobs.empty()) return fail("jobs", "the trace has no jobs");
  if (capacity.empty()) return fail("pool", "the pool has no GPUs to share");
  for (std::size_t k = 0; k < capacity.size(); ++k) {
    const ModelCapacity& c = capacity[k];
    if (c.milli < 1 || c.milli > kMaxQuotaMilli) {
      return fail("pool", fmt::format("model #{} has {} milli-GPUs; expected 1..{}", c.model.value,
                                      c.milli, kMaxQuotaMilli));
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (capacity[j].model == c.model) {
        return fail("pool", fmt::format("model #{} is given twice", c.model.value));
      }
    }
  }

  // Per team: jobs and GPU-seconds, summed in 128 bits and then bounded to 64.
  struct Sum {
    int jobs = 0;
    Wide gpu_seconds = 0;
  };
  std::map<std::string, Sum, std::less<>> sums;
  Wide total = 0;
  for (const PhillyJob& job : jobs) {
    Sum& sum = sums[job.tenant];
    const Wide gpu_seconds = Wide{job.duration} * job.gpus;
    ++sum.jobs;
    sum.gpu_seconds += gpu_seconds;
    total += gpu_seconds;
  }
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  if (total > kMax) return fail("jobs", "the trace's GPU time exceeds 2^63 GPU-seconds");
  if (total <= 0) {
    return fail("jobs",
                "the trace's jobs have no GPU time (every duration is 0); nothing to share");
  }

  TraceTenants result;
  result.capacity.assign(capacity.begin(), capacity.end());
  result.total_gpu_seconds = static_cast<std::int64_t>(total);
  for (const auto& [name, sum] : sums) {
    const auto gpu_seconds = static_cast<std::int64_t>(sum.gpu_seconds);
    result.tenants.push_back({name, sum.jobs, gpu_seconds,
                              static_cast<double>(gpu_seconds) / static_cast<double>(total),
                              std::vector<std::int64_t>(capacity.size(), 0)});
  }
  // Names are unique, so this order is total.
  std::sort(result.tenants.begin(), result.tenants.end(),
            [](const TraceTenant& a, const TraceTenant& b) {
              if (a.gpu_seconds != b.gpu_seconds) return a.gpu_seconds > b.gpu_seconds;
              return a.name < b.name;
            });

  const std::size_t n = result.tenants.size();
  std::vector<Wide> remainder(n);
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < capacity.size(); ++k) {
    const Wide c = capacity[k].milli;
    std::int64_t assigned = 0;
    for (std::size_t t = 0; t < n; ++t) {
      const Wide product = c * result.tenants[t].gpu_seconds;
      const auto floor = static_cast<std::int64_t>(product / total);
      result.tenants[t].guaranteed_milli[k] = floor;
      remainder[t] = product % total;
      assigned += floor;
    }
    // Fewer left over than tenants with a remainder: sum of remainders = left over x W.
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
    const std::int64_t left_over = capacity[k].milli - assigned;
    for (std::int64_t i = 0; i < left_over; ++i) ++result.tenants[order[i]].guaranteed_milli[k];
  }

  OrgSpec org_spec;
  org_spec.name = std::string(org);
  for (const TraceTenant& tenant : result.tenants) {
    TenantSpec spec;
    spec.name = tenant.name;
    spec.weight = 1;
    for (std::size_t k = 0; k < capacity.size(); ++k) {
      if (tenant.guaranteed_milli[k] > 0) {
        spec.quotas.push_back({capacity[k].model, tenant.guaranteed_milli[k], {}, {}});
      }
    }
    org_spec.tenants.push_back(std::move(spec));
  }
  result.spec.orgs.push_back(std::move(org_spec));
  return result;
}

std::string write_tenants_yaml(const TenantsSpec& spec, const GpuModelCatalog& models,
                               std::string_view comment) {
  std::string out;
  while (!comment.empty()) {
    const std::size_t end = comment.find('\n');
    const std::string_view line = comment.substr(0, end);
    out += line.empty() ? "#\n" : fmt::format("# {}\n", line);
    comment = end == std::string_view::npos ? std::string_view() : comment.substr(end + 1);
  }
  out += "orgs:\n";
  for (const OrgSpec& org : spec.orgs) {
    out += fmt::format("  - name: {}\n", yaml_quoted(org.name));
    if (!org.caps.empty()) {
      out += "    quota:\n";
      for (const OrgModelCaps& caps : org.caps) {
        out += fmt::format("      {}: {}\n", yaml_quoted(models.name(caps.model)),
                           quota_figures(caps.guaranteed_milli, caps.borrowing_limit_milli,
                                         caps.lending_limit_milli));
      }
    }
    out += org.tenants.empty() ? "    tenants: []\n" : "    tenants:\n";
    for (const TenantSpec& tenant : org.tenants) {
      out += fmt::format("      - name: {}\n        weight: {}\n", yaml_quoted(tenant.name),
                         tenant.weight);
      if (!tenant.quotas.empty()) {
        out += "        quota:\n";
        for (const ModelQuota& quota : tenant.quotas) {
          out += fmt::format("          {}: {}\n", yaml_quoted(models.name(quota.model)),
                             quota_figures(quota.guaranteed_milli, quota.borrowing_limit_milli,
                                           quota.lending_limit_milli));
        }
      }
      if (!tenant.queues.empty()) {
        std::string queues;
        for (const std::string& queue : tenant.queues) {
          queues += (queues.empty() ? "" : ", ") + yaml_quoted(queue);
        }
        out += fmt::format("        queues: [{}]\n", queues);
      }
    }
  }
  return out;
}

}  // namespace tidepool
