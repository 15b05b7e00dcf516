// Tenants derived from a job trace: one tenant per team of the trace (a Philly virtual cluster),
// all in one org, each guaranteed a part of every GPU model's capacity in proportion to its share
// of the trace's GPU time. This is how `tidepool sim tenants-from-trace` makes a tenants file
// (config/tenants_file.h) for replaying a trace whose teams come without quotas.
//
// The rule, per GPU model m of capacity C_m milli-GPUs:
//   w_t      = sum over t's jobs of duration x gpus          (GPU-seconds; jobs of 0 s add 0)
//   W        = sum of w_t over all tenants                   (must be > 0)
//   G_t,m    = floor(C_m x w_t / W), then the C_m - sum of floors milli-GPUs left over go one each
//              to the tenants with the largest remainders (C_m x w_t mod W), ties to the tenant
//              listed first (largest rounding: the guarantees of m sum to exactly C_m).
// A tenant with no GPU time is still a tenant, with no guarantee. Every tenant has weight 1, no
// borrowing limit and lends all of its guarantee (the defaults of the tenants file), and one team
// queue, "default". The arithmetic is exact (integers); the same jobs and capacity give the same
// tenants, bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/tenants.h"
#include "sim/philly_trace.h"

namespace tidepool {

// One GPU model's capacity in the pool, in milli-GPUs.
struct ModelCapacity {
  GpuModelId model;
  std::int64_t milli = 0;  // 1..kMaxQuotaMilli
};

// One derived tenant and the figures behind its guarantees.
struct TraceTenant {
  std::string name;              // the team (virtual cluster) as the trace names it
  int jobs = 0;                  // its jobs in the trace
  std::int64_t gpu_seconds = 0;  // w_t: sum of duration x gpus over its jobs
  double share = 0.0;            // w_t / W, 0..1 (for reports; the guarantees use integers)
  // G_t,m per entry of TraceTenants::capacity, in the same order.
  std::vector<std::int64_t> guaranteed_milli;
};

struct TraceTenants {
  std::vector<ModelCapacity> capacity;  // as given
  // By GPU time, largest first, then by name: a total order. The spec lists them the same way.
  std::vector<TraceTenant> tenants;
  std::int64_t total_gpu_seconds = 0;  // W
  // One org named as asked, holding the tenants above; models without a guarantee for a tenant
  // are not listed in its quotas. TenantBook::create accepts it with the models of `capacity`.
  TenantsSpec spec;
};

// Derives the tenants of `jobs` over the pool's `capacity` (at most one entry per model; models
// with no GPUs left out) by the rule above. Fails, with the Error's field "jobs", when there are
// no jobs, the jobs have no GPU time or their GPU time overflows 64-bit GPU-seconds; "pool" when
// there is no capacity, a capacity is out of range or a model is given twice; "org" when `org`
// is empty.
Result<TraceTenants> derive_tenants_from_trace(std::span<const PhillyJob> jobs,
                                               std::span<const ModelCapacity> capacity,
                                               std::string_view org = "philly");

// `spec` as a tenants file that read_tenants_yaml reads back to the same spec, with the model
// names of `models` (which must know every model the spec names). Each line of `comment` is
// written first as a "# " comment line. Names are written double-quoted, GPU figures with up to
// 3 decimals; limits that are absent stay absent, and every tenant's weight is written.
std::string write_tenants_yaml(const TenantsSpec& spec, const GpuModelCatalog& models,
                               std::string_view comment);

}  // namespace tidepool
