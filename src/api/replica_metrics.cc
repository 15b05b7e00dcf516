#include "api/replica_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "config/quoted_text.h"

namespace tidepool {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// ---- Reading ----

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view skip_blanks(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  return text;
}

std::string_view trim(std::string_view text) {
  text = skip_blanks(text);
  while (!text.empty() && (is_blank(text.back()) || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// The text up to the first blank.
std::string_view first_token(std::string_view text) {
  return text.substr(0, std::min(text.find_first_of(" \t"), text.size()));
}

bool is_letter_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Metric names may hold colons (vLLM's do: "vllm:..."), label names not.
bool is_name_char(char c, bool metric) {
  return is_letter_or_underscore(c) || (c >= '0' && c <= '9') || (metric && c == ':');
}

// The longest start of `text` made of name characters.
std::string_view name_prefix(std::string_view text, bool metric) {
  std::size_t end = 0;
  while (end < text.size() && is_name_char(text[end], metric)) ++end;
  return text.substr(0, end);
}

bool is_name(std::string_view text, bool metric) {
  return !text.empty() && (is_letter_or_underscore(text.front()) || (metric && text[0] == ':')) &&
         name_prefix(text, metric).size() == text.size();
}

// A short, printable quote of untrusted bytes for an error message.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string out;
  for (const char c : text.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kShown) out += "...";
  return out;
}

// A leading '+' dropped (Go's parsers take one; std::from_chars does not), unless a sign follows.
std::optional<std::string_view> without_plus(std::string_view text) {
  if (!text.starts_with('+')) return text;
  text.remove_prefix(1);
  if (text.starts_with('+') || text.starts_with('-')) return std::nullopt;
  return text;
}

// A float as the format has it (Go's ParseFloat): decimal or exponent notation with an optional
// sign, Inf, Infinity and NaN in any case. Values beyond a double's range are refused.
std::optional<double> read_float(std::string_view text) {
  const auto unsigned_text = without_plus(text);
  if (!unsigned_text || unsigned_text->empty()) return std::nullopt;
  double value = 0;
  const char* end = unsigned_text->data() + unsigned_text->size();
  const auto [stop, ec] = std::from_chars(unsigned_text->data(), end, value);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::optional<std::int64_t> read_integer(std::string_view text) {
  const auto unsigned_text = without_plus(text);
  if (!unsigned_text || unsigned_text->empty()) return std::nullopt;
  std::int64_t value = 0;
  const char* end = unsigned_text->data() + unsigned_text->size();
  const auto [stop, ec] = std::from_chars(unsigned_text->data(), end, value);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return value;
}

// A quoted label value, `rest` starting just past its opening quote; on success `rest` starts
// just past the closing one.
Result<std::string> read_label_value(std::string_view& rest, std::string_view label) {
  std::string value;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '"') {
      rest.remove_prefix(i + 1);
      if (!valid_utf8(value))
        return fail("", fmt::format("label {} is not valid UTF-8", excerpt(label)));
      return value;
    }
    if (rest[i] != '\\') {
      value += rest[i];
      continue;
    }
    if (++i == rest.size()) break;
    switch (rest[i]) {
      case '\\':
        value += '\\';
        break;
      case '"':
        value += '"';
        break;
      case 'n':
        value += '\n';
        break;
      default:
        return fail("", fmt::format("label {} has an unknown escape \\{} (only \\\\, \\\" and \\n)",
                                    excerpt(label), excerpt(rest.substr(i, 1))));
    }
  }
  return fail("", fmt::format("the value of label {} has no closing quote", excerpt(label)));
}

bool has_label(const std::vector<MetricLabel>& labels, std::string_view name) {
  return std::ranges::any_of(labels, [&](const MetricLabel& label) { return label.name == name; });
}

// The labels between braces, `rest` starting just past the '{'; on success `rest` starts just
// past the '}'.
Result<std::vector<MetricLabel>> read_labels(std::string_view& rest) {
  std::vector<MetricLabel> labels;
  for (;;) {
    rest = skip_blanks(rest);
    if (rest.starts_with('}')) {
      rest.remove_prefix(1);
      return labels;
    }
    if (rest.empty()) return fail("", "the labels have no closing '}'");
    const std::string_view name = name_prefix(rest, false);
    if (!is_name(name, false)) {
      return fail("", fmt::format("expected a label name or '}}' at \"{}\"", excerpt(rest)));
    }
    rest = skip_blanks(rest.substr(name.size()));
    if (!rest.starts_with('=')) return fail("", fmt::format("label {} has no '='", excerpt(name)));
    rest = skip_blanks(rest.substr(1));
    if (!rest.starts_with('"'))
      return fail("", fmt::format("label {} has no quoted value", excerpt(name)));
    rest.remove_prefix(1);
    auto value = read_label_value(rest, name);
    if (!value) return std::unexpected(value.error());
    if (has_label(labels, name))
      return fail("", fmt::format("label {} appears twice", excerpt(name)));
    if (labels.size() == kMaxLabelsPerSeries) {
      return fail("", fmt::format("a sample has more than {} labels", kMaxLabelsPerSeries));
    }
    labels.push_back({std::string(name), std::move(*value)});
    rest = skip_blanks(rest);
    if (rest.starts_with(',')) {
      rest.remove_prefix(1);
    } else if (!rest.starts_with('}')) {
      return fail("", fmt::format("expected ',' or '}}' after label {} at \"{}\"", excerpt(name),
                                  excerpt(rest)));
    }
  }
}

// The value and optional timestamp that end a sample line.
Result<void> read_value_and_timestamp(std::string_view rest, MetricSample& sample) {
  const std::string_view value_text = first_token(rest);
  if (value_text.empty())
    return fail("", fmt::format("the sample of {} has no value", excerpt(sample.name)));
  const auto value = read_float(value_text);
  if (!value) {
    return fail("", fmt::format("the value \"{}\" of {} is not a number (a float, +Inf, -Inf "
                                "or NaN)",
                                excerpt(value_text), excerpt(sample.name)));
  }
  sample.value = *value;
  rest = skip_blanks(rest.substr(value_text.size()));
  if (rest.empty()) return {};
  const std::string_view timestamp_text = first_token(rest);
  const auto timestamp = read_integer(timestamp_text);
  if (!timestamp) {
    return fail("", fmt::format("\"{}\" after the value of {} is not a timestamp (integer "
                                "milliseconds)",
                                excerpt(timestamp_text), excerpt(sample.name)));
  }
  sample.timestamp_ms = *timestamp;
  if (!skip_blanks(rest.substr(timestamp_text.size())).empty()) {
    return fail("", fmt::format("unexpected text after the timestamp of {}", excerpt(sample.name)));
  }
  return {};
}

// A sample line (trimmed, not empty, not a comment).
Result<MetricSample> read_sample(std::string_view line) {
  MetricSample sample;
  const std::string_view name = name_prefix(line, true);
  if (!is_name(name, true)) {
    return fail("", fmt::format("expected a metric name at \"{}\"", excerpt(line)));
  }
  sample.name = name;
  std::string_view rest = line.substr(name.size());
  const std::string_view after_blanks = skip_blanks(rest);
  if (after_blanks.starts_with('{')) {
    rest = after_blanks.substr(1);
    auto labels = read_labels(rest);
    if (!labels) return std::unexpected(labels.error());
    sample.labels = std::move(*labels);
  } else if (!after_blanks.empty() && after_blanks.size() == rest.size()) {
    return fail("", fmt::format("expected a blank or '{{' after the metric name {} at \"{}\"",
                                excerpt(sample.name), excerpt(rest)));
  }
  auto value = read_value_and_timestamp(skip_blanks(rest), sample);
  if (!value) return std::unexpected(value.error());
  return sample;
}

std::optional<MetricType> metric_type_named(std::string_view name) {
  for (const MetricType type : {MetricType::kUntyped, MetricType::kCounter, MetricType::kGauge,
                                MetricType::kHistogram, MetricType::kSummary}) {
    if (metric_type_name(type) == name) return type;
  }
  return std::nullopt;
}

// HELP text: \\ and \n unescaped, any other backslash kept.
std::string unescape_help(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '\\' || text[i + 1] == 'n')) {
      out += text[++i] == 'n' ? '\n' : '\\';
    } else {
      out += text[i];
    }
  }
  return out;
}

