// Step telemetry: how a training job's steps ran, as the job itself measured them.
//
// A job reports one StepSample per step (its tasks write them as lines of text, read by the agent:
// api/step_report.h has the protocol). The agent adds each task's samples into a StepStats and
// forwards it; the server merges those of all the tasks and runs of a job into one. A StepStats
// is bounded whatever the number of steps: the step times go into a fixed log-linear histogram
// (StepHistogram: 16 buckets per doubling, so a quantile is within 1/32, about 3%, of the true
// value), the other figures into sums. Merging is exact: merge(a, b) holds what adding all their
// samples into one would.
//
// What it tells (each empty when the samples do not say it):
//   - the step-time distribution: count, mean, p50 / p90 / p99, min and max;
//   - the communication share of a step, comm_share(): (step - compute) / step over the steps that
//     reported their compute time, when some did (communication is all that is not compute:
//     all-reduce, waiting for the slowest rank, data loading); else all-reduce time / step over
//     the steps that reported their all-reduce time;
//   - the all-reduce bandwidth, as nccl-tests define it: algorithm bandwidth = bytes / time, bus
//     bandwidth = bytes x 2 (N-1) / N / time for a ring of N ranks (what each link carries, to
//     compare with the link's speed);
//   - model FLOPs utilisation: the model FLOPs a step does (the job declares them: its spec's
//     model_flops_per_step) / (mean step time x peak FLOP/s of the GPUs it holds,
//     core/gpu_peak_flops.h).
//
// Times are integer microseconds, bytes integers; sums saturate at the int64 maximum instead of
// overflowing (about 292,000 years of steps). Nothing here reads a clock or a file.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

// The longest step a job may report: 10^12 us, about 11.6 days.
inline constexpr std::int64_t kMaxStepMicros = 1'000'000'000'000;
// The most bytes one step may all-reduce: 2^50 (1 PiB).
inline constexpr std::int64_t kMaxAllreduceBytes = std::int64_t{1} << 50;
// The highest step number: 2^62.
inline constexpr std::int64_t kMaxStepNumber = std::int64_t{1} << 62;

// One step as the job measured it.
struct StepSample {
  std::int64_t step = 0;                          // the step's number, 0..kMaxStepNumber
  std::int64_t step_us = 0;                       // its wall time, 0..kMaxStepMicros
  std::optional<std::int64_t> compute_us{};       // of it, computing: 0..step_us
  std::optional<std::int64_t> allreduce_us{};     // of it, all-reducing: 0..step_us
  std::optional<std::int64_t> allreduce_bytes{};  // all-reduced in it: 0..kMaxAllreduceBytes;
                                                  // only with allreduce_us

  friend bool operator==(const StepSample&, const StepSample&) = default;
};

// Whether `sample` holds the limits above; the error names the protocol's key ("compute_us").
Result<void> check_step_sample(const StepSample& sample);

// The step times: a fixed log-linear histogram. Values 0..31 us have a bucket each; above, each
// doubling [2^e, 2^(e+1)) is cut into 16 buckets of equal width, up to kMaxStepMicros
// (kBuckets buckets in all). Also the count, sum, min and max of the values.
class StepHistogram {
 public:
  static constexpr int kSubBuckets = 16;
  static constexpr int kBuckets = 590;  // bucket_of(kMaxStepMicros) + 1

  // The bucket of `us` (0..kMaxStepMicros) and the values a bucket holds, [low, high].
  [[nodiscard]] static int bucket_of(std::int64_t us);
  [[nodiscard]] static std::int64_t bucket_low(int bucket);
  [[nodiscard]] static std::int64_t bucket_high(int bucket);

  // Adds one value, 0..kMaxStepMicros (a programmer's error otherwise).
  void add(std::int64_t us);
  void merge(const StepHistogram& other);

  // A histogram from its parts, as the wire carries them (api/step_report.h): the non-empty
  // buckets as (bucket, count), buckets ascending and counts > 0, and the sum, min and max of the
  // values. Checks that they agree (min in the first bucket, max in the last, count x min <= sum <=
  // count x max); errors name "buckets", "min_us", "max_us" or "sum_us".
  static Result<StepHistogram> from_parts(std::span<const std::pair<int, std::int64_t>> buckets,
                                          std::int64_t sum_us, std::int64_t min_us,
                                          std::int64_t max_us);
  // The non-empty buckets, ascending.
  [[nodiscard]] std::vector<std::pair<int, std::int64_t>> buckets() const;

