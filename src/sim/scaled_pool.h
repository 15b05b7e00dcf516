// What-if pools for capacity planning (`tidepool plan capacity`): a template pool grown or shrunk
// in whole nodes, the tenants' quotas scaled with it, and a workload's load grown by compressing
// its submit times.
//
// scale_cluster(pattern, n): n nodes laid out like the template, leaf by leaf:
//   - node i (0-based, in order) has the shape of the template's node i mod N0 (N0 = the template's
//     node count): GPU model, GPUs, CPU, memory, NVLink domains. A uniform template gives n
//     identical nodes; a mixed one keeps its mix when n is a multiple of N0;
//   - leaves are filled in order; leaf k holds as many nodes as the template's k-th non-empty leaf
//     (cycling through them), the last leaf as many as are left;
//   - spines are filled in order; spine s holds as many leaves as the template's s-th spine with
//     non-empty leaves (cycling), with that spine's oversubscription;
//   - the site and its link speeds are the template's; the model catalog is the template's;
//   - names: spines "spine-<s>", leaves "leaf-<k>", nodes "node-<k>-<j>" (k, s, j 1-based, j
//     zero-padded to the digits of the leaf's node count, at least two).
//   With n = N0 the result has the template's shape (only names differ). philly-512 (8 leaves of
//   8 nodes of 8 P100 under one spine, 2:1) grown to 80 nodes: 10 leaves of 8 nodes, one spine
//   holding 8 leaves and a second holding 2, both 2:1.
//   Fails when n is not 1..kMaxClusterNodes or the template has no nodes.
//
// scale_tenants(spec, from, to): every tenant keeps its share of each GPU model. from[m] and to[m]
// are the GPUs of model m in the template and in the scaled pool; a model with from[m] == 0, or
// not covered by the spans, is left unchanged. Per model, with f = to / from:
//   - guarantees: g x f rounded down, then the remaining milli-GPUs (the sum of guarantees must be
//     floor(sum g x f)) go one each to the largest remainders, ties to the earlier tenant in file
//     order (largest-remainder rounding): guarantees that summed to the template's capacity sum to
//     the scaled one;
//   - borrowing limits: b x f rounded half up; lending limits: l x f rounded half up, at most the
//     tenant's scaled guarantee (an absent limit stays absent);
//   - org caps: the guarantee cap x f rounded up, at least the sum of the org's scaled tenant
//     guarantees; the borrowing and lending caps x f rounded half up.
//   Fails when a scaled figure would pass kMaxQuotaMilli.
//
// compress_submit_times(jobs, growth_ppm): the load grown by a factor 1 + g (g = growth_ppm /
// 10^6): every submit time t becomes floor(t / (1 + g)), so the same jobs arrive 1 + g times as
// fast (durations unchanged); the order of submits is kept. A deadline d becomes floor(d / (1 +
// g)), at least one second after the new submit. Fails for growth_ppm outside 0..kMaxGrowthPpm.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "config/cluster_file.h"
#include "core/error.h"
#include "core/tenants.h"
#include "sim/cluster_simulation.h"

namespace tidepool {

// The largest load growth accepted: 100 (the load 101 times the trace's).
inline constexpr std::int64_t kMaxGrowthPpm = 100'000'000;

// The template's shape repeated to `nodes` nodes, as described in the file comment.
Result<ClusterSpec> scale_cluster(const ClusterSpec& pattern, int nodes);

// GPUs of each model of `spec` (indexed by GpuModelId, sized to the catalog).
std::vector<std::int64_t> gpus_per_model(const ClusterSpec& spec);

// `spec` with its quotas scaled from `from` to `to` GPUs per model, as in the file comment.
Result<TenantsSpec> scale_tenants(const TenantsSpec& spec, std::span<const std::int64_t> from,
                                  std::span<const std::int64_t> to);

// Compresses the submit times of `jobs` for a load growth of growth_ppm / 10^6.
Result<void> compress_submit_times(std::vector<SimJob>& jobs, std::int64_t growth_ppm);

}  // namespace tidepool
