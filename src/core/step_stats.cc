#include "core/step_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace tidepool {
namespace {

constexpr std::int64_t kStepSumMax = std::numeric_limits<std::int64_t>::max();
// Values below this have a bucket each (2 x kSubBuckets).
constexpr std::int64_t kStepExactBelow = 2 * StepHistogram::kSubBuckets;
constexpr int kStepSubBits = 4;  // log2(kSubBuckets)

// Sums of figures that are each >= 0: saturate rather than overflow.
std::int64_t add_step_figures(std::int64_t a, std::int64_t b) {
  return a > kStepSumMax - b ? kStepSumMax : a + b;
}

std::int64_t step_ratio_rounded(std::int64_t sum, std::int64_t count) {
  return static_cast<std::int64_t>(
      std::llround(static_cast<double>(sum) / static_cast<double>(count)));
}

}  // namespace

Result<void> check_step_sample(const StepSample& s) {
  if (s.step < 0 || s.step > kMaxStepNumber) {
    return fail("step", fmt::format("{} is out of range 0..{}", s.step, kMaxStepNumber));
  }
  if (s.step_us < 0 || s.step_us > kMaxStepMicros) {
    return fail("time_us", fmt::format("{} is out of range 0..{}", s.step_us, kMaxStepMicros));
  }
  for (auto [name, part] :
       {std::pair{"compute_us", s.compute_us}, std::pair{"allreduce_us", s.allreduce_us}}) {
    if (part && (*part < 0 || *part > s.step_us)) {
      return fail(name,
                  fmt::format("{} is out of range 0..{} (the step's time_us)", *part, s.step_us));
    }
  }
  if (s.allreduce_bytes) {
    if (*s.allreduce_bytes < 0 || *s.allreduce_bytes > kMaxAllreduceBytes) {
      return fail("allreduce_bytes",
                  fmt::format("{} is out of range 0..{}", *s.allreduce_bytes, kMaxAllreduceBytes));
    }
    if (!s.allreduce_us) return fail("allreduce_bytes", "is given without allreduce_us");
  }
  return {};
}

int StepHistogram::bucket_of(std::int64_t us) {
  if (us < kStepExactBelow) return static_cast<int>(us);
  const int e = std::bit_width(static_cast<std::uint64_t>(us)) - 1;  // >= kStepSubBits + 1
  const auto sub = static_cast<int>((us >> (e - kStepSubBits)) & (kSubBuckets - 1));
  return (e - kStepSubBits + 1) * kSubBuckets + sub;
}

std::int64_t StepHistogram::bucket_low(int bucket) {
  if (bucket < kStepExactBelow) return bucket;
  const int e = bucket / kSubBuckets + kStepSubBits - 1;
  const int sub = bucket % kSubBuckets;
  return std::int64_t{kSubBuckets + sub} << (e - kStepSubBits);
}

std::int64_t StepHistogram::bucket_high(int bucket) {
  if (bucket < kStepExactBelow) return bucket;
  const int e = bucket / kSubBuckets + kStepSubBits - 1;
  return bucket_low(bucket) + (std::int64_t{1} << (e - kStepSubBits)) - 1;
}

void StepHistogram::add(std::int64_t us) {
  assert(us >= 0 && us <= kMaxStepMicros);
  if (counts_.empty()) counts_.assign(kBuckets, 0);
  ++counts_[static_cast<std::size_t>(bucket_of(us))];
  min_us_ = count_ == 0 ? us : std::min(min_us_, us);
  max_us_ = count_ == 0 ? us : std::max(max_us_, us);
  ++count_;
  sum_us_ = add_step_figures(sum_us_, us);
}

