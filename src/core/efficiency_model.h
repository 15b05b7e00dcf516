// The efficiency model: how much a data-parallel job slows down because of where its GPUs are.
//
// Model
//   Each step of a data-parallel job computes for `compute_us` on every GPU and then all-reduces
//   its gradients (`gradient_bytes`) with a ring all-reduce over its N GPUs; the two phases do not
//   overlap (a pessimistic, simple choice). A ring all-reduce moves 2 (N-1)/N x bytes through
//   every link of the ring and so runs at the speed of the slowest link it crosses:
//
//     comm_us = 2 (N-1)/N x bytes x 8 / bottleneck bandwidth  +  2 (N-1) x kRingHopLatencyUs
//
//   rounded up to whole microseconds. A job on one GPU (or none) does not communicate.
//
// The bottleneck link, from the ring's span (LinkSpeeds, in Gbit/s):
//   - GPUs of one NVLink domain share the domain:     nvlink_gbps (per GPU);
//   - NVLink domains of one node are joined by PCIe:  pcie_gbps (per GPU), if a node of the ring
//     holds its GPUs in more than one domain (nvlink_domains > nodes);
//   - nodes are joined through their NIC and leaf:    leaf_gbps (per node), if nodes > 1;
//   - leaf switches are joined through the spine:     spine_gbps / oversubscription, if leaves > 1,
//     with the largest oversubscription among the spines the ring's leaves hang from.
//   The bottleneck is the slowest of the links crossed (an NVLink domain is crossed when some
//   domain holds two or more of the ring's GPUs). A flat ring enters and leaves each node once, so
//   a node's NIC carries one ring link's traffic, like a GPU's NVLink or PCIe link.
//
// Ideal placement and slowdown
//   Trace durations are taken as runtimes under the ideal placement: the most compact span for N
//   GPUs in the pool's shape (ideal_ring_span). The slowdown of an actual placement is
//   step time (actual) / step time (ideal), floored at 1 (with unusual link figures, e.g. a NIC
//   faster than PCIe, a spread placement can be modelled faster than the compact one; the trace's
//   duration is still the best the job gets). Runtime under the actual placement = trace duration
//   x slowdown (scale_runtime, in exact integer arithmetic).
//
// Report
//   comm share = comm / (compute + comm) of the actual step; estimated MFU = kMfuWithoutComm x
//   compute / (compute + comm), so 0 < MFU <= kMfuWithoutComm.
//
// Per-job parameters are drawn from an Rng (draw_comm_profile), deterministically from a seed and
// a job key when drawn through the (seed, job_key) overload; their distributions are documented at
// the constants below. All functions are pure: they read the pool and change nothing.
#pragma once

#include <cstdint>
#include <span>

#include "core/gang_placement.h"
#include "core/pool.h"
#include "core/rng.h"
#include "core/topology.h"

namespace tidepool {

// --- Model constants (all in one place) ---

// Gradient bytes all-reduced per step: log-uniform over [kMinGradientBytes, kMaxGradientBytes]
// (100 MB .. 20 GB, i.e. fp32 models of 25 M .. 5 B parameters), on a grid of 1024 steps per
// doubling.
inline constexpr std::int64_t kMinGradientBytes = 100'000'000;
inline constexpr std::int64_t kMaxGradientBytes = 20'000'000'000;
// Compute time per step at the ideal placement, in microseconds: uniform integer over
// [kMinComputeUs, kMaxComputeUs] (0.1 s .. 2 s).
inline constexpr std::int64_t kMinComputeUs = 100'000;
inline constexpr std::int64_t kMaxComputeUs = 2'000'000;
// Latency of one ring step (a send to the next GPU); a ring all-reduce takes 2 (N-1) steps.
inline constexpr std::int64_t kRingHopLatencyUs = 5;
// Model FLOPs utilisation a job would reach with no communication at all.
inline constexpr double kMfuWithoutComm = 0.55;

// --- Per-job parameters ---

struct JobCommProfile {
  std::int64_t gradient_bytes = 0;  // all-reduced per step
  std::int64_t compute_us = 0;      // per step, at any placement (compute does not depend on it)
};

// Draws one profile from `rng` (two or more draws, see the constants above).
JobCommProfile draw_comm_profile(Rng& rng);

// The profile of job `job_key` in a run seeded with `seed`: the same pair always gives the same
// profile, independent of the order in which jobs are asked for; distinct keys under one seed
// draw from distinct generator seeds.
JobCommProfile draw_comm_profile(std::uint64_t seed, std::uint64_t job_key);

// --- Span and bottleneck ---

// The GPUs of a ring and how far they reach.
struct RingSpan {
  int gpus = 0;
  GangSpan span;
  // The largest SpineSpec::oversubscription among the spines of the leaves used (1 if none).
  int oversubscription = 1;

