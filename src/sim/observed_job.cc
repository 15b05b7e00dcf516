#include "sim/observed_job.h"

#include <fmt/format.h>

#include <tuple>
#include <utility>

namespace tidepool {

Result<std::int64_t> observed_count(std::int64_t value, std::int64_t most,
                                    const std::string& field) {
  if (value < 0 || value > most) {
    return fail(field, fmt::format("must be 0..{}, got {}", most, value));
  }
  return value;
}

Result<std::int64_t> observed_time(std::int64_t value, const std::string& field) {
  if (value < 0 || value > kMaxObservedTime) {
    return fail(field,
                fmt::format("expected seconds since the epoch, 0..{} (the year 9999), got {}",
                            kMaxObservedTime, value));
  }
  return value;
}

Result<std::int64_t> observed_product(std::int64_t a, std::int64_t b, std::int64_t most,
                                      const std::string& field) {
  std::int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product) || product > most) {
    return fail(field, fmt::format("{} x {} is not within 0..{}", a, b, most));
  }
  return product;
}

Result<void> check_observed(const ObservedJob& job) {
  if (job.id.empty()) return fail("id", "missing");
  if (job.tenant.empty()) return fail("tenant", "missing");
  for (const auto& [field, time] : {std::pair{"submit", std::optional(job.submit)},
                                    std::pair{"start", job.start}, std::pair{"end", job.end}}) {
    if (!time) continue;
    if (auto ok = observed_time(*time, field); !ok) return std::unexpected(ok.error());
  }
  if (job.end && !job.start) return fail("end", "given without a start");
  if (job.end && *job.end < *job.start) return fail("end", "before the start");
  if (job.time_limit && (*job.time_limit <= 0 || *job.time_limit > kMaxObservedTime)) {
    return fail("time_limit",
                fmt::format("must be 1..{} seconds, got {}", kMaxObservedTime, *job.time_limit));
  }
  if (job.node_count < 1 || job.node_count > kMaxObservedNodes) {
    return fail("node_count",
                fmt::format("must be 1..{}, got {}", kMaxObservedNodes, job.node_count));
  }
  if (std::cmp_greater(job.nodes.size(), kMaxObservedNodes)) {
    return fail("nodes", fmt::format("more than {} nodes", kMaxObservedNodes));
  }
  for (const auto& [field, value, most] :
       {std::tuple{"gpus", std::int64_t{job.gpus}, kMaxObservedGpus},
        std::tuple{"milli_cpu", job.milli_cpu, kMaxObservedCpus * 1000},
        std::tuple{"memory_mib", job.memory_mib, kMaxObservedMemoryMib}}) {
    if (auto ok = observed_count(value, most, field); !ok) return std::unexpected(ok.error());
  }
  return {};
}

}  // namespace tidepool
