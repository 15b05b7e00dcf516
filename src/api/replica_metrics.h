// What an inference replica says about its load, read from its Prometheus metrics: the requests
// waiting and in flight, the request rate, and the mean and p95 latency over the last interval,
// as integers the heartbeat carries and the autoscaler (core/autoscaler.h) reads.
// Part of the wire (api): the agent scrapes with it, and the server checks a service's metric
// names with the same table when the service is submitted.
//
// Two ways in, one format. The agent scrapes the replica's endpoint (`metrics_port` in the
// service's template, path /metrics), or, for a replica that serves no HTTP, reads a file the
// replica writes. Either way the bytes are the Prometheus text exposition format, version 0.0.4,
// and parse_exposition reads them. A replica writing the file should write a temporary file and
// rename it over the old one, so that the agent never reads half a scrape.
//
// Everything here is pure: no clock (the caller gives each scrape's time), no I/O, no threads.
// Every byte of an exposition is untrusted: the parser is bounded (the kMax* caps below), never
// throws, and refuses bad input with an Error naming the line and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

// ---- The text exposition format (0.0.4) ----
//
// One item a line, lines separated by '\n' (a '\r' before it and blanks around are ignored;
// the last line may lack its '\n'):
//   # HELP <metric> <text>      text with \\ and \n escaped (any other backslash kept as is)
//   # TYPE <metric> <type>      counter, gauge, histogram, summary or untyped; at most one per
//                               metric, before its first sample
//   # <anything else>           a comment, ignored
//   <metric>[{<label>="<value>",...}] <value> [<timestamp>]
// Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*; a label value
// is UTF-8 with \\, \" and \n escaped (no other escape); a trailing comma in the braces is
// allowed. A value is a float as Go's ParseFloat reads it (1, -2.5, 1e-3, +Inf, -Inf, NaN, Inf
// in any case), a timestamp an integer of milliseconds since the epoch. No two samples share a
// name and label set (in any order), no sample names a label twice, and each bucket of a metric
// typed histogram (<metric>_bucket) has an `le` label that is a number or +Inf.

// Caps on what one exposition may hold; past them it is refused, not read on. A vLLM or Triton
// replica exposes a few hundred to a few thousand series in well under 1 MiB.
inline constexpr std::size_t kMaxExpositionBytes = std::size_t{8} * 1024 * 1024;
inline constexpr std::size_t kMaxExpositionLines = 100'000;  // all lines, comments and blanks too
inline constexpr std::size_t kMaxExpositionLineBytes = 64 * 1024;
inline constexpr std::size_t kMaxExpositionSeries = 20'000;  // samples
inline constexpr std::size_t kMaxLabelsPerSeries = 64;

enum class MetricType : std::uint8_t { kUntyped, kCounter, kGauge, kHistogram, kSummary };
// "untyped", "counter", "gauge", "histogram", "summary"
[[nodiscard]] std::string_view metric_type_name(MetricType type);

struct MetricLabel {
  std::string name;
  std::string value;  // unescaped; valid UTF-8
};

struct MetricSample {
  std::string name;
  std::vector<MetricLabel> labels;  // in the order written
  double value = 0;                 // may be NaN or infinite
  std::optional<std::int64_t> timestamp_ms;
};

struct Exposition {
  std::vector<MetricSample> samples;                     // in the order written
  std::map<std::string, MetricType, std::less<>> types;  // from the TYPE lines
  std::map<std::string, std::string, std::less<>> help;  // from the HELP lines, unescaped
};

// The exposition in `text`, or an Error whose field is "line N" (empty when the whole text is
// at fault, e.g. too large) and whose reason is printable ASCII: bytes of the input are shown
// only as short excerpts with anything unprintable replaced by '?'.
Result<Exposition> parse_exposition(std::string_view text);

// `exposition` in the text format, which parse_exposition reads back to the same exposition:
// the HELP and TYPE lines first (by metric name), then the samples in order. For tests, fakes
// and replicas that write their figures to a file.
[[nodiscard]] std::string format_exposition(const Exposition& exposition);

// ---- Which metrics say what ----

enum class TimeUnit : std::uint8_t { kSeconds, kMilliseconds, kMicroseconds };
// "s", "ms", "us"
[[nodiscard]] std::string_view time_unit_name(TimeUnit unit);

// The metric names the agent reads. An empty name is not read, and its figure stays absent.
// Every metric is summed over its label sets (a Triton replica reports each model apart).
struct ReplicaMetricNames {
  std::string requests_waiting;    // gauge: requests queued, not yet being served
  std::string requests_running;    // gauge: requests being served
  std::string requests_completed;  // counter: requests finished; its increase gives the rate
  // Latency: counters of the total time of the requests finished (in latency_unit) and of how
  // many they were (their increases give the mean), and a histogram family whose buckets
  // (<name>_bucket, `le` in latency_histogram_unit) give the p95.
  std::string latency_sum;
  std::string latency_count;
  TimeUnit latency_unit = TimeUnit::kSeconds;
  std::string latency_histogram;
  TimeUnit latency_histogram_unit = TimeUnit::kSeconds;
  // Time spent queued: counters of the total (in queue_time_unit) and of the requests it covers.
  std::string queue_time_sum;
  std::string queue_time_count;
  TimeUnit queue_time_unit = TimeUnit::kSeconds;
};

