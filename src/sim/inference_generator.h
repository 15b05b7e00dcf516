// A seeded generator of a diurnal inference service: a replica count that follows a day/night
// curve, turned into one-GPU replicas to run beside a training trace.
//
// Model. Sim time is cut into steps [k*step, (k+1)*step) for integer k; the count is constant
// within a step and is that of the step's start s = k*step:
//
//   tod  = (s + day_offset) mod 86400                                        (floor modulo)
//   base = trough_gpus                                            if tod outside [day_start,
//   day_end)
//        = round(trough + (peak - trough) * sin(pi * (tod - day_start) / (day_end - day_start)))
//   u    = a uniform integer in [-jitter_permille, +jitter_permille], drawn from an Rng seeded
//          from (seed, k) alone, so a step's count does not depend on which steps were asked first
//   count = clamp(round(base * (1000 + u) / 1000), 0, peak_gpus)        (rounding: halves up)
//
// With jitter 0 the count is the curve itself: trough at night, peak_gpus in the middle of the
// day window. The sine goes through the C library (std::sin); it is only used in a comparison to
// the nearest integer, which different libraries' last-bit differences could only flip at an
// exact tie.
//
// Replicas. The steps are walked from `start` to `end`; the first interval is [start, the next
// step boundary). When the count rises by n at time b (b = start or a boundary), n replicas are
// submitted at b; when it falls by n, the n most recently submitted live replicas end at b
// (LIFO). Replicas alive at `end` end at `end`. Every replica has a positive duration, and the
// replicas' total GPU-seconds equal the integral of the count over [start, end).
//
// Output order: by submit time ascending, then by duration descending. Replicas equal in both are
// identical, so this is a total order and the output is fully determined by the spec.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

// Bounds that keep every figure and the output size in range.
inline constexpr std::int64_t kMaxInferenceGpus = 1'000'000;
inline constexpr Seconds kMaxInferenceTime = 1'000'000'000'000;  // about 31,700 years
inline constexpr std::int64_t kMaxInferenceSteps = 10'000'000;   // steps in [start, end)

struct InferenceServiceSpec {
  std::int64_t peak_gpus = 64;   // replicas at the top of the day curve (1 GPU each), 1..max
  std::int64_t trough_gpus = 8;  // replicas at night, 0..peak_gpus
  Seconds day_start = 8 * 3600;  // seconds of day; day_start < day_end <= 86400, day_start >= 0
  Seconds day_end = 24 * 3600;
  Seconds step = 600;         // the count changes only at multiples of step, 1..86400
  Seconds start = 0;          // the horizon [start, end): 0 <= start < end <= kMaxInferenceTime,
  Seconds end = 0;            //   spanning at most kMaxInferenceSteps steps
  Seconds day_offset = 0;     // time of day of sim time 0, 0..86399
  int jitter_permille = 100;  // 0..1000
  std::uint64_t seed = 42;
};

// Checks `spec` and returns it unchanged, or an error naming the offending field ("peak_gpus",
// "trough_gpus", "day_start", "day_end", "step", "start", "end", "day_offset",
// "jitter_permille").
Result<InferenceServiceSpec> validate(const InferenceServiceSpec& spec);

// One replica: 1 GPU, running [submit, submit + duration).
struct InferenceReplica {
  Seconds submit = 0;
  Seconds duration = 0;  // > 0

  friend bool operator==(const InferenceReplica&, const InferenceReplica&) = default;
};

// The count generated for the step holding sim time t (jittered and clamped, see the file
// comment); defined for any t, also outside [start, end). `spec` must be valid.
std::int64_t replica_target(const InferenceServiceSpec& spec, Seconds t);

// validate(spec), then the replicas over [start, end) in the order of the file comment.
Result<std::vector<InferenceReplica>> generate_inference_replicas(const InferenceServiceSpec& spec);

}  // namespace tidepool