// The identity of a series: its name and its labels sorted by name, each value prefixed with its
// length so that no two label sets give the same key.
std::string series_key(const MetricSample& sample) {
  std::vector<const MetricLabel*> labels;
  labels.reserve(sample.labels.size());
  for (const MetricLabel& label : sample.labels) labels.push_back(&label);
  std::ranges::sort(labels, {}, &MetricLabel::name);
  std::string key = sample.name;
  for (const MetricLabel* label : labels) {
    key += fmt::format("{{{}={}:{}", label->name, label->value.size(), label->value);
  }
  return key;
}

std::optional<std::string_view> label_value(const MetricSample& sample, std::string_view name) {
  for (const MetricLabel& label : sample.labels) {
    if (label.name == name) return label.value;
  }
  return std::nullopt;
}

// The upper bound a bucket's `le` label gives, or nullopt when it has none or it is no bound.
std::optional<double> bucket_bound(const MetricSample& bucket) {
  const auto le = label_value(bucket, "le");
  if (!le) return std::nullopt;
  const auto bound = read_float(*le);
  if (!bound || std::isnan(*bound)) return std::nullopt;
  return bound;
}

// The metric a sample belongs to if its name carries `suffix`.
std::optional<std::string_view> without_suffix(std::string_view name, std::string_view suffix) {
  if (!name.ends_with(suffix)) return std::nullopt;
  return name.substr(0, name.size() - suffix.size());
}

