// Runtime prediction for backfill, learned online from finished jobs, and the bookkeeping that
// reports how good the predictions were.
//
// The method (RuntimePredictor):
//   - Every finished job adds its actual runtime to four bounded windows of the most recent
//     runtimes (config.window, default 64): its (tenant, GPU bucket), its tenant, its GPU bucket
//     and the whole pool. GPU buckets are 1, 2-4, 5-8, 9-32 and 33+ GPUs: in a tenant, jobs of
//     one size class tend to be the same kind of work (debugging on one GPU, a training run on
//     eight), and their runtimes differ by orders of magnitude between classes.
//   - A prediction is a quantile (config.quantile_permille, default 500: the median) of the
//     most specific window holding at least config.min_samples runtimes, in this order:
//     (tenant, bucket), tenant, bucket, pool. With no such window it is config.default_runtime
//     (one hour). The quantile is the lower nearest rank: element floor(q * (n - 1) / 1000) of
//     the n runtimes sorted ascending, so it is always a runtime that was seen. A quantile is
//     robust to the few jobs that run for days or fail at once; a bounded window follows a
//     tenant whose work changes.
//   - A user's runtime estimate, when given, caps the prediction: min(estimate, learned), and
//     with no history (the default rule) the estimate itself. Users overestimate far more often
//     than they underestimate, and where the estimate is enforced as a runtime limit the job
//     cannot run longer; a learned figure below the estimate is the better guess.
//   The estimate of a finished job is validated but not used by this rule.
//
// The baseline (TenantMeanBaseline): the mean of all of the tenant's previous actual runtimes,
// the mean of all previous runtimes when the tenant has none, config.default_runtime when there
// are none at all. The simulator reports both against the truth with PredictorErrors.
//
// Everything is integer seconds and deterministic: histories are kept in id order, windows in
// arrival order, and no floating point is involved. These are value types; they own no threads
// and are not synchronised.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ids.h"
#include "core/resources.h"

namespace tidepool {

// Bounds on what a predictor accepts, so that sums of runtimes never overflow: runtimes and
// estimates up to 100 years, jobs up to a million GPUs.
inline constexpr Seconds kMaxPredictedRuntime = Seconds{100} * 365 * 24 * 3600;
inline constexpr int kMaxPredictorGpus = 1'000'000;
inline constexpr Seconds kDefaultPredictedRuntime = 3600;

// GPU-count classes: 1, 2-4, 5-8, 9-32, 33+.
inline constexpr int kGpuBuckets = 5;
// The bucket (0 .. kGpuBuckets - 1) of a job of `gpus` GPUs; `gpus` must be at least 1.
[[nodiscard]] int gpu_bucket(int gpus);

// Which history produced a prediction, most specific first.
enum class PredictionRule : std::uint8_t {
  kTenantAndGpuBucket,  // the tenant's jobs of the same GPU bucket
  kTenant,              // all of the tenant's jobs
  kGpuBucket,           // all tenants' jobs of the same GPU bucket
  kPool,                // all jobs
  kDefault,             // no history: the configured default, or the user's estimate
};
[[nodiscard]] std::string_view to_string(PredictionRule rule);

struct Prediction {
  Seconds runtime = 0;
  PredictionRule rule = PredictionRule::kDefault;
  // True when the user's estimate was below the learned figure (or there was no history) and
  // was used as the prediction.
  bool from_estimate = false;
};

struct RuntimePredictorConfig {
  int window = 64;              // runtimes kept per window, 1 .. 1'000'000
  int min_samples = 3;          // a window is used from this many runtimes on, 1 .. window
  int quantile_permille = 500;  // 0 = minimum, 500 = (lower) median, 1000 = maximum
  Seconds default_runtime = kDefaultPredictedRuntime;  // 1 .. kMaxPredictedRuntime
};

// A job to predict: at submission, or when the scheduler plans a backfill.
struct RuntimeQuery {
  TenantId tenant{};
  int gpus = 1;  // 1 .. kMaxPredictorGpus
  // The user's estimate, 1 .. kMaxPredictedRuntime; absent: none.
  std::optional<Seconds> estimate = std::nullopt;
};

// A finished job.
struct RuntimeObservation {
  TenantId tenant{};
  int gpus = 1;                                    // 1 .. kMaxPredictorGpus
  std::optional<Seconds> estimate = std::nullopt;  // 1 .. kMaxPredictedRuntime; absent: none
  Seconds actual = 0;                              // 0 .. kMaxPredictedRuntime
};

class RuntimePredictor {
 public:
  // A predictor with the default configuration.
  RuntimePredictor();
  // Fails when a configuration field is out of its range (the error names the field).
  [[nodiscard]] static Result<RuntimePredictor> create(const RuntimePredictorConfig& config);