  friend bool operator==(const RingSpan&, const RingSpan&) = default;
};

// The ring of `assignments` on `pool`: the GPUs they hold (counted once per GPU bit) and their
// span.
RingSpan ring_span(const Pool& pool, std::span<const Assignment> assignments);

// The most compact span for `gpus` GPUs in the pool's shape: one NVLink domain if the pool's
// largest domain holds them; else one node of the largest size, ceil(N / largest domain) domains;
// else one leaf (largest leaf in GPUs), ceil(N / largest node) nodes; else one spine, ceil(N /
// largest leaf) leaves, with the smallest oversubscription among the spines that hold N GPUs; else
// ceil(N / largest spine) spines with the largest oversubscription among spines with GPUs. Domain
// counts are at least the node counts. The pool's free capacity plays no part.
RingSpan ideal_ring_span(const Pool& pool, int gpus);

enum class CommLink : std::uint8_t { kNone, kNvlink, kPcie, kLeaf, kSpine };

// "none", "nvlink", "pcie", "leaf", "spine"
const char* comm_link_name(CommLink link);

// The slowest link a ring crosses. Its bandwidth is gbps / oversubscription Gbit/s (the divisor
// is 1 except for the spine), kept as a fraction so that it stays exact.
struct Bottleneck {
  CommLink link = CommLink::kNone;
  int gbps = 0;
  int oversubscription = 1;

  friend bool operator==(const Bottleneck&, const Bottleneck&) = default;
};

// kNone for rings of fewer than two GPUs.
Bottleneck bottleneck(const LinkSpeeds& links, const RingSpan& ring);

// --- Step time ---

struct StepTime {
  std::int64_t compute_us = 0;
  std::int64_t bandwidth_us = 0;  // 2 (N-1)/N x bytes over the bottleneck, rounded up
  std::int64_t latency_us = 0;    // 2 (N-1) x kRingHopLatencyUs

  [[nodiscard]] std::int64_t comm_us() const { return bandwidth_us + latency_us; }
  [[nodiscard]] std::int64_t total_us() const { return compute_us + comm_us(); }
  // comm / (compute + comm), in [0, 1]; 0 for an empty step.
  [[nodiscard]] double comm_share() const;
  // kMfuWithoutComm x compute / (compute + comm), in (0, kMfuWithoutComm] for a step that
  // computes.
  [[nodiscard]] double est_mfu() const;
};

StepTime step_time(const JobCommProfile& profile, const LinkSpeeds& links, const RingSpan& ring);

// --- Per-job report ---

struct PlacementEfficiency {
  StepTime actual;
  StepTime ideal;
  Bottleneck actual_bottleneck;
  Bottleneck ideal_bottleneck;

  // actual / ideal step time, floored at 1.
  [[nodiscard]] double slowdown() const;
  [[nodiscard]] double comm_share() const { return actual.comm_share(); }
  [[nodiscard]] double est_mfu() const { return actual.est_mfu(); }
};

// The efficiency of `profile` placed on `assignments` against the ideal span of as many GPUs.
PlacementEfficiency placement_efficiency(const JobCommProfile& profile, const Pool& pool,
                                         std::span<const Assignment> assignments);
// The same on spans already found: `actual` (ring_span) against `ideal` (ideal_ring_span).
PlacementEfficiency placement_efficiency(const JobCommProfile& profile, const LinkSpeeds& links,
                                         const RingSpan& actual, const RingSpan& ideal);

// `ideal_runtime` (any unit; the trace's duration) stretched by the slowdown, rounded up:
// ceil(ideal_runtime x actual total / ideal total), and never less than `ideal_runtime`.
std::int64_t scale_runtime(std::int64_t ideal_runtime, const PlacementEfficiency& efficiency);

}  // namespace tidepool
