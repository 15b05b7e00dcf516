// The advice rule (job_advice.h).
#include "core/job_advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

int permille(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<int>(static_cast<Int128>(part) * 1000 / whole) : 0;
}

// A link's bandwidth in bytes per second: gbps x 10^9 / 8 / oversubscription.
std::int64_t link_bytes_per_second(const Bottleneck& link) {
  return static_cast<std::int64_t>(link.gbps) * 125'000'000 / std::max(1, link.oversubscription);
}

// nccl-tests' bus bandwidth of an all-reduce of `bytes` over `gpus` ranks in `us`.
std::int64_t bus_bytes_per_second(std::int64_t bytes, int gpus, std::int64_t us) {
  if (us <= 0 || gpus < 2) return 0;
  const Int128 moved = static_cast<Int128>(bytes) * 2 * (gpus - 1) * 1'000'000;
  return static_cast<std::int64_t>(moved / (static_cast<Int128>(gpus) * us));
}

// Communication and compute per step from what was measured; nullopt (with why) when unknown.
struct StepSplit {
  std::int64_t comm_us = 0;
  std::int64_t compute_us = 0;
};

std::optional<StepSplit> split_step(const MeasuredSteps& steps, std::string& why) {
  if (steps.gpus < 2) {
    why = "a job on one GPU does not all-reduce";
    return std::nullopt;
  }
  if (steps.step_us <= 0) {
    why = "no step times reported";
    return std::nullopt;
  }
  if (steps.compute_us) {
    const std::int64_t compute = std::clamp<std::int64_t>(*steps.compute_us, 0, steps.step_us);
    return StepSplit{steps.step_us - compute, compute};
  }
  if (steps.allreduce_us) {
    const std::int64_t comm = std::clamp<std::int64_t>(*steps.allreduce_us, 0, steps.step_us);
    return StepSplit{comm, steps.step_us - comm};
  }
  why = "the job reports neither its compute time nor its all-reduce time per step";
  return std::nullopt;
}

