// The replay experiment: pods of a trace arrive at their creation time, wait in a queue until
// they fit, run for as long as they ran in the trace and leave. A discrete-event driver of the
// core on a virtual clock (integer seconds of trace time); no wall clock, no I/O, no threads.
//
// Rules:
//   - Every pod needs a creation time: it arrives then. A pod without one is an input error
//     (the run does not start). Its run time is deletion_time - scheduled_time when both exist
//     (the run the trace recorded), else deletion_time - creation_time; a pod without a deletion
//     time runs to the end of the replay. A deletion time before the scheduled time is an input
//     error.
//   - The replay spans [start, end]: start is the earliest creation time, end the latest creation
//     or deletion time. Events after `end` (finishes of pods that started late) are not run.
//   - Events are taken in time order; at equal times releases come before arrivals, and each kind
//     goes by pod index (the position in the input): a total order, so a run is reproducible.
//   - An arriving pod whose shape fits no node even when the pool is empty is rejected: counted,
//     never queued. Every other arrival joins a FIFO queue.
//   - After each event time's releases and arrivals, the queue is scanned in arrival order and
//     every pod that fits now is placed by the policy (no head-of-line blocking: a pod that does
//     not fit does not hold back those behind it). A placed pod starts now and releases its
//     resources (Pool::release) at start + run time. A run time of 0 finishes at the same instant,
//     after which the queue is scanned again.
//   - Random choices of the policy draw from one Rng seeded with `seed`. Equally good nodes are
//     ranked by the pool's own tie order (Pool::set_tie_order), which the replay leaves as given.
//   - Samples are taken at start, start + interval, ... up to end, and at end itself: a sample at
//     time t shows the pool after every event at or before t.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/fragmentation.h"
#include "core/ids.h"
#include "core/policies/placement_policy.h"
#include "core/pool.h"
#include "core/resources.h"
#include "sim/openb_trace.h"

namespace tidepool {

struct ReplaySettings {
  std::uint64_t seed = 42;
  Seconds sample_interval = 3600;  // virtual seconds between samples; must be positive
};

// The pool at one instant of virtual time.
struct ReplaySample {
  Seconds time = 0;
  std::int64_t allocated_milli_gpu = 0;
  MilliCpu allocated_milli_cpu = 0;
  double allocated_gpu_percent = 0;   // of the pool's GPU capacity
  double allocated_cpu_percent = 0;   // of the pool's CPU capacity
  double fragmented_gpu_percent = 0;  // FGD fragmentation summed over nodes, of GPU capacity
  int queued = 0;                     // pods waiting to start
  int running = 0;                    // pods holding resources
};

enum class PodOutcome {
  kStarted,   // placed at some point (it may have finished since)
  kWaiting,   // still queued at the end of the replay
  kRejected,  // fits no node even in an empty pool
};

// What happened to one pod.
struct ReplayPodResult {
  Seconds arrival = 0;
  PodOutcome outcome = PodOutcome::kWaiting;
  std::optional<Seconds> start;  // set when started
  std::optional<NodeId> node;    // where it started

  // Queueing delay, start - arrival; only for started pods.
  [[nodiscard]] std::optional<Seconds> delay() const {
    return start ? std::optional<Seconds>(*start - arrival) : std::nullopt;
  }
};

// Distribution of queueing delays. Percentiles are nearest-rank: the smallest delay that at
// least p% of the delays do not exceed. All zero when count is 0.
struct DelayStats {
  int count = 0;
  Seconds p50 = 0;
  Seconds p90 = 0;
  Seconds p95 = 0;
  Seconds p99 = 0;
  Seconds max = 0;
  double mean = 0;
};

struct ReplayRun {
  Seconds start_time = 0;
  Seconds end_time = 0;
  std::vector<ReplaySample> samples;  // in time order
  std::vector<ReplayPodResult> pods;  // in input order
  // Every pod arrives: the replay ends at the last arrival or later.
  int arrived = 0;
  int started = 0;
  int waiting_at_end = 0;           // arrived, fits an empty pool, never started
  int rejected = 0;                 // fits no node even in an empty pool
  DelayStats delay;                 // over started pods
  double gpu_hours_allocated = 0;   // integral of allocated GPUs over [start, end], in GPU-hours
  double mean_gpu_percent = 0;      // time average of allocated GPU % over [start, end]
  double mean_cpu_percent = 0;      // time average of allocated CPU % over [start, end]
  std::optional<Pool> pool_at_end;  // the pool after the last event (set by run_replay)
};

// Replays `pods` on a copy of `pool` (normally empty) with `policy`. `profile` is the workload
// the fragmentation measure weighs against. Fails, before any event, on a pod without a creation
// time, a deletion before the scheduled time or a non-positive sample interval; fails if the
// policy proposes an assignment the pool refuses (a policy bug).
Result<ReplayRun> run_replay(Pool pool, std::span<const PodRecord> pods, PlacementPolicy& policy,
                             const WorkloadProfile& profile, const ReplaySettings& settings);

// The nearest-rank `percent` percentile (1..100) of `sorted` (ascending, not empty).
Seconds nearest_rank_percentile(std::span<const Seconds> sorted, int percent);

// Percentiles, maximum and mean of `delays` (any order).
DelayStats delay_stats(std::vector<Seconds> delays);

}  // namespace tidepool
