#include "core/runtime_predictor.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace tidepool {
namespace {

Result<void> check_gpus(int gpus) {
  if (gpus < 1 || gpus > kMaxPredictorGpus) {
    return fail("gpus", "must be 1.." + std::to_string(kMaxPredictorGpus) + ", got " +
                            std::to_string(gpus));
  }
  return {};
}

Result<void> check_runtime(std::string field, Seconds value, Seconds min) {
  if (value < min || value > kMaxPredictedRuntime) {
    return fail(std::move(field), "must be " + std::to_string(min) + ".." +
                                      std::to_string(kMaxPredictedRuntime) + " seconds, got " +
                                      std::to_string(value));
  }
  return {};
}

Result<void> check_estimate(const std::optional<Seconds>& estimate) {
  if (!estimate) return {};
  return check_runtime("estimate", *estimate, 1);
}

// Median of `values` (reordered): the mean of the two middle ones, rounded down, when even.
Seconds median_of(std::vector<Seconds> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const Seconds upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const Seconds lower = *std::max_element(values.begin(), values.begin() + mid);
  return lower + (upper - lower) / 2;
}

Seconds rounded_mean(std::int64_t total, std::int64_t count) { return (total + count / 2) / count; }

}  // namespace

int gpu_bucket(int gpus) {
  assert(gpus >= 1);
  if (gpus <= 1) return 0;
  if (gpus <= 4) return 1;
  if (gpus <= 8) return 2;
  if (gpus <= 32) return 3;
  return 4;
}

std::string_view to_string(PredictionRule rule) {
  switch (rule) {
    case PredictionRule::kTenantAndGpuBucket:
      return "tenant+gpus";
    case PredictionRule::kTenant:
      return "tenant";
    case PredictionRule::kGpuBucket:
      return "gpus";
    case PredictionRule::kPool:
      return "pool";
    case PredictionRule::kDefault:
      return "default";
  }
  return "unknown";
}

void RuntimePredictor::Window::push(Seconds runtime, int capacity) {
  if (runtimes.size() < static_cast<std::size_t>(capacity)) {
    runtimes.push_back(runtime);
    return;
  }
  runtimes[next] = runtime;  // overwrite the oldest
  next = (next + 1) % runtimes.size();
}

RuntimePredictor::RuntimePredictor() : RuntimePredictor(RuntimePredictorConfig{}) {}

Result<RuntimePredictor> RuntimePredictor::create(const RuntimePredictorConfig& config) {
  if (config.window < 1 || config.window > 1'000'000) {
    return fail("window", "must be 1..1000000, got " + std::to_string(config.window));
  }
  if (config.min_samples < 1 || config.min_samples > config.window) {
    return fail("min_samples", "must be 1..window (" + std::to_string(config.window) + "), got " +
                                   std::to_string(config.min_samples));
  }
  if (config.quantile_permille < 0 || config.quantile_permille > 1000) {
    return fail("quantile_permille",
                "must be 0..1000, got " + std::to_string(config.quantile_permille));
  }
  if (auto ok = check_runtime("default_runtime", config.default_runtime, 1); !ok) {
    return std::unexpected(ok.error());
  }
  return RuntimePredictor(config);
}

Result<void> RuntimePredictor::observe(const RuntimeObservation& job) {
  if (auto ok = check_gpus(job.gpus); !ok) return ok;
  if (auto ok = check_estimate(job.estimate); !ok) return ok;
  if (auto ok = check_runtime("actual", job.actual, 0); !ok) return ok;
  const int bucket = gpu_bucket(job.gpus);
  TenantHistory& tenant = tenants_[job.tenant];
  tenant.by_bucket[bucket].push(job.actual, config_.window);
  tenant.all.push(job.actual, config_.window);
  buckets_[bucket].push(job.actual, config_.window);
  pool_.push(job.actual, config_.window);
  ++observed_;
  return {};
}

Seconds RuntimePredictor::quantile(const Window& window) const {
  std::vector<Seconds> sorted = window.runtimes;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t rank =
      (static_cast<std::size_t>(config_.quantile_permille) * (sorted.size() - 1)) / 1000;
  return sorted[rank];
}

Result<Prediction> RuntimePredictor::predict(const RuntimeQuery& job) const {
  if (auto ok = check_gpus(job.gpus); !ok) return std::unexpected(ok.error());
  if (auto ok = check_estimate(job.estimate); !ok) return std::unexpected(ok.error());
  const int bucket = gpu_bucket(job.gpus);
  const auto usable = [&](const Window& w) {
    return w.runtimes.size() >= static_cast<std::size_t>(config_.min_samples);
  };

  Prediction prediction{.runtime = config_.default_runtime, .rule = PredictionRule::kDefault};
  const auto tenant = tenants_.find(job.tenant);
  if (tenant != tenants_.end() && usable(tenant->second.by_bucket[bucket])) {
    prediction = {quantile(tenant->second.by_bucket[bucket]), PredictionRule::kTenantAndGpuBucket};
  } else if (tenant != tenants_.end() && usable(tenant->second.all)) {
    prediction = {quantile(tenant->second.all), PredictionRule::kTenant};
  } else if (usable(buckets_[bucket])) {
    prediction = {quantile(buckets_[bucket]), PredictionRule::kGpuBucket};
  } else if (usable(pool_)) {
    prediction = {quantile(pool_), PredictionRule::kPool};
  }

  // With no history the user's estimate beats a blind default; otherwise it caps what we learned.
  if (job.estimate &&
      (prediction.rule == PredictionRule::kDefault || *job.estimate < prediction.runtime)) {
    prediction.runtime = *job.estimate;
    prediction.from_estimate = true;
  }
  return prediction;
}

Result<void> TenantMeanBaseline::observe(TenantId tenant, Seconds actual) {
  if (auto ok = check_runtime("actual", actual, 0); !ok) return ok;
  Sum& sum = tenants_[tenant];
  sum.total += actual;
  ++sum.count;
  pool_.total += actual;
  ++pool_.count;
  return {};
}

Seconds TenantMeanBaseline::predict(TenantId tenant) const {
  if (const auto it = tenants_.find(tenant); it != tenants_.end() && it->second.count > 0) {
    return rounded_mean(it->second.total, it->second.count);
  }
  if (pool_.count > 0) return rounded_mean(pool_.total, pool_.count);
  return default_runtime_;
}

void PredictorErrors::record(Seconds predicted, Seconds baseline, Seconds actual) {
  assert(predicted >= 0 && predicted <= kMaxPredictedRuntime);
  assert(baseline >= 0 && baseline <= kMaxPredictedRuntime);
  assert(actual >= 0 && actual <= kMaxPredictedRuntime);
  predictor_abs_errors_.push_back(predicted > actual ? predicted - actual : actual - predicted);
  baseline_abs_errors_.push_back(baseline > actual ? baseline - actual : actual - baseline);
}

Seconds PredictorErrors::median_abs_error() const { return median_of(predictor_abs_errors_); }

Seconds PredictorErrors::baseline_median_abs_error() const {
  return median_of(baseline_abs_errors_);
}

}  // namespace tidepool