std::string seconds_text(std::int64_t us) {
  if (us < 1'000) return fmt::format("{} us", us);
  if (us < 1'000'000) return fmt::format("{:.1f} ms", static_cast<double>(us) / 1e3);
  return fmt::format("{:.2f} s", static_cast<double>(us) / 1e6);
}

std::string percent_text(int permille) {
  return fmt::format("{}.{}%", permille / 10, permille % 10);
}

std::string ratio_text(std::int64_t now_us, std::int64_t expected_us) {
  return fmt::format("{:.2f}x", expected_us > 0
                                    ? static_cast<double>(now_us) / static_cast<double>(expected_us)
                                    : 1.0);
}

std::string link_text(const Bottleneck& link) {
  if (link.link == CommLink::kNone) return "no link";
  if (link.oversubscription > 1) {
    return fmt::format("{} ({} Gbit/s, {}:1 oversubscribed)", comm_link_name(link.link), link.gbps,
                       link.oversubscription);
  }
  return fmt::format("{} ({} Gbit/s)", comm_link_name(link.link), link.gbps);
}

std::string span_text(const RingSpan& ring) {
  const GangSpan& s = ring.span;
  if (s.nodes <= 1) {
    return fmt::format("{} GPUs on 1 node in {} NVLink domain{}", ring.gpus, s.nvlink_domains,
                       s.nvlink_domains == 1 ? "" : "s");
  }
  return fmt::format("{} GPUs on {} nodes under {} leaf switch{}", ring.gpus, s.nodes, s.leaves,
                     s.leaves == 1 ? "" : "es");
}

std::optional<AccumulationAdvice> accumulation(const MeasuredSteps& steps, const StepSplit& split,
                                               const std::optional<AdvicePlacement>& placement,
                                               const AdviceConfig& config, std::string& why) {
  AccumulationAdvice a;
  a.comm_us = split.comm_us;
  a.compute_us = split.compute_us;
  a.now_us = steps.step_us;
  a.comm_share_now_permille = permille(split.comm_us, steps.step_us);
  if (a.comm_share_now_permille <= config.comm_share_target_permille) {
    why = fmt::format("the communication share {} is at or under the target {}",
                      percent_text(a.comm_share_now_permille),
                      percent_text(config.comm_share_target_permille));
    return std::nullopt;
  }
  if (placement && steps.allreduce_bytes && *steps.allreduce_bytes > 0) {
    a.link = bottleneck(placement->links, placement->actual);
    const std::int64_t link_bps = link_bytes_per_second(a.link);
    a.bus_bytes_per_second = bus_bytes_per_second(*steps.allreduce_bytes, steps.gpus,
                                                  steps.allreduce_us.value_or(split.comm_us));
    a.bus_permille_of_link = permille(a.bus_bytes_per_second, link_bps);
    if (a.bus_permille_of_link < config.saturated_permille) {
      why = fmt::format(
          "the all-reduce runs at {} of its {} link: it is not bandwidth-bound, so fewer "
          "all-reduces would not be the fix (look at how it overlaps with compute and at the "
          "collective library's settings)",
          percent_text(a.bus_permille_of_link), link_text(a.link));
      return std::nullopt;
    }
  }
  if (split.compute_us <= 0) {
    why = "the step reports no compute time to accumulate over";
    return std::nullopt;
  }
  // The least k >= 2 with k x compute x target >= comm x (1000 - target).
  const std::int64_t target = config.comm_share_target_permille;
  const Int128 need = static_cast<Int128>(split.comm_us) * (1000 - target);
  const Int128 per_k = static_cast<Int128>(split.compute_us) * target;
  const Int128 k = (need + per_k - 1) / per_k;
  a.steps = static_cast<int>(std::clamp<Int128>(k, 2, config.max_accumulation_steps));
  a.expected_us = split.compute_us + (split.comm_us + a.steps - 1) / a.steps;
  a.comm_share_expected_permille =
      permille(split.comm_us, split.compute_us * a.steps + split.comm_us);
  return a;
}

std::optional<PlacementAdvice> compact(const MeasuredSteps& steps, const StepSplit& split,
                                       const AdvicePlacement& placement) {
  PlacementAdvice p;
  p.actual = placement.actual;
  p.ideal = placement.ideal;
  p.actual_link = bottleneck(placement.links, placement.actual);
  p.ideal_link = bottleneck(placement.links, placement.ideal);
  // The model's all-reduce on both spans for the job's bytes (any bytes when unknown: the
  // bandwidth ratio then decides).
  const JobCommProfile profile{steps.allreduce_bytes.value_or(1'000'000'000), 0};
  const std::int64_t model_now = step_time(profile, placement.links, placement.actual).comm_us();
  const std::int64_t model_ideal = step_time(profile, placement.links, placement.ideal).comm_us();
  if (model_now <= 0 || model_ideal >= model_now) return std::nullopt;
  const auto comm_ideal = static_cast<std::int64_t>(
      (static_cast<Int128>(split.comm_us) * model_ideal + model_now - 1) / model_now);
  p.now_us = steps.step_us;
  p.expected_us = split.compute_us + comm_ideal;
  if (p.expected_us >= p.now_us) return std::nullopt;
  return p;
}

}  // namespace

Result<void> validate(const AdviceConfig& config) {
  if (config.comm_share_target_permille < 1 || config.comm_share_target_permille > 999) {
    return fail("comm_share_target_permille",
                fmt::format("must be 1..999, got {}", config.comm_share_target_permille));
  }
  if (config.saturated_permille < 1 || config.saturated_permille > 999) {
    return fail("saturated_permille",
                fmt::format("must be 1..999, got {}", config.saturated_permille));
  }
  if (config.idle_utilization_percent < 0 || config.idle_utilization_percent > 100) {
    return fail("idle_utilization_percent",
                fmt::format("must be 0..100, got {}", config.idle_utilization_percent));
  }
  if (config.max_accumulation_steps < 2 || config.max_accumulation_steps > 1'000'000) {
    return fail("max_accumulation_steps",
                fmt::format("must be 2..1000000, got {}", config.max_accumulation_steps));
  }
  return {};
}

JobAdvice advise_job(const MeasuredSteps& steps, const std::optional<AdvicePlacement>& placement,
                     std::span<const GpuUse> gpus, const AdviceConfig& config) {
  JobAdvice advice;
  if (const std::optional<StepSplit> split = split_step(steps, advice.comm_note)) {
    advice.accumulate = accumulation(steps, *split, placement, config, advice.comm_note);
    if (placement) advice.compact = compact(steps, *split, *placement);
  }
  if (!gpus.empty()) {
    IdleAdvice idle;
    std::int64_t sum = 0;
    for (const GpuUse& gpu : gpus) {
      const int clamped = std::clamp(gpu.utilization_percent, 0, 100);
      sum += clamped;
      if (gpu.low_for_window && clamped <= config.idle_utilization_percent) ++idle.idle_gpus;
    }
    idle.gpus = static_cast<int>(gpus.size());
    idle.mean_utilization_percent = static_cast<int>(sum / idle.gpus);
    if (idle.idle_gpus > 0) advice.idle = idle;
  }
  return advice;
}

std::int64_t expected_gain_permille(std::int64_t now_us, std::int64_t expected_us) {
  if (expected_us <= 0 || now_us <= 0) return 1000;
  return static_cast<std::int64_t>(static_cast<Int128>(now_us) * 1000 / expected_us);
}

std::vector<std::string> advice_lines(const JobAdvice& advice) {
  std::vector<std::string> lines;
  if (const auto& a = advice.accumulate) {
    std::string line = fmt::format(
        "accumulate gradients over {} micro-batches per all-reduce: communication {} of a step "
        "now, {} then; a micro-batch {} now, {} then ({} the throughput)",
        a->steps, percent_text(a->comm_share_now_permille),
        percent_text(a->comm_share_expected_permille), seconds_text(a->now_us),
        seconds_text(a->expected_us), ratio_text(a->now_us, a->expected_us));
    if (a->bus_bytes_per_second > 0) {
      line += fmt::format("; the all-reduce moves {:.1f} GB/s, {} of its {} link: bandwidth-bound",
                          static_cast<double>(a->bus_bytes_per_second) / 1e9,
                          percent_text(a->bus_permille_of_link), link_text(a->link));
    }
    line += fmt::format(
        "; the global batch grows {}x, so scale the learning rate (or its schedule) to match",
        a->steps);
    lines.push_back(std::move(line));
  }
  if (const auto& p = advice.compact) {
    lines.push_back(fmt::format(
        "placed wider than needed: {} (slowest link {}); {} (slowest link {}) was possible: a "
        "step {} now, {} there (it pays {})",
        span_text(p->actual), link_text(p->actual_link), span_text(p->ideal),
        link_text(p->ideal_link), seconds_text(p->now_us), seconds_text(p->expected_us),
        ratio_text(p->now_us, p->expected_us)));
  }
  if (const auto& i = advice.idle) {
    lines.push_back(fmt::format(
        "{} of its {} GPUs idle (mean utilisation {}%): release them, or check that the job "
        "uses every GPU it holds",
        i->idle_gpus, i->gpus, i->mean_utilization_percent));
  }
  return lines;
}

AdvisedMfu advised_mfu(const JobCommProfile& profile, const AdvicePlacement& placement,
                       const AdviceConfig& config) {
  // The model's step on `ring` as a job would report it, and its advice.
  const auto advise_on = [&](const RingSpan& ring) {
    const StepTime step = step_time(profile, placement.links, ring);
    MeasuredSteps measured;
    measured.gpus = ring.gpus;
    measured.step_us = step.total_us();
    measured.compute_us = step.compute_us;
    measured.allreduce_us = step.comm_us();
    measured.allreduce_bytes = profile.gradient_bytes;
    AdvicePlacement on = placement;
    on.actual = ring;
    return std::pair{step, advise_job(measured, on, {}, config)};
  };
  // MFU scales with the inverse of the time per micro-batch.
  const auto scaled = [](double mfu, std::int64_t now_us, std::int64_t expected_us) {
    return expected_us > 0 ? mfu * static_cast<double>(now_us) / static_cast<double>(expected_us)
                           : mfu;
  };
  const auto [step, advice] = advise_on(placement.actual);
  AdvisedMfu mfu;
  mfu.now = step.est_mfu();
  mfu.accumulate = advice.accumulate
                       ? scaled(mfu.now, advice.accumulate->now_us, advice.accumulate->expected_us)
                       : mfu.now;
  mfu.compact = advice.compact
                    ? scaled(mfu.now, advice.compact->now_us, advice.compact->expected_us)
                    : mfu.now;
  if (!advice.compact) {
    mfu.both = mfu.accumulate;
    return mfu;
  }
  const auto [there, advice_there] = advise_on(placement.ideal);
  const double compact_mfu = there.est_mfu();
  mfu.both = advice_there.accumulate ? scaled(compact_mfu, advice_there.accumulate->now_us,
                                              advice_there.accumulate->expected_us)
                                     : compact_mfu;
  return mfu;
}

}  // namespace tidepool
