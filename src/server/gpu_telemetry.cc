#include "server/gpu_telemetry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/duration_format.h"
#include "core/resources.h"

namespace tidepool {
namespace {

// MiB as bytes; figures past what an int64 of bytes holds (nonsense from the network) are clamped.
std::string bytes_text(std::int64_t mib) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / kBytesPerMib;
  return std::to_string(std::clamp(mib, -kMax, kMax) * kBytesPerMib);
}

// part * 100 >= percent * whole, without the products (the figures come from the network).
bool share_at_least(std::int64_t part, std::int64_t whole, int percent) {
  percent = std::clamp(percent, 0, 100);
  if (whole <= 0 || part < 0) return false;
  if (part >= whole) return true;
  // whole = 100q + r: part * 100 >= percent * (100q + r) <=> (part - percent * q) * 100 >= percent
  // * r, where percent * q <= whole and percent * r < 10000.
  const std::int64_t d = part - percent * (whole / 100);
  if (d < 0) return false;
  if (d >= 100) return true;
  return d * 100 >= percent * (whole % 100);
}

// "312.5" from 312500 mW.
std::string watts_text(int milliwatts) {
  const std::int64_t mw = milliwatts;
  const std::int64_t magnitude = mw < 0 ? -mw : mw;
  std::string text = fmt::format("{}{}", mw < 0 ? "-" : "", magnitude / 1000);
  if (magnitude % 1000 != 0) {
    text += fmt::format(".{:03}", magnitude % 1000);
    while (text.back() == '0') text.pop_back();
  }
  return text;
}

// A label value as the text format quotes it: backslash, double quote and line feed escaped.
void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_label(std::string& out, std::string_view name, std::string_view value) {
  out += out.back() == '{' ? "" : ",";
  out += name;
  out += "=\"";
  append_escaped(out, value);
  out += '"';
}

void append_family(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Result<IdleGpuRule> validate_idle_gpu_rule(const IdleGpuRule& rule) {
  if (rule.window <= Millis{0}) {
    return fail("window_ms", fmt::format("must be > 0, got {}", rule.window.count()));
  }
  if (rule.low_utilization_percent < 0 || rule.low_utilization_percent > 100) {
    return fail("low_utilization_percent",
                fmt::format("must be 0..100, got {}", rule.low_utilization_percent));
  }
  if (rule.high_memory_percent < 1 || rule.high_memory_percent > 100) {
    return fail("high_memory_percent",
                fmt::format("must be 1..100, got {}", rule.high_memory_percent));
  }
  return rule;
}

std::string_view idle_kind_name(IdleKind kind) {
  switch (kind) {
    case IdleKind::kIdle:
      return "idle";
    case IdleKind::kStalled:
      return "stalled";
  }
  return "unknown";
}

GpuTelemetry::GpuTelemetry(IdleGpuRule rule) : rule_(rule) {
  assert(validate_idle_gpu_rule(rule_).has_value());
}

std::optional<IdleKind> GpuTelemetry::condition(const GpuReading& reading, std::int64_t job) const {
  if (job <= 0 || reading.utilization_percent >= rule_.low_utilization_percent) {
    return std::nullopt;
  }
  return share_at_least(reading.memory_used_mib, reading.memory_total_mib,
                        rule_.high_memory_percent)
             ? IdleKind::kStalled
             : IdleKind::kIdle;
}

IdleGpuAlert GpuTelemetry::alert(const std::string& node, const GpuState& gpu) const {
  const GpuReading& r = gpu.reading;
  const IdleKind kind = gpu.kind.value_or(IdleKind::kIdle);
  std::string held =
      kind == IdleKind::kStalled
          ? fmt::format(
                "below {}% utilisation with memory at or above {}% for {} (a stalled data "
                "loader?)",
                rule_.low_utilization_percent, rule_.high_memory_percent,
                format_duration_ms((gpu.seen_at - gpu.since).count()))
          : fmt::format("below {}% utilisation for {}", rule_.low_utilization_percent,
                        format_duration_ms((gpu.seen_at - gpu.since).count()));
  std::string memory = r.memory_total_mib > 0
                           ? fmt::format("{} of {} MiB used", r.memory_used_mib, r.memory_total_mib)
                           : fmt::format("{} MiB used of an unknown total", r.memory_used_mib);
  return IdleGpuAlert{
      .node = node,
      .gpu = r.index,
      .job = gpu.job,
      .kind = kind,
      .since = gpu.since,
      .reason = fmt::format("GPU {} on node {}, held by job {}, {}: {}% utilisation, {}", r.index,
                            node, gpu.job, held, r.utilization_percent, memory),
  };
}

std::vector<IdleGpuAlert> GpuTelemetry::update(const std::string& node,
                                               std::span<const GpuReading> readings,
                                               std::span<const std::int64_t> job_by_gpu,
                                               Instant now) {
  std::map<int, GpuState>& after = nodes_[node];
  std::map<int, GpuState> before;
  before.swap(after);
  for (const GpuReading& r : readings) after[r.index].reading = r;  // the later reading counts

  std::vector<IdleGpuAlert> raised;
  for (auto& [index, gpu] : after) {
    const auto slot = static_cast<std::size_t>(index);
    gpu.job = index >= 0 && slot < job_by_gpu.size() ? job_by_gpu[slot] : 0;
    gpu.seen_at = now;
    gpu.kind = condition(gpu.reading, gpu.job);
    if (!gpu.kind) continue;

    const auto prev = before.find(index);
    const bool continues = prev != before.end() && prev->second.kind == gpu.kind &&
                           prev->second.job == gpu.job && now >= prev->second.seen_at &&
                           now - prev->second.seen_at <= rule_.window;
    gpu.since = continues ? prev->second.since : now;
    gpu.raised = continues && prev->second.raised;
    if (!gpu.raised && now - gpu.since >= rule_.window) {
      gpu.raised = true;
      ++alerts_raised_[static_cast<std::size_t>(*gpu.kind)];
      raised.push_back(alert(node, gpu));
    }
  }
  return raised;
}

void GpuTelemetry::forget_node(const std::string& node) { nodes_.erase(node); }

std::vector<IdleGpuAlert> GpuTelemetry::active() const {
  std::vector<IdleGpuAlert> alerts;
  for (const auto& [node, gpus] : nodes_) {
    for (const auto& [index, gpu] : gpus) {
      if (gpu.kind && gpu.raised) alerts.push_back(alert(node, gpu));
    }
  }
  return alerts;
}

std::vector<GpuTelemetry::LowUse> GpuTelemetry::low_use_now() const {
  std::vector<LowUse> low;
  for (const auto& [node, gpus] : nodes_) {
    for (const auto& [index, gpu] : gpus) {
      if (gpu.kind) low.push_back(LowUse{node, index, gpu.job});
    }
  }
  return low;
}

void GpuTelemetry::write_metrics(std::string& out) const {
  // {node="..",gpu="..",model=".."}: bounded by the pool's GPUs (the job holding a GPU is in
  // GET /v1/nodes, not a label: job ids grow without bound).
  const auto gpu_labels = [](const std::string& node, const GpuState& gpu) {
    std::string labels = "{";
    append_label(labels, "node", node);
    append_label(labels, "gpu", std::to_string(gpu.reading.index));
    append_label(labels, "model", gpu.reading.model);
    return labels + "}";
  };
  const auto per_gpu = [&](std::string_view name, std::string_view type, std::string_view help,
                           auto value) {
    append_family(out, name, type, help);
    for (const auto& [node, gpus] : nodes_) {
      for (const auto& [index, gpu] : gpus) {
        out += fmt::format("{}{} {}\n", name, gpu_labels(node, gpu), value(gpu.reading));
      }
    }
  };

  per_gpu("tidepool_gpu_utilization_percent", "gauge",
          "Share of the last sample period a kernel ran on the GPU, as its agent last reported",
          [](const GpuReading& r) { return std::to_string(r.utilization_percent); });
  per_gpu("tidepool_gpu_memory_used_bytes", "gauge", "GPU device memory in use",
          [](const GpuReading& r) { return bytes_text(r.memory_used_mib); });
  per_gpu("tidepool_gpu_memory_total_bytes", "gauge", "GPU device memory in all (0: unknown)",
          [](const GpuReading& r) { return bytes_text(r.memory_total_mib); });
  per_gpu("tidepool_gpu_power_watts", "gauge", "GPU board power draw",
          [](const GpuReading& r) { return watts_text(r.power_milliwatts); });
  per_gpu("tidepool_gpu_temperature_celsius", "gauge", "GPU die temperature",
          [](const GpuReading& r) { return std::to_string(r.temperature_celsius); });
  per_gpu("tidepool_gpu_throttle_reasons", "gauge",
          "Why the GPU's clocks are held down: NVML's clocks throttle reason bit mask (0: none)",
          [](const GpuReading& r) { return std::to_string(r.throttle_reasons); });
  per_gpu("tidepool_gpu_ecc_errors_uncorrected_total", "counter",
          "Uncorrected ECC errors of the GPU since its driver loaded",
          [](const GpuReading& r) { return std::to_string(r.ecc_errors_uncorrected); });

  append_family(out, "tidepool_gpu_in_use", "gauge",
                "1 while the GPU is allocated to a job, 0 while it is free");
  for (const auto& [node, gpus] : nodes_) {
    for (const auto& [index, gpu] : gpus) {
      out += fmt::format("tidepool_gpu_in_use{} {}\n", gpu_labels(node, gpu), gpu.job > 0 ? 1 : 0);
    }
  }

  append_family(out, "tidepool_gpu_idle", "gauge",
                "1 while an allocated GPU's utilisation has been low for the idle window: kind "
                "idle with low memory, stalled with high memory");
  for (const auto& [node, gpus] : nodes_) {
    for (const auto& [index, gpu] : gpus) {
      if (!gpu.kind || !gpu.raised) continue;
      std::string labels = "{";
      append_label(labels, "node", node);
      append_label(labels, "gpu", std::to_string(index));
      append_label(labels, "kind", idle_kind_name(*gpu.kind));
      out += fmt::format("tidepool_gpu_idle{}}} 1\n", labels);
    }
  }

  append_family(out, "tidepool_gpu_idle_alerts_total", "counter",
                "Idle-GPU alerts raised, by kind");
  for (IdleKind kind : {IdleKind::kIdle, IdleKind::kStalled}) {
    out += fmt::format("tidepool_gpu_idle_alerts_total{{kind=\"{}\"}} {}\n", idle_kind_name(kind),
                       alerts_raised_[static_cast<std::size_t>(kind)]);
  }
}

std::vector<GpuUse> GpuTelemetry::use_of_job(std::int64_t job) const {
  std::vector<GpuUse> out;
  if (job == 0) return out;
  for (const auto& [node, gpus] : nodes_) {
    for (const auto& [index, gpu] : gpus) {
      if (gpu.job == job) {
        out.push_back(GpuUse{gpu.reading.utilization_percent, gpu.kind && gpu.raised});
      }
    }
  }
  return out;
}

}  // namespace tidepool