  // Learns from a finished job. Fails, learning nothing, when a field is out of its range.
  [[nodiscard]] Result<void> observe(const RuntimeObservation& job);

  // Predicts the runtime of a job from what has been observed so far. Fails when a field is out
  // of its range. Cost: O(window log window).
  [[nodiscard]] Result<Prediction> predict(const RuntimeQuery& job) const;

  [[nodiscard]] const RuntimePredictorConfig& config() const { return config_; }
  // Jobs observed so far.
  [[nodiscard]] std::int64_t observed() const { return observed_; }

 private:
  // The most recent runtimes, at most `capacity`, in a ring.
  struct Window {
    std::vector<Seconds> runtimes;
    std::size_t next = 0;  // where the next runtime goes once the ring is full
    void push(Seconds runtime, int capacity);
  };
  struct TenantHistory {
    Window all;
    std::array<Window, kGpuBuckets> by_bucket;
  };

  explicit RuntimePredictor(const RuntimePredictorConfig& config) : config_(config) {}
  [[nodiscard]] Seconds quantile(const Window& window) const;

  RuntimePredictorConfig config_;
  std::map<TenantId, TenantHistory> tenants_;
  std::array<Window, kGpuBuckets> buckets_;
  Window pool_;
  std::int64_t observed_ = 0;
};

// The baseline to beat: a tenant's historical mean runtime (rounded to the nearest second, halves
// up), the pool's mean when the tenant has no history, `default_runtime` when nothing is known.
class TenantMeanBaseline {
 public:
  explicit TenantMeanBaseline(Seconds default_runtime = kDefaultPredictedRuntime)
      : default_runtime_(default_runtime) {}

  // Fails, learning nothing, when `actual` is outside 0 .. kMaxPredictedRuntime.
  [[nodiscard]] Result<void> observe(TenantId tenant, Seconds actual);
  [[nodiscard]] Seconds predict(TenantId tenant) const;

 private:
  struct Sum {
    std::int64_t total = 0;
    std::int64_t count = 0;
  };
  Seconds default_runtime_;
  std::map<TenantId, Sum> tenants_;
  Sum pool_;
};

// Prediction errors gathered as jobs finish: for each job, the prediction made at its submission
// by the predictor and by the baseline, against its actual runtime. Medians of an even number of
// errors are the mean of the two middle ones, rounded down; with no jobs they are 0.
class PredictorErrors {
 public:
  // All three in 0 .. kMaxPredictedRuntime (as the predictors produce them).
  void record(Seconds predicted, Seconds baseline, Seconds actual);

  [[nodiscard]] std::int64_t count() const {
    return static_cast<std::int64_t>(predictor_abs_errors_.size());
  }
  // Median of |predicted - actual|, seconds.
  [[nodiscard]] Seconds median_abs_error() const;
  // Median of |baseline - actual|, seconds.
  [[nodiscard]] Seconds baseline_median_abs_error() const;

 private:
  std::vector<Seconds> predictor_abs_errors_;
  std::vector<Seconds> baseline_abs_errors_;
};

}  // namespace tidepool
