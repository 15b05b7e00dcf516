// The search of `tidepool plan capacity`: the smallest pool, in whole nodes of a template pool,
// on which a workload's p95 queueing time stays under a target, each candidate simulated with
// the scheduler's own code (cluster_simulation.h), several at once on threads of their own (one
// Scheduler each: the core stays single-threaded).
//
// Candidate pools are the template grown or shrunk in whole nodes (scale_cluster in
// scaled_pool.h: the template's node shapes, leaf sizes and leaves per spine repeated), with the
// tenants' quotas scaled to keep each tenant's share (scale_tenants). A probe meets the target
// when every job started and the p95 queueing time of the finished jobs is at most the target.
// The search assumes that queueing falls as the pool grows; where it does not, the answer still
// meets the target and a pool one node smaller was probed and misses it, but a smaller pool may
// meet it too:
//   1. bracket: the start size and, with threads >= 2, twice it, ... (one probe per thread);
//      while every probe misses, the next round doubles the largest (capped at max_nodes); while
//      every probe meets, the next round halves the smallest;
//   2. bisect: with `hi` the smallest size probed that meets and `lo` the largest size below it
//      probed that misses, each round splits (lo, hi) into threads + 1 equal parts in whole nodes
//      and probes the inner points in parallel, until hi = lo + 1 node (or hi is one node).
// The answer is hi; lo is the largest size probed that misses. When even max_nodes misses the
// search stops there without an answer. Results do not depend on the thread count, only the
// probed sizes do.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "config/cluster_file.h"
#include "config/tenants_file.h"
#include "core/error.h"
#include "core/scheduler.h"
#include "sim/cluster_simulation.h"

namespace tidepool {

// One simulated candidate pool.
struct CapacityProbe {
  int round = 0;
  int nodes = 0;
  std::int64_t gpus = 0;
  int leaves = 0;
  std::string shape;  // "80 nodes of 8 P100 on 10 leaves"
  SimSummary summary;
  bool meets = false;
};

// What every probe runs; read-only, shared by the probes' threads.
struct CapacityInputs {
  const ClusterSpec* pattern = nullptr;
  const TenantsSpec* tenants = nullptr;
  std::vector<std::int64_t> template_gpus;  // per model
  const SchedulerConfig* config = nullptr;
  std::span<const SimJob> workload;
  Seconds target = 0;  // p95 queueing time to stay under
};

// The search's result: the probes in order, the answer and the largest miss below it (pointers
// into `probes`, or null).
struct CapacitySearch {
  std::vector<CapacityProbe> probes;
  const CapacityProbe* answer = nullptr;
  const CapacityProbe* below = nullptr;
  int max_nodes = 0;
  double wall_seconds = 0;
};

// Called after each probe, in order (for progress).
using ProbeDone = std::function<void(const CapacityProbe&)>;

// Searches from `start` nodes up to `max_nodes` (1 <= start <= max_nodes), `threads` probes at a
// time (>= 1).
Result<CapacitySearch> search_capacity(const CapacityInputs& in, int start, int max_nodes,
                                       int threads, const ProbeDone& done);

// The sizes the next round probes given what is known (nodes -> meets), or none when the search
// is over.
std::vector<int> next_probe_sizes(const std::map<int, bool>& known, int max_nodes, int threads);

// GPUs of the template's first `nodes` nodes repeated (scale_cluster's node i has the shape of
// template node i mod N0).
std::int64_t gpus_of_scaled(const ClusterSpec& pattern, std::int64_t nodes);

// "80 nodes of 8 P100 on 10 leaves"; a mixed pool lists its node kinds ("4 x 8 H100 + 2 x 4 A100").
std::string pool_shape_text(const ClusterSpec& spec);

}  // namespace tidepool