// Reads the lines one at a time, checking what spans lines: one TYPE and HELP line a metric, the
// TYPE before the samples, no series twice, the caps.
class ExpositionReader {
 public:
  Result<void> read_line(std::string_view line) {
    line = trim(line);
    if (line.empty()) return {};
    if (line.starts_with('#')) return read_comment(skip_blanks(line.substr(1)));
    return read_sample_line(line);
  }

  Exposition take() { return std::move(exposition_); }

 private:
  Result<void> read_comment(std::string_view text) {
    const std::string_view keyword = first_token(text);
    if (keyword != "HELP" && keyword != "TYPE") return {};
    std::string_view rest = skip_blanks(text.substr(keyword.size()));
    const std::string_view name = first_token(rest);
    if (!is_name(name, true)) {
      return fail(
          "", fmt::format("the {} line has no valid metric name (\"{}\")", keyword, excerpt(name)));
    }
    rest = skip_blanks(rest.substr(name.size()));
    return keyword == "HELP" ? read_help(name, rest) : read_type(name, rest);
  }

  Result<void> read_help(std::string_view name, std::string_view text) {
    if (exposition_.help.contains(name)) {
      return fail("", fmt::format("a second HELP line for {}", excerpt(name)));
    }
    std::string help = unescape_help(text);
    if (!valid_utf8(help)) {
      return fail("", fmt::format("the HELP text of {} is not UTF-8", excerpt(name)));
    }
    exposition_.help.emplace(std::string(name), std::move(help));
    return {};
  }

  Result<void> read_type(std::string_view name, std::string_view text) {
    const auto type = metric_type_named(first_token(text));
    if (!type) {
      return fail("", fmt::format("unknown type \"{}\" for {} (counter, gauge, histogram, "
                                  "summary or untyped)",
                                  excerpt(first_token(text)), excerpt(name)));
    }
    if (!skip_blanks(text.substr(first_token(text).size())).empty()) {
      return fail("", fmt::format("unexpected text after the type of {}", excerpt(name)));
    }
    if (exposition_.types.contains(name)) {
      return fail("", fmt::format("a second TYPE line for {}", excerpt(name)));
    }
    if (has_samples_of(name, *type)) {
      return fail("", fmt::format("the TYPE line of {} comes after its samples", excerpt(name)));
    }
    exposition_.types.emplace(std::string(name), *type);
    return {};
  }