// A preset:
//   "vllm":   vllm:num_requests_waiting, vllm:num_requests_running (gauges),
//             vllm:request_success_total (counter, by finished_reason),
//             vllm:e2e_request_latency_seconds (histogram: _sum, _count, _bucket), and
//             vllm:request_queue_time_seconds_sum / _count; all in seconds.
//   "triton": nv_inference_pending_request_count (gauge), nv_inference_request_success
//             (counter), nv_inference_request_duration_us and nv_inference_queue_duration_us
//             (cumulative microseconds, counted by nv_inference_request_success). Triton has no
//             gauge of the requests executing and no end-to-end latency histogram (its
//             nv_inference_first_response_histogram_ms is opt-in and for decoupled models):
//             those stay unnamed.
//   "none":   nothing named, for an application that names its own metrics.
// An Error (field "preset") for any other name.
Result<ReplicaMetricNames> replica_metric_preset(std::string_view preset);

// Sets the member of `names` called `key` ("requests_waiting", ..., "queue_time_unit") to
// `value`: a metric name, or "" to read nothing, or for the *_unit keys "s", "ms" or "us". An
// Error (field `key`) for an unknown key, a name outside the metric name grammar, or a bad unit;
// `names` is then unchanged.
Result<void> set_replica_metric(ReplicaMetricNames& names, std::string_view key,
                                std::string_view value);

// The preset with each of `overrides` (key -> value, as set_replica_metric takes them) applied.
Result<ReplicaMetricNames> replica_metric_names(
    std::string_view preset, const std::map<std::string, std::string, std::less<>>& overrides);

// ---- The figures ----

// One scrape (or one read of the replica's file) and when it was taken, in milliseconds of the
// caller's clock (a monotonic one: only differences are used).
struct ReplicaScrape {
  std::int64_t taken_at_ms = 0;
  Exposition metrics;
};

// What a replica reports. Absent when the metric is not named, not exposed, or says nothing over
// the interval (no request finished; no earlier scrape), or is not a finite, non-negative number.
// Counts are in thousandths of a request (the autoscaler's unit), times in milliseconds, all
// rounded to the nearest (halves away from zero).
struct ReplicaFigures {
  // Now (from the current scrape's gauges).
  std::optional<std::int64_t> requests_waiting_milli;
  std::optional<std::int64_t> requests_in_flight_milli;
  // Over the interval between the two scrapes.
  std::optional<std::int64_t> requests_per_s_milli;  // requests finished per second
  std::optional<std::int64_t> mean_latency_ms;       // latency sum increase / count increase
  std::optional<std::int64_t> p95_latency_ms;        // from the histogram buckets' increases
  std::optional<std::int64_t> mean_queue_time_ms;    // queue time sum increase / count increase
  // The mean number of requests in the replica (queued or served) over the interval, by Little's
  // law: the latency of the requests finished in it per unit of time (latency sum increase /
  // interval). An estimate (a long request counts in the interval it ends in); for a replica
  // without an in-flight gauge, such as Triton's.
  std::optional<std::int64_t> mean_concurrency_milli;

  friend bool operator==(const ReplicaFigures&, const ReplicaFigures&) = default;
};

// The figures of one scrape alone: the gauges (the first scrape of a replica has nothing to
// compare with).
[[nodiscard]] ReplicaFigures extract_replica_figures(const ReplicaMetricNames& names,
                                                     const ReplicaScrape& current);

// The figures from two scrapes of the same replica. Each counter series (one label set) counts
// as Prometheus' increase() counts it: a value below the previous one means the counter was
// reset (the replica restarted) and the increase is the new value; a series missing from
// `previous` rose from 0 (client libraries create a labelled series at its first event); the
// increases are then summed over the series. The p95 is Prometheus' histogram_quantile(0.95) of
// the buckets' increases summed by `le`. With current.taken_at_ms <= previous.taken_at_ms only
// the gauges are given.
[[nodiscard]] ReplicaFigures extract_replica_figures(const ReplicaMetricNames& names,
                                                     const ReplicaScrape& previous,
                                                     const ReplicaScrape& current);

// One bucket of a classic histogram: how many observations were <= upper_bound.
struct HistogramBucket {
  double upper_bound = 0;  // the `le` label; +Inf for the last bucket
  double count = 0;        // cumulative
};

// The `quantile` (0..1) of a histogram as Prometheus' histogram_quantile computes it: buckets
// sorted by bound, buckets of equal bounds added up, counts made monotonic (each at least the one
// before); the bucket where rank = quantile x observations falls, and a linear interpolation
// within it, the lowest bucket starting at 0 (unless its bound is <= 0: then that bound). A rank
// in the +Inf bucket gives the highest finite bound. nullopt where Prometheus gives NaN: no +Inf
// bucket, fewer than two buckets, no observations, a NaN bound or count, or a quantile outside
// [0, 1].
[[nodiscard]] std::optional<double> histogram_quantile(double quantile,
                                                       std::vector<HistogramBucket> buckets);

}  // namespace tidepool
