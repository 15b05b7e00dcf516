#include "sim/inference_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/rng.h"

namespace tidepool {
namespace {

constexpr Seconds kDay = 86400;

Seconds floor_div(Seconds a, Seconds b) {
  const Seconds q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

Seconds floor_mod(Seconds a, Seconds b) { return a - floor_div(a, b) * b; }

// The SplitMix64 finaliser: a bijective mix of 64 bits.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The Rng seed of step k: both inputs mixed, so nearby (seed, k) pairs give unrelated streams.
std::uint64_t step_seed(std::uint64_t seed, Seconds k) {
  return mix64(mix64(seed) ^ mix64(static_cast<std::uint64_t>(k) + 0x9e3779b97f4a7c15ULL));
}

// The day curve without jitter at sim time s.
std::int64_t curve(const InferenceServiceSpec& spec, Seconds s) {
  const Seconds tod = floor_mod(floor_mod(s, kDay) + spec.day_offset, kDay);
  if (tod < spec.day_start || tod >= spec.day_end) return spec.trough_gpus;
  const double phase = std::numbers::pi * static_cast<double>(tod - spec.day_start) /
                       static_cast<double>(spec.day_end - spec.day_start);
  const double value = static_cast<double>(spec.trough_gpus) +
                       static_cast<double>(spec.peak_gpus - spec.trough_gpus) * std::sin(phase);
  return std::clamp<std::int64_t>(std::llround(value), spec.trough_gpus, spec.peak_gpus);
}

// The most replicas one spec may generate (bounds the output's memory).
constexpr std::size_t kMaxInferenceReplicas = 10'000'000;

}  // namespace

Result<InferenceServiceSpec> validate(const InferenceServiceSpec& spec) {
  if (spec.peak_gpus < 1 || spec.peak_gpus > kMaxInferenceGpus) {
    return fail("peak_gpus",
                fmt::format("must be 1..{}, got {}", kMaxInferenceGpus, spec.peak_gpus));
  }
  if (spec.trough_gpus < 0 || spec.trough_gpus > spec.peak_gpus) {
    return fail("trough_gpus",
                fmt::format("must be 0..peak_gpus ({}), got {}", spec.peak_gpus, spec.trough_gpus));
  }
  if (spec.day_start < 0 || spec.day_start >= kDay) {
    return fail("day_start",
                fmt::format("must be 0..{} seconds of day, got {}", kDay - 1, spec.day_start));
  }
  if (spec.day_end <= spec.day_start || spec.day_end > kDay) {
    return fail("day_end", fmt::format("must be after day_start ({}) and at most {}, got {}",
                                       spec.day_start, kDay, spec.day_end));
  }
  if (spec.step < 1 || spec.step > kDay) {
    return fail("step", fmt::format("must be 1..{} seconds, got {}", kDay, spec.step));
  }
  if (spec.start < 0 || spec.start >= kMaxInferenceTime) {
    return fail("start", fmt::format("must be 0..{}, got {}", kMaxInferenceTime - 1, spec.start));
  }
  if (spec.end <= spec.start || spec.end > kMaxInferenceTime) {
    return fail("end", fmt::format("must be after start ({}) and at most {}, got {}", spec.start,
                                   kMaxInferenceTime, spec.end));
  }
  const std::int64_t steps = (spec.end - 1) / spec.step - spec.start / spec.step + 1;
  if (steps > kMaxInferenceSteps) {
    return fail("end", fmt::format("[{}, {}) spans {} steps of {} s, at most {}", spec.start,
                                   spec.end, steps, spec.step, kMaxInferenceSteps));
  }
  if (spec.day_offset < 0 || spec.day_offset >= kDay) {
    return fail("day_offset", fmt::format("must be 0..{}, got {}", kDay - 1, spec.day_offset));
  }
  if (spec.jitter_permille < 0 || spec.jitter_permille > 1000) {
    return fail("jitter_permille", fmt::format("must be 0..1000, got {}", spec.jitter_permille));
  }
  return spec;
}

std::int64_t replica_target(const InferenceServiceSpec& spec, Seconds t) {
  const Seconds k = floor_div(t, spec.step);
  const std::int64_t base = curve(spec, k * spec.step);
  if (spec.jitter_permille == 0) return base;
  Rng rng(step_seed(spec.seed, k));
  const auto j = static_cast<std::uint64_t>(spec.jitter_permille);
  const std::int64_t u = static_cast<std::int64_t>(rng.below(2 * j + 1)) - spec.jitter_permille;
  const std::int64_t jittered = (base * (1000 + u) + 500) / 1000;  // >= 0, halves up
  return std::clamp<std::int64_t>(jittered, 0, spec.peak_gpus);
}

Result<std::vector<InferenceReplica>> generate_inference_replicas(
    const InferenceServiceSpec& spec) {
  if (auto valid = validate(spec); !valid) return std::unexpected(std::move(valid.error()));
  std::vector<Seconds> live;  // submit times of the live replicas; the back started last
  std::vector<InferenceReplica> replicas;
  for (Seconds b = spec.start; b < spec.end; b = (b / spec.step + 1) * spec.step) {
    const auto count = static_cast<std::size_t>(replica_target(spec, b));
    while (live.size() > count) {
      replicas.push_back({.submit = live.back(), .duration = b - live.back()});
      live.pop_back();
    }
    while (live.size() < count) live.push_back(b);
    if (replicas.size() + live.size() > kMaxInferenceReplicas) {
      return fail("end", fmt::format("the service would generate more than {} replicas; use a "
                                     "longer step, a shorter horizon or less jitter",
                                     kMaxInferenceReplicas));
    }
  }
  for (Seconds submit : live) replicas.push_back({.submit = submit, .duration = spec.end - submit});
  std::sort(replicas.begin(), replicas.end(),
            [](const InferenceReplica& a, const InferenceReplica& b) {
              return a.submit != b.submit ? a.submit < b.submit : a.duration > b.duration;
            });
  return replicas;
}

}  // namespace tidepool