  // Whether samples of metric `name`, of `type`, were read already.
  [[nodiscard]] bool has_samples_of(std::string_view name, MetricType type) const {
    const std::string base(name);
    std::vector<std::string> names{base};
    if (type == MetricType::kHistogram || type == MetricType::kSummary) {
      names.insert(names.end(), {base + "_sum", base + "_count"});
    }
    if (type == MetricType::kHistogram) names.push_back(base + "_bucket");
    return std::ranges::any_of(names,
                               [&](const std::string& n) { return sample_names_.contains(n); });
  }

  Result<void> read_sample_line(std::string_view line) {
    if (exposition_.samples.size() == kMaxExpositionSeries) {
      return fail("", fmt::format("more than {} samples", kMaxExpositionSeries));
    }
    auto sample = read_sample(line);
    if (!sample) return std::unexpected(sample.error());
    if (auto bucket = check_bucket(*sample); !bucket) return bucket;
    if (!series_.insert(series_key(*sample)).second) {
      return fail("",
                  fmt::format("a second sample of {} with the same labels", excerpt(sample->name)));
    }
    sample_names_.insert(sample->name);
    exposition_.samples.push_back(std::move(*sample));
    return {};
  }

  // A bucket of a metric typed histogram needs a bound.
  Result<void> check_bucket(const MetricSample& sample) const {
    const auto histogram = without_suffix(sample.name, "_bucket");
    if (!histogram) return {};
    const auto type = exposition_.types.find(*histogram);
    if (type == exposition_.types.end() || type->second != MetricType::kHistogram) return {};
    if (!bucket_bound(sample)) {
      return fail("", fmt::format("a bucket of histogram {} has no `le` label that is a number "
                                  "or +Inf",
                                  excerpt(*histogram)));
    }
    return {};
  }

  Exposition exposition_;
  std::set<std::string, std::less<>> sample_names_;
  std::unordered_set<std::string> series_;
};

std::string line_field(std::size_t number) { return fmt::format("line {}", number); }

// ---- Writing ----

std::string format_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);  // the shortest text that reads back to the same double
}

std::string escaped(std::string_view text, bool quote) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_sample(const MetricSample& sample) {
  std::string line = sample.name;
  if (!sample.labels.empty()) {
    line += '{';
    for (std::size_t i = 0; i < sample.labels.size(); ++i) {
      if (i > 0) line += ',';
      line +=
          fmt::format("{}=\"{}\"", sample.labels[i].name, escaped(sample.labels[i].value, true));
    }
    line += '}';
  }
  line += ' ' + format_float(sample.value);
  if (sample.timestamp_ms) line += fmt::format(" {}", *sample.timestamp_ms);
  return line + '\n';
}

// ---- Names ----

ReplicaMetricNames vllm_names() {
  ReplicaMetricNames names;
  names.requests_waiting = "vllm:num_requests_waiting";
  names.requests_running = "vllm:num_requests_running";
  names.requests_completed = "vllm:request_success_total";
  names.latency_sum = "vllm:e2e_request_latency_seconds_sum";
  names.latency_count = "vllm:e2e_request_latency_seconds_count";
  names.latency_unit = TimeUnit::kSeconds;
  names.latency_histogram = "vllm:e2e_request_latency_seconds";
  names.latency_histogram_unit = TimeUnit::kSeconds;
  names.queue_time_sum = "vllm:request_queue_time_seconds_sum";
  names.queue_time_count = "vllm:request_queue_time_seconds_count";
  names.queue_time_unit = TimeUnit::kSeconds;
  return names;
}

ReplicaMetricNames triton_names() {
  ReplicaMetricNames names;
  names.requests_waiting = "nv_inference_pending_request_count";
  names.requests_completed = "nv_inference_request_success";
  names.latency_sum = "nv_inference_request_duration_us";
  names.latency_count = "nv_inference_request_success";
  names.latency_unit = TimeUnit::kMicroseconds;
  names.queue_time_sum = "nv_inference_queue_duration_us";
  names.queue_time_count = "nv_inference_request_success";
  names.queue_time_unit = TimeUnit::kMicroseconds;
  return names;
}

