// libFuzzer target: the reader of a replica's Prometheus metrics (api/replica_metrics.h) on
// arbitrary bytes, as a replica's endpoint or metrics file could hold them. It must return an
// exposition or an Error, never throw or crash; an error names a line within the input (or none)
// and is short printable text; an exposition keeps within the caps, holds valid names and UTF-8
// label values, and reads back the same from what format_exposition writes of it; the figures of
// any two expositions, under the presets and under names taken from the input, are absent or
// non-negative. Built and run by run_fuzz.sh.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/replica_metrics.h"

namespace {

using tidepool::Exposition;
using tidepool::MetricSample;

void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

std::size_t lines_in(std::string_view text) {
  std::size_t lines = 0;
  for (const char c : text) lines += c == '\n' ? 1 : 0;
  return lines + 1;
}

void check_error(const tidepool::Error& error, std::string_view input) {
  check(!error.reason.empty() && error.reason.size() < 512, "an error has a short reason");
  for (const char c : error.reason) check(c >= 0x20 && c < 0x7f, "an error is printable ASCII");
  if (error.field.empty()) return;
  check(error.field.starts_with("line "), "an error names a line");
  const std::size_t line = std::strtoull(error.field.c_str() + 5, nullptr, 10);
  check(line >= 1 && line <= lines_in(input), "the line is in the input");
}

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

bool same_sample(const MetricSample& a, const MetricSample& b) {
  if (a.name != b.name || a.labels.size() != b.labels.size()) return false;
  for (std::size_t i = 0; i < a.labels.size(); ++i) {
    if (a.labels[i].name != b.labels[i].name || a.labels[i].value != b.labels[i].value) {
      return false;
    }
  }
  return same_value(a.value, b.value) && a.timestamp_ms == b.timestamp_ms;
}

void check_round_trip(const Exposition& exposition) {
  const auto again = tidepool::parse_exposition(tidepool::format_exposition(exposition));
  check(again.has_value(), "what format_exposition writes reads back");
  if (!again) return;
  check(again->types == exposition.types, "the types read back");
  check(again->help == exposition.help, "the help texts read back");
  check(again->samples.size() == exposition.samples.size(), "the samples read back");
  for (std::size_t i = 0; i < exposition.samples.size(); ++i) {
    check(same_sample(again->samples[i], exposition.samples[i]), "each sample reads back");
  }
}

void check_figures(const tidepool::ReplicaFigures& figures) {
  for (const auto& figure :
       {figures.requests_waiting_milli, figures.requests_in_flight_milli,
        figures.requests_per_s_milli, figures.mean_latency_ms, figures.p95_latency_ms,
        figures.mean_queue_time_ms, figures.mean_concurrency_milli}) {
    check(!figure || *figure >= 0, "a figure is absent or not negative");
  }
}

// Every name the extraction reads set to the first sample's metric (or its histogram family), so
// that the arithmetic runs on whatever values the input holds.
tidepool::ReplicaMetricNames names_from(const Exposition& exposition) {
  tidepool::ReplicaMetricNames names;
  if (exposition.samples.empty()) return names;
  std::string name = exposition.samples.front().name;
  names.requests_waiting = names.requests_running = names.requests_completed = name;
  names.latency_sum = names.latency_count = names.queue_time_sum = names.queue_time_count = name;
  names.latency_histogram = name.ends_with("_bucket")
                                ? name.substr(0, name.size() - std::string_view("_bucket").size())
                                : name;
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto parsed = tidepool::parse_exposition(bytes);
  if (!parsed) {
    check_error(parsed.error(), bytes);
    return 0;
  }
  const Exposition& exposition = *parsed;
  check(exposition.samples.size() <= tidepool::kMaxExpositionSeries, "the series cap holds");
  for (const MetricSample& sample : exposition.samples) {
    check(!sample.name.empty(), "a sample has a name");
    check(sample.labels.size() <= tidepool::kMaxLabelsPerSeries, "the label cap holds");
  }
  check_round_trip(exposition);

  // The input against itself and against its first half (a counter may fall: a reset).
  const auto half = tidepool::parse_exposition(bytes.substr(0, size / 2));
  const tidepool::ReplicaScrape now{1'000 + static_cast<std::int64_t>(size), exposition};
  const tidepool::ReplicaScrape before{1'000, half ? *half : Exposition{}};
  for (const char* preset : {"vllm", "triton"}) {
    const auto names = tidepool::replica_metric_preset(preset);
    check(names.has_value(), "the presets exist");
    check_figures(tidepool::extract_replica_figures(*names, before, now));
  }
  const auto names = names_from(exposition);
  check_figures(tidepool::extract_replica_figures(names, now));
  check_figures(tidepool::extract_replica_figures(names, before, now));
  check_figures(tidepool::extract_replica_figures(names, now, before));
  return 0;
}
