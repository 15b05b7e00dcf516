// Advice for one job from how its steps ran: the rule both the server (on the step times a job
// reports) and the simulator (on the efficiency model's step times) apply.
//
// Three kinds, each with the numbers behind it:
//
// 1. Gradient accumulation, when the all-reduce is bandwidth-bound and costs too much.
//    - Communication per step: step - compute when the job reports its compute time, else its
//      all-reduce time (compute is then step - all-reduce).
//    - The all-reduce's bus bandwidth, as nccl-tests define it: bytes x 2 (N-1)/N / time, against
//      the bandwidth of the slowest link of the job's placement (efficiency_model.h's
//      bottleneck). It is saturated at AdviceConfig::saturated_permille of the link or more.
//    - Advised when the communication share is above AdviceConfig::comm_share_target_permille and
//      the all-reduce is saturated (a faster all-reduce is then not to be had on this placement;
//      fewer all-reduces per sample are). Accumulating k micro-batches per all-reduce makes an
//      optimizer step k x compute + comm, so per micro-batch compute + comm / k; k is the least
//      that brings comm / (k x compute + comm) to the target or under, at most
//      AdviceConfig::max_accumulation_steps. The global batch grows k times: the job's
//      learning-rate schedule must allow it (said in the advice).
// 2. A compact placement, when the gang spans more than it needs: its ring crosses a slower
//    link than the most compact span for as many GPUs in this pool (ideal_ring_span). The step it
//    would have had keeps its compute and scales its communication by the efficiency model's
//    ratio of the two spans' all-reduce times for the job's bytes (the measured bytes when
//    reported, else the time alone decides: the ratio of the links' bandwidths).
// 3. Idle GPUs: GPUs of the job whose utilisation is at most
//    AdviceConfig::idle_utilization_percent, and has been for a window (GpuUse::low_for_window:
//    the server's idle-GPU alert is raised), so a job that just started is not told its GPUs
//    idle. The advice gives the mean utilisation of all the job's GPUs beside.
//
// Expected MFU after advice: MFU scales with the inverse of the time per micro-batch (the same
// work in less time), so mfu_after = mfu_now x now_us / expected_us (expected_gain_permille).
//
// Everything is integer microseconds, bytes and permille; nothing here reads a clock or a file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/efficiency_model.h"
#include "core/error.h"
#include "core/topology.h"

namespace tidepool {

struct AdviceConfig {
  // The communication share advice aims under: 10% of a step.
  int comm_share_target_permille = 100;
  // An all-reduce at 70% of its link's bandwidth or more is bandwidth-bound: nccl-tests' bus
  // bandwidth reaches about 70-90% of a link in practice.
  int saturated_permille = 700;
  // A GPU at or under 5% mean utilisation is idle.
  int idle_utilization_percent = 5;
  // Never advise accumulating more than 64 micro-batches per step.
  int max_accumulation_steps = 64;
};

// Checks each field (permille in 1..999, utilisation 0..100, steps >= 2), naming the first bad.
Result<void> validate(const AdviceConfig& config);

// How a job's steps ran: typical figures per step (the server takes medians of what the job
// reported; the simulator the model's step). Unknown figures are empty.
struct MeasuredSteps {
  int gpus = 0;                                 // ranks of its all-reduce (its GPUs)
  std::int64_t step_us = 0;                     // a whole step
  std::optional<std::int64_t> compute_us;       // of it, computing
  std::optional<std::int64_t> allreduce_us;     // of it, all-reducing
  std::optional<std::int64_t> allreduce_bytes;  // all-reduced per step
};

// Where the job runs, for the placement figures: its ring and the pool's links.
struct AdvicePlacement {
  RingSpan actual;
  RingSpan ideal;  // ideal_ring_span for as many GPUs
  LinkSpeeds links;
};

struct AccumulationAdvice {
  int steps = 0;                 // k micro-batches per all-reduce
  std::int64_t comm_us = 0;      // per step now
  std::int64_t compute_us = 0;   // per micro-batch
  std::int64_t now_us = 0;       // per micro-batch now (a step)
  std::int64_t expected_us = 0;  // per micro-batch with k: compute + comm / k, rounded up
  int comm_share_now_permille = 0;
  int comm_share_expected_permille = 0;  // comm / (k x compute + comm)
  int bus_permille_of_link = 0;          // the all-reduce's bus bandwidth over its link's
  std::int64_t bus_bytes_per_second = 0;
  Bottleneck link;
};

struct PlacementAdvice {
  RingSpan actual;
  RingSpan ideal;
  Bottleneck actual_link;
  Bottleneck ideal_link;
  std::int64_t now_us = 0;       // a step now
  std::int64_t expected_us = 0;  // a step on the compact span
};

// One GPU of a job: its latest utilisation, and whether it has been low for the idle-GPU
// window.
struct GpuUse {
  int utilization_percent = 0;
  bool low_for_window = false;
};

struct IdleAdvice {
  int idle_gpus = 0;
  int gpus = 0;
  int mean_utilization_percent = 0;  // over all the job's GPUs, rounded down
};

struct JobAdvice {
  std::optional<AccumulationAdvice> accumulate;
  std::optional<PlacementAdvice> compact;
  std::optional<IdleAdvice> idle;
  // Why there is no communication advice when there is none ("no step times reported", "the
  // communication share 4% is under the target 10%", ...), for a user asking.
  std::string comm_note;

  [[nodiscard]] bool empty() const { return !accumulate && !compact && !idle; }
};

// The advice for a job. `placement` is empty when its GPUs are not known (no placement advice,
// and no saturation check: then accumulation is advised on the share alone). `gpus` holds the
// use of each of its GPUs (empty: no idle advice).
JobAdvice advise_job(const MeasuredSteps& steps, const std::optional<AdvicePlacement>& placement,
                     std::span<const GpuUse> gpus, const AdviceConfig& config);

// expected / now as the gain in throughput, permille (1000: none; 1250: 25% more per second).
[[nodiscard]] std::int64_t expected_gain_permille(std::int64_t now_us, std::int64_t expected_us);

// One line per piece of advice, with its numbers, for `tidepool advise` and the dashboard.
std::vector<std::string> advice_lines(const JobAdvice& advice);

// The efficiency model's MFU (est_mfu) of a job now and after each advice, for the simulator:
// its steps are the model's steps on its span (compute, the all-reduce of its gradient bytes), the
// advice that of advise_job on them. `both` takes the compact placement, then accumulates there.
struct AdvisedMfu {
  double now = 0;
  double accumulate = 0;  // with the accumulation advice, where there is one
  double compact = 0;     // on the compact span, where placement advice is given
  double both = 0;
};

AdvisedMfu advised_mfu(const JobCommProfile& profile, const AdvicePlacement& placement,
                       const AdviceConfig& config);

}  // namespace tidepool