struct NameKey {
  std::string_view key;
  std::string ReplicaMetricNames::*member;
};
constexpr std::array<NameKey, 8> kNameKeys{{
    {"requests_waiting", &ReplicaMetricNames::requests_waiting},
    {"requests_running", &ReplicaMetricNames::requests_running},
    {"requests_completed", &ReplicaMetricNames::requests_completed},
    {"latency_sum", &ReplicaMetricNames::latency_sum},
    {"latency_count", &ReplicaMetricNames::latency_count},
    {"latency_histogram", &ReplicaMetricNames::latency_histogram},
    {"queue_time_sum", &ReplicaMetricNames::queue_time_sum},
    {"queue_time_count", &ReplicaMetricNames::queue_time_count},
}};

struct UnitKey {
  std::string_view key;
  TimeUnit ReplicaMetricNames::*member;
};
constexpr std::array<UnitKey, 3> kUnitKeys{{
    {"latency_unit", &ReplicaMetricNames::latency_unit},
    {"latency_histogram_unit", &ReplicaMetricNames::latency_histogram_unit},
    {"queue_time_unit", &ReplicaMetricNames::queue_time_unit},
}};

std::optional<TimeUnit> time_unit_named(std::string_view name) {
  for (const TimeUnit unit :
       {TimeUnit::kSeconds, TimeUnit::kMilliseconds, TimeUnit::kMicroseconds}) {
    if (time_unit_name(unit) == name) return unit;
  }
  return std::nullopt;
}

// ---- Figures ----

// `value` as a whole number if it is finite, non-negative and far within int64.
std::optional<std::int64_t> whole_number(double value) {
  constexpr double kLargest = 9.0e18;
  if (!(value >= 0 && value <= kLargest)) return std::nullopt;  // NaN fails both
  return std::llround(value);
}

double to_ms(double value, TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return value * 1000;
    case TimeUnit::kMilliseconds:
      return value;
    case TimeUnit::kMicroseconds:
      return value / 1000;
  }
  return value;
}

// The sum over its series of the metric `name` now, or nullopt when nothing is named or exposed.
std::optional<double> gauge_total(const Exposition& metrics, std::string_view name) {
  if (name.empty()) return std::nullopt;
  std::optional<double> total;
  for (const MetricSample& sample : metrics.samples) {
    if (sample.name == name) total = total.value_or(0) + sample.value;
  }
  return total;
}

// The increase of one counter series from `before` to `now`: the new value after a reset.
double series_increase(double before, double now) { return now >= before ? now - before : now; }

// The values of the series of the metric `name`, by series key.
std::unordered_map<std::string, double> series_values(const Exposition& metrics,
                                                      std::string_view name) {
  std::unordered_map<std::string, double> values;
  for (const MetricSample& sample : metrics.samples) {
    if (sample.name == name) values.emplace(series_key(sample), sample.value);
  }
  return values;
}

// The increase of sample `now`'s series since `before` (from 0 when it is new).
double increase_since(const std::unordered_map<std::string, double>& before,
                      const MetricSample& now) {
  const auto earlier = before.find(series_key(now));
  return series_increase(earlier == before.end() ? 0 : earlier->second, now.value);
}

// The increase of the counter `name` summed over its series, or nullopt when nothing is named or
// the current scrape does not expose it.
std::optional<double> counter_increase(const Exposition& previous, const Exposition& current,
                                       std::string_view name) {
  if (name.empty()) return std::nullopt;
  const auto before = series_values(previous, name);
  std::optional<double> total;
  for (const MetricSample& sample : current.samples) {
    if (sample.name == name) total = total.value_or(0) + increase_since(before, sample);
  }
  return total;
}

// The increases of histogram `family`'s buckets, one per series (histogram_quantile adds up
// those of equal bounds), or nullopt when it has none or a bucket has no bound.
std::optional<std::vector<HistogramBucket>> bucket_increases(const Exposition& previous,
                                                             const Exposition& current,
                                                             std::string_view family) {
  if (family.empty()) return std::nullopt;
  const std::string bucket_name = std::string(family) + "_bucket";
  const auto before = series_values(previous, bucket_name);
  std::vector<HistogramBucket> buckets;
  for (const MetricSample& sample : current.samples) {
    if (sample.name != bucket_name) continue;
    const auto bound = bucket_bound(sample);
    if (!bound) return std::nullopt;
    buckets.push_back({*bound, increase_since(before, sample)});
  }
  if (buckets.empty()) return std::nullopt;
  return buckets;
}