void StepHistogram::merge(const StepHistogram& other) {
  if (other.count_ == 0) return;
  if (counts_.empty()) counts_.assign(kBuckets, 0);
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    counts_[b] = add_step_figures(counts_[b], other.counts_[b]);
  }
  min_us_ = count_ == 0 ? other.min_us_ : std::min(min_us_, other.min_us_);
  max_us_ = count_ == 0 ? other.max_us_ : std::max(max_us_, other.max_us_);
  count_ = add_step_figures(count_, other.count_);
  sum_us_ = add_step_figures(sum_us_, other.sum_us_);
}

Result<StepHistogram> StepHistogram::from_parts(
    std::span<const std::pair<int, std::int64_t>> buckets, std::int64_t sum_us, std::int64_t min_us,
    std::int64_t max_us) {
  StepHistogram h;
  if (buckets.empty()) {
    if (sum_us != 0 || min_us != 0 || max_us != 0) {
      return fail("buckets", "is empty, but sum_us, min_us or max_us is not 0");
    }
    return h;
  }
  h.counts_.assign(kBuckets, 0);
  int previous = -1;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const auto [bucket, count] = buckets[i];
    const std::string at = fmt::format("buckets[{}]", i);
    if (bucket <= previous || bucket >= kBuckets) {
      return fail(at, fmt::format("bucket {} is out of order or out of range {}..{}", bucket,
                                  previous + 1, kBuckets - 1));
    }
    if (count <= 0) return fail(at, fmt::format("count {} is not positive", count));
    h.counts_[static_cast<std::size_t>(bucket)] = count;
    h.count_ = add_step_figures(h.count_, count);
    previous = bucket;
  }
  if (min_us < 0 || min_us > kMaxStepMicros || bucket_of(min_us) != buckets.front().first) {
    return fail("min_us",
                fmt::format("{} is not in the first bucket, {}", min_us, buckets.front().first));
  }
  if (max_us < min_us || max_us > kMaxStepMicros || bucket_of(max_us) != buckets.back().first) {
    return fail("max_us", fmt::format("{} is not in the last bucket, {}, or under min_us", max_us,
                                      buckets.back().first));
  }
  // count x min <= sum <= count x max (a saturated sum may stand for any larger one).
  std::int64_t low = 0;
  std::int64_t high = 0;
  const bool low_past = __builtin_mul_overflow(h.count_, min_us, &low);
  const bool high_past = __builtin_mul_overflow(h.count_, max_us, &high);
  const bool too_low = sum_us != kStepSumMax && (low_past || sum_us < low);
  const bool too_high = !high_past && sum_us > high;
  if (sum_us < 0 || too_low || too_high) {
    return fail("sum_us",
                fmt::format("{} is not between count x min_us and count x max_us", sum_us));
  }
  h.sum_us_ = sum_us;
  h.min_us_ = min_us;
  h.max_us_ = max_us;
  return h;
}

std::vector<std::pair<int, std::int64_t>> StepHistogram::buckets() const {
  std::vector<std::pair<int, std::int64_t>> out;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    if (counts_[b] != 0) out.emplace_back(static_cast<int>(b), counts_[b]);
  }
  return out;
}

std::int64_t StepHistogram::mean_us() const {
  return count_ == 0 ? 0 : step_ratio_rounded(sum_us_, count_);
}

std::int64_t StepHistogram::quantile_us(double q) const {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(clamped * static_cast<double>(count_))));
  std::int64_t seen = 0;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    seen = add_step_figures(seen, counts_[b]);
    if (seen >= rank) {
      const int bucket = static_cast<int>(b);
      const std::int64_t middle =
          bucket_low(bucket) + (bucket_high(bucket) - bucket_low(bucket)) / 2;
      return std::clamp(middle, min_us_, max_us_);
    }
  }
  return max_us_;
}

const char* comm_share_source_name(CommShareSource source) {
  switch (source) {
    case CommShareSource::kComputeTime:
      return "step_minus_compute";
    case CommShareSource::kAllreduceTime:
      return "allreduce";
  }
  return "?";
}