  [[nodiscard]] std::int64_t count() const { return count_; }
  [[nodiscard]] std::int64_t sum_us() const { return sum_us_; }
  [[nodiscard]] std::int64_t min_us() const { return min_us_; }  // 0 when empty
  [[nodiscard]] std::int64_t max_us() const { return max_us_; }
  // sum / count rounded to the nearest; 0 when empty.
  [[nodiscard]] std::int64_t mean_us() const;
  // The value of rank ceil(q x count) (q in [0, 1]; at least rank 1): the middle of its bucket,
  // kept within [min, max]. Exact for values under 32 us; within 1/32 of the value above. 0 when
  // empty.
  [[nodiscard]] std::int64_t quantile_us(double q) const;

  friend bool operator==(const StepHistogram&, const StepHistogram&) = default;

 private:
  std::vector<std::int64_t> counts_;  // empty, or kBuckets counts
  std::int64_t count_ = 0;
  std::int64_t sum_us_ = 0;
  std::int64_t min_us_ = 0;
  std::int64_t max_us_ = 0;
};

// Where a communication share comes from.
enum class CommShareSource : std::uint8_t {
  kComputeTime,    // (step - compute) / step
  kAllreduceTime,  // all-reduce / step
};
// "step_minus_compute", "allreduce"
const char* comm_share_source_name(CommShareSource source);

struct CommShare {
  double share = 0;  // 0..1
  CommShareSource source = CommShareSource::kComputeTime;
};

struct StepStats {
  StepHistogram steps;  // every step's time
  // The steps that reported their compute time: how many, their step times and compute times.
  std::int64_t compute_steps = 0;
  std::int64_t compute_step_us = 0;
  std::int64_t compute_us = 0;
  // The steps that reported their all-reduce time: how many, their step times, all-reduce times,
  // and the bytes of those that reported them too (allreduce_byte_steps of them).
  std::int64_t allreduce_steps = 0;
  std::int64_t allreduce_step_us = 0;
  std::int64_t allreduce_us = 0;
  std::int64_t allreduce_byte_steps = 0;
  std::int64_t allreduce_bytes = 0;
  std::int64_t last_step = -1;  // the highest step number reported; -1: none
  // Lines of the job's report that were refused (malformed, out of range, too long), counted by
  // whoever read them (the agent): not samples, but shown so that a job learns its lines are bad.
  std::int64_t refused_lines = 0;

  // Adds one sample (one check_step_sample accepts).
  void add(const StepSample& sample);
  void merge(const StepStats& other);
  [[nodiscard]] bool empty() const { return steps.count() == 0 && refused_lines == 0; }

  // See the file comment; empty without the steps it needs (or when their time is 0).
  [[nodiscard]] std::optional<CommShare> comm_share() const;
  // Mean compute and all-reduce time per step that reported it, rounded to the nearest.
  [[nodiscard]] std::optional<std::int64_t> mean_compute_us() const;
  [[nodiscard]] std::optional<std::int64_t> mean_allreduce_us() const;
  // Mean bytes per all-reduce: only when every step that timed its all-reduce gave its bytes.
  [[nodiscard]] std::optional<std::int64_t> mean_allreduce_bytes() const;
  // Bytes per second over the all-reduce time: algorithm bandwidth, and bus bandwidth for a ring
  // of `ranks` (>= 1; 0 for one rank). Empty without bytes for every timed all-reduce, or when
  // their time is 0.
  [[nodiscard]] std::optional<double> allreduce_alg_bytes_per_s() const;
  [[nodiscard]] std::optional<double> allreduce_bus_bytes_per_s(int ranks) const;
  // model_flops_per_step / (mean step time x peak_flops_per_s), both > 0; empty without steps or
  // when the mean step time is 0.
  [[nodiscard]] std::optional<double> mfu(double model_flops_per_step,
                                          double peak_flops_per_s) const;

  friend bool operator==(const StepStats&, const StepStats&) = default;
};

}  // namespace tidepool