// The mean time of the requests finished over the interval, in ms.
std::optional<std::int64_t> mean_ms(const Exposition& previous, const Exposition& current,
                                    std::string_view sum, std::string_view count, TimeUnit unit) {
  const auto total = counter_increase(previous, current, sum);
  const auto requests = counter_increase(previous, current, count);
  if (!total || !requests || !(*requests > 0)) return std::nullopt;
  return whole_number(to_ms(*total / *requests, unit));
}

// Buckets sorted by bound, those of equal bounds added up.
std::vector<HistogramBucket> coalesced(std::vector<HistogramBucket> buckets) {
  std::ranges::sort(buckets, {}, &HistogramBucket::upper_bound);
  std::vector<HistogramBucket> out;
  for (const HistogramBucket& bucket : buckets) {
    if (!out.empty() && !(out.back().upper_bound < bucket.upper_bound)) {
      out.back().count += bucket.count;
    } else {
      out.push_back(bucket);
    }
  }
  return out;
}

}  // namespace

std::string_view metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kUntyped:
      return "untyped";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

Result<Exposition> parse_exposition(std::string_view text) {
  if (text.size() > kMaxExpositionBytes) {
    return fail("", fmt::format("the metrics are larger than {} MiB", kMaxExpositionBytes >> 20));
  }
  ExpositionReader reader;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (++number > kMaxExpositionLines) {
      return fail(line_field(number), fmt::format("more than {} lines", kMaxExpositionLines));
    }
    if (line.size() > kMaxExpositionLineBytes) {
      return fail(line_field(number),
                  fmt::format("longer than {} KiB", kMaxExpositionLineBytes >> 10));
    }
    if (auto read = reader.read_line(line); !read) {
      return fail(line_field(number), read.error().reason);
    }
  }
  return reader.take();
}

std::string format_exposition(const Exposition& exposition) {
  std::string text;
  for (const auto& [name, help] : exposition.help) {
    text += fmt::format("# HELP {} {}\n", name, escaped(help, false));
  }
  for (const auto& [name, type] : exposition.types) {
    text += fmt::format("# TYPE {} {}\n", name, metric_type_name(type));
  }
  for (const MetricSample& sample : exposition.samples) text += format_sample(sample);
  return text;
}

std::string_view time_unit_name(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return "s";
    case TimeUnit::kMilliseconds:
      return "ms";
    case TimeUnit::kMicroseconds:
      return "us";
  }
  return "s";
}

Result<ReplicaMetricNames> replica_metric_preset(std::string_view preset) {
  if (preset == "vllm") return vllm_names();
  if (preset == "triton") return triton_names();
  if (preset == "none") return ReplicaMetricNames{};
  return fail("preset",
              fmt::format("unknown preset \"{}\" (vllm, triton or none)", excerpt(preset)));
}

Result<void> set_replica_metric(ReplicaMetricNames& names, std::string_view key,
                                std::string_view value) {
  for (const NameKey& name : kNameKeys) {
    if (name.key != key) continue;
    if (!value.empty() && !is_name(value, true)) {
      return fail(std::string(key), fmt::format("\"{}\" is not a metric name", excerpt(value)));
    }
    names.*name.member = value;
    return {};
  }
  for (const UnitKey& unit_key : kUnitKeys) {
    if (unit_key.key != key) continue;
    const auto unit = time_unit_named(value);
    if (!unit) {
      return fail(std::string(key),
                  fmt::format("unknown unit \"{}\" (s, ms or us)", excerpt(value)));
    }
    names.*unit_key.member = *unit;
    return {};
  }
  return fail(excerpt(key),
              "not a metric of a replica (requests_waiting, requests_running, "
              "requests_completed, latency_sum, latency_count, latency_unit, "
              "latency_histogram, latency_histogram_unit, queue_time_sum, "
              "queue_time_count or queue_time_unit)");
}

Result<ReplicaMetricNames> replica_metric_names(
    std::string_view preset, const std::map<std::string, std::string, std::less<>>& overrides) {
  auto names = replica_metric_preset(preset);
  if (!names) return names;
  for (const auto& [key, value] : overrides) {
    if (auto set = set_replica_metric(*names, key, value); !set) {
      return std::unexpected(set.error());
    }
  }
  return names;
}