void StepStats::add(const StepSample& s) {
  steps.add(s.step_us);
  if (s.compute_us) {
    ++compute_steps;
    compute_step_us = add_step_figures(compute_step_us, s.step_us);
    compute_us = add_step_figures(compute_us, *s.compute_us);
  }
  if (s.allreduce_us) {
    ++allreduce_steps;
    allreduce_step_us = add_step_figures(allreduce_step_us, s.step_us);
    allreduce_us = add_step_figures(allreduce_us, *s.allreduce_us);
    if (s.allreduce_bytes) {
      ++allreduce_byte_steps;
      allreduce_bytes = add_step_figures(allreduce_bytes, *s.allreduce_bytes);
    }
  }
  last_step = std::max(last_step, s.step);
}

void StepStats::merge(const StepStats& o) {
  steps.merge(o.steps);
  compute_steps = add_step_figures(compute_steps, o.compute_steps);
  compute_step_us = add_step_figures(compute_step_us, o.compute_step_us);
  compute_us = add_step_figures(compute_us, o.compute_us);
  allreduce_steps = add_step_figures(allreduce_steps, o.allreduce_steps);
  allreduce_step_us = add_step_figures(allreduce_step_us, o.allreduce_step_us);
  allreduce_us = add_step_figures(allreduce_us, o.allreduce_us);
  allreduce_byte_steps = add_step_figures(allreduce_byte_steps, o.allreduce_byte_steps);
  allreduce_bytes = add_step_figures(allreduce_bytes, o.allreduce_bytes);
  last_step = std::max(last_step, o.last_step);
  refused_lines = add_step_figures(refused_lines, o.refused_lines);
}

std::optional<CommShare> StepStats::comm_share() const {
  if (compute_steps > 0 && compute_step_us > 0) {
    const double compute =
        std::min(static_cast<double>(compute_us), static_cast<double>(compute_step_us));
    return CommShare{.share = 1.0 - compute / static_cast<double>(compute_step_us),
                     .source = CommShareSource::kComputeTime};
  }
  if (allreduce_steps > 0 && allreduce_step_us > 0) {
    const double allreduce =
        std::min(static_cast<double>(allreduce_us), static_cast<double>(allreduce_step_us));
    return CommShare{.share = allreduce / static_cast<double>(allreduce_step_us),
                     .source = CommShareSource::kAllreduceTime};
  }
  return std::nullopt;
}

std::optional<std::int64_t> StepStats::mean_compute_us() const {
  if (compute_steps == 0) return std::nullopt;
  return step_ratio_rounded(compute_us, compute_steps);
}

std::optional<std::int64_t> StepStats::mean_allreduce_us() const {
  if (allreduce_steps == 0) return std::nullopt;
  return step_ratio_rounded(allreduce_us, allreduce_steps);
}

std::optional<std::int64_t> StepStats::mean_allreduce_bytes() const {
  if (allreduce_steps == 0 || allreduce_byte_steps != allreduce_steps) return std::nullopt;
  return step_ratio_rounded(allreduce_bytes, allreduce_steps);
}

std::optional<double> StepStats::allreduce_alg_bytes_per_s() const {
  if (allreduce_steps == 0 || allreduce_byte_steps != allreduce_steps || allreduce_us <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(allreduce_bytes) * 1e6 / static_cast<double>(allreduce_us);
}

std::optional<double> StepStats::allreduce_bus_bytes_per_s(int ranks) const {
  const auto alg = allreduce_alg_bytes_per_s();
  if (!alg || ranks < 1) return std::nullopt;
  return *alg * 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
}

std::optional<double> StepStats::mfu(double model_flops_per_step, double peak_flops_per_s) const {
  if (steps.count() == 0 || steps.sum_us() <= 0 || !(model_flops_per_step > 0) ||
      !(peak_flops_per_s > 0)) {
    return std::nullopt;
  }
  const double mean_s =
      static_cast<double>(steps.sum_us()) / static_cast<double>(steps.count()) / 1e6;
  return model_flops_per_step / (mean_s * peak_flops_per_s);
}

}  // namespace tidepool