ReplicaFigures extract_replica_figures(const ReplicaMetricNames& names,
                                       const ReplicaScrape& current) {
  ReplicaFigures figures;
  if (const auto waiting = gauge_total(current.metrics, names.requests_waiting)) {
    figures.requests_waiting_milli = whole_number(*waiting * 1000);
  }
  if (const auto running = gauge_total(current.metrics, names.requests_running)) {
    figures.requests_in_flight_milli = whole_number(*running * 1000);
  }
  return figures;
}

ReplicaFigures extract_replica_figures(const ReplicaMetricNames& names,
                                       const ReplicaScrape& previous,
                                       const ReplicaScrape& current) {
  ReplicaFigures figures = extract_replica_figures(names, current);
  // In double: the difference of two arbitrary int64 may overflow one.
  const double interval_ms =
      static_cast<double>(current.taken_at_ms) - static_cast<double>(previous.taken_at_ms);
  if (!(interval_ms > 0)) return figures;
  const Exposition& before = previous.metrics;
  const Exposition& now = current.metrics;

  if (const auto finished = counter_increase(before, now, names.requests_completed)) {
    figures.requests_per_s_milli = whole_number(*finished * 1000 * 1000 / interval_ms);
  }
  figures.mean_latency_ms =
      mean_ms(before, now, names.latency_sum, names.latency_count, names.latency_unit);
  figures.mean_queue_time_ms =
      mean_ms(before, now, names.queue_time_sum, names.queue_time_count, names.queue_time_unit);
  if (const auto buckets = bucket_increases(before, now, names.latency_histogram)) {
    if (const auto p95 = histogram_quantile(0.95, *buckets)) {
      figures.p95_latency_ms = whole_number(to_ms(*p95, names.latency_histogram_unit));
    }
  }
  if (const auto latency = counter_increase(before, now, names.latency_sum)) {
    figures.mean_concurrency_milli =
        whole_number(to_ms(*latency, names.latency_unit) * 1000 / interval_ms);
  }
  return figures;
}

std::optional<double> histogram_quantile(double quantile, std::vector<HistogramBucket> buckets) {
  if (!(quantile >= 0 && quantile <= 1)) return std::nullopt;
  const bool unusable = std::ranges::any_of(buckets, [](const HistogramBucket& bucket) {
    return std::isnan(bucket.upper_bound) || !std::isfinite(bucket.count);
  });
  if (unusable) return std::nullopt;
  buckets = coalesced(std::move(buckets));
  if (buckets.size() < 2 || !(buckets.back().upper_bound >= kInfinity)) return std::nullopt;
  // Counts that fall from one bucket to the next (series reset apart, a scrape taken while the
  // replica updated its buckets) are raised to the one before, as Prometheus does.
  for (std::size_t i = 1; i < buckets.size(); ++i) {
    buckets[i].count = std::max(buckets[i].count, buckets[i - 1].count);
  }
  const double observations = buckets.back().count;
  if (!(observations > 0 && std::isfinite(observations))) return std::nullopt;
  double rank = quantile * observations;
  const auto found = std::ranges::find_if(
      buckets, [&](const HistogramBucket& bucket) { return bucket.count >= rank; });
  const auto b = static_cast<std::size_t>(found - buckets.begin());
  if (b == buckets.size() - 1) return buckets[b - 1].upper_bound;
  if (b == 0 && buckets[0].upper_bound <= 0) return buckets[0].upper_bound;
  double start = 0;
  const double end = buckets[b].upper_bound;
  double count = buckets[b].count;
  if (b > 0) {
    start = buckets[b - 1].upper_bound;
    count -= buckets[b - 1].count;
    rank -= buckets[b - 1].count;
  }
  if (!(count > 0)) return end;  // only a quantile of 0 lands in an empty bucket
  const double interpolated = start + (end - start) * (rank / count);
  if (std::isnan(interpolated)) return std::nullopt;  // a bucket bounded below by -Inf
  return interpolated;
}

}  // namespace tidepool
