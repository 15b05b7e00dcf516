#include "api/step_report.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "api/body_fields.h"

namespace tidepool {
namespace {

using body_fields::index_path;
using body_fields::Json;
using body_fields::key_path;

constexpr std::int64_t kStepFigureMax = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kStepMaxDigits = 19;

bool is_step_blank(char c) { return c == ' ' || c == '\t'; }

// A decimal integer of digits only, at most kStepMaxDigits of them (it fits an int64).
std::optional<std::int64_t> parse_step_count(std::string_view text) {
  if (text.empty() || text.size() > kStepMaxDigits) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value > static_cast<std::uint64_t>(kStepFigureMax)) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

// A job's text as an error may show it: printable and short.
std::string shown_step_text(std::string_view text) { return body_fields::printable(text, 32); }

}  // namespace

Result<std::optional<StepSample>> parse_step_line(std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (line.size() > kMaxStepLineBytes) {
    return fail("line", fmt::format("is longer than {} bytes", kMaxStepLineBytes));
  }
  std::size_t first = 0;
  while (first < line.size() && is_step_blank(line[first])) ++first;
  if (first == line.size() || line[first] == '#') return std::optional<StepSample>();
  StepSample sample;
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> time;
  std::optional<std::int64_t> compute;
  std::optional<std::int64_t> allreduce;
  std::optional<std::int64_t> bytes;
  const std::array<std::pair<std::string_view, std::optional<std::int64_t>*>, 5> known{{
      {"step", &step},
      {"time_us", &time},
      {"compute_us", &compute},
      {"allreduce_us", &allreduce},
      {"allreduce_bytes", &bytes},
  }};
  std::size_t at = first;
  while (at < line.size()) {
    std::size_t end = at;
    while (end < line.size() && !is_step_blank(line[end])) ++end;
    const std::string_view word = line.substr(at, end - at);
    const auto equals = word.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      return fail("line", fmt::format("'{}' is not key=value", shown_step_text(word)));
    }
    const std::string_view key = word.substr(0, equals);
    const std::string_view text = word.substr(equals + 1);
    bool found = false;
    for (const auto& [name, slot] : known) {
      if (key != name) continue;
      found = true;
      if (slot->has_value()) return fail(std::string(name), "is given twice");
      *slot = parse_step_count(text);
      if (!slot->has_value()) {
        return fail(std::string(name), fmt::format("'{}' is not a whole number 0..{} (digits only)",
                                                   shown_step_text(text), kStepFigureMax));
      }
    }
    if (!found && !key.starts_with("x_")) {
      return fail("line", fmt::format("unknown key '{}'; expected step, time_us, compute_us, "
                                      "allreduce_us, allreduce_bytes or x_<anything>",
                                      shown_step_text(key)));
    }
    at = end;
    while (at < line.size() && is_step_blank(line[at])) ++at;
  }
  if (!step) return fail("step", "is missing");
  if (!time) return fail("time_us", "is missing");
  sample.step = *step;
  sample.step_us = *time;
  sample.compute_us = compute;
  sample.allreduce_us = allreduce;
  sample.allreduce_bytes = bytes;
  if (auto ok = check_step_sample(sample); !ok) return std::unexpected(ok.error());
  return std::optional<StepSample>(sample);
}

void StepLineReader::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    // Keep at most one byte past the limit: enough to know the line is too long.
    if (!overlong_) {
      const std::size_t room = kMaxStepLineBytes + 1 - partial_.size();
      if (piece.size() > room) {
        overlong_ = true;
        partial_.clear();
      } else {
        partial_.append(piece);
      }
    }
    if (newline == std::string_view::npos) return;
    line_done();
    bytes.remove_prefix(newline + 1);
  }
}

void StepLineReader::line_done() {
  Result<std::optional<StepSample>> parsed =
      overlong_ ? fail("line", fmt::format("is longer than {} bytes", kMaxStepLineBytes))
                : parse_step_line(partial_);
  partial_.clear();
  overlong_ = false;
  if (!parsed) {
    if (stats_.refused_lines < kStepFigureMax) ++stats_.refused_lines;
    if (!first_refusal_) first_refusal_ = parsed.error();
    return;
  }
  if (*parsed) stats_.add(**parsed);
}

StepStats StepLineReader::take() {
  StepStats out = std::move(stats_);
  stats_ = StepStats{};
  first_refusal_.reset();
  return out;
}

nlohmann::json step_stats_to_json(const StepStats& s) {
  Json buckets = Json::array();
  for (const auto& [bucket, count] : s.steps.buckets()) buckets.push_back({bucket, count});
  return {{"steps", s.steps.count()},
          {"sum_us", s.steps.sum_us()},
          {"min_us", s.steps.min_us()},
          {"max_us", s.steps.max_us()},
          {"buckets", std::move(buckets)},
          {"compute_steps", s.compute_steps},
          {"compute_step_us", s.compute_step_us},
          {"compute_us", s.compute_us},
          {"allreduce_steps", s.allreduce_steps},
          {"allreduce_step_us", s.allreduce_step_us},
          {"allreduce_us", s.allreduce_us},
          {"allreduce_byte_steps", s.allreduce_byte_steps},
          {"allreduce_bytes", s.allreduce_bytes},
          {"last_step", s.last_step},
          {"refused_lines", s.refused_lines}};
}

Result<StepStats> step_stats_from_json(const nlohmann::json& value, const std::string& path) {
  if (auto ok = body_fields::check_keys(
          value, path, "a map of step figures",
          {"steps", "sum_us", "min_us", "max_us", "buckets", "compute_steps", "compute_step_us",
           "compute_us", "allreduce_steps", "allreduce_step_us", "allreduce_us",
           "allreduce_byte_steps", "allreduce_bytes", "last_step", "refused_lines"},
          false);
      !ok) {
    return std::unexpected(ok.error());
  }
  StepStats s;
  std::int64_t steps = 0;
  std::int64_t sum = 0;
  std::int64_t min = 0;
  std::int64_t max = 0;
  const auto figure = body_fields::integer_in(0, kStepFigureMax);
  // The required ones.
  for (auto [key, out] :
       {std::pair{"steps", &steps}, std::pair{"sum_us", &sum}, std::pair{"min_us", &min},
        std::pair{"max_us", &max}, std::pair{"compute_steps", &s.compute_steps},
        std::pair{"compute_step_us", &s.compute_step_us}, std::pair{"compute_us", &s.compute_us},
        std::pair{"allreduce_steps", &s.allreduce_steps},
        std::pair{"allreduce_step_us", &s.allreduce_step_us},
        std::pair{"allreduce_us", &s.allreduce_us},
        std::pair{"allreduce_byte_steps", &s.allreduce_byte_steps},
        std::pair{"allreduce_bytes", &s.allreduce_bytes}}) {
    auto given = body_fields::required(value, path, key);
    if (!given) return std::unexpected(given.error());
    auto read = figure(**given, key_path(path, key));
    if (!read) return std::unexpected(read.error());
    *out = *read;
  }
  if (auto ok = body_fields::first_failure(
          {body_fields::read_optional(value, path, "last_step", s.last_step,
                                      body_fields::integer_in(-1, kMaxStepNumber)),
           body_fields::read_optional(value, path, "refused_lines", s.refused_lines, figure)});
      !ok) {
    return std::unexpected(ok.error());
  }
  const std::string buckets_path = key_path(path, "buckets");
  auto listed = body_fields::required(value, path, "buckets");
  if (!listed) return std::unexpected(listed.error());
  if (auto ok = body_fields::check_list(
          **listed, buckets_path, static_cast<std::size_t>(StepHistogram::kBuckets), "buckets");
      !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<std::pair<int, std::int64_t>> buckets;
  std::int64_t counted = 0;
  for (std::size_t i = 0; i < (*listed)->size(); ++i) {
    const Json& pair = (**listed)[i];
    const std::string at = index_path(buckets_path, i);
    if (!pair.is_array() || pair.size() != 2) {
      return fail(at, fmt::format("expected [bucket, count], got {}", body_fields::describe(pair)));
    }
    auto bucket =
        body_fields::read_integer(pair[0], index_path(at, 0), 0, StepHistogram::kBuckets - 1);
    if (!bucket) return std::unexpected(bucket.error());
    auto count = body_fields::read_integer(pair[1], index_path(at, 1), 1, kStepFigureMax);
    if (!count) return std::unexpected(count.error());
    if (*count > kStepFigureMax - counted) return fail(at, "the counts add up past 2^63-1");
    counted += *count;
    buckets.emplace_back(static_cast<int>(*bucket), *count);
  }
  if (counted != steps) {
    return fail(buckets_path,
                fmt::format("the counts add up to {}, but steps is {}", counted, steps));
  }
  auto histogram = StepHistogram::from_parts(buckets, sum, min, max);
  if (!histogram) {
    return fail(key_path(path, histogram.error().field), histogram.error().reason);
  }
  s.steps = std::move(*histogram);
  for (auto [part, whole, part_name, whole_name] :
       {std::tuple{s.compute_steps, steps, "compute_steps", "steps"},
        std::tuple{s.allreduce_steps, steps, "allreduce_steps", "steps"},
        std::tuple{s.allreduce_byte_steps, s.allreduce_steps, "allreduce_byte_steps",
                   "allreduce_steps"},
        std::tuple{s.compute_us, s.compute_step_us, "compute_us", "compute_step_us"},
        std::tuple{s.allreduce_us, s.allreduce_step_us, "allreduce_us", "allreduce_step_us"}}) {
    if (part > whole) {
      return fail(key_path(path, part_name),
                  fmt::format("{} is more than {} ({})", part, whole_name, whole));
    }
  }
  return s;
}

nlohmann::json step_summary_json(const StepStats& s, int ranks,
                                 std::optional<double> model_flops_per_step,
                                 double peak_flops_per_s) {
  Json out = Json::object();
  out["steps"] = s.steps.count();
  if (s.refused_lines != 0) out["refused_lines"] = s.refused_lines;
  if (s.last_step >= 0) out["last_step"] = s.last_step;
  if (s.steps.count() > 0) {
    out["mean_us"] = s.steps.mean_us();
    out["p50_us"] = s.steps.quantile_us(0.5);
    out["p90_us"] = s.steps.quantile_us(0.9);
    out["p99_us"] = s.steps.quantile_us(0.99);
    out["min_us"] = s.steps.min_us();
    out["max_us"] = s.steps.max_us();
  }
  if (auto share = s.comm_share()) {
    out["comm_share"] = share->share;
    out["comm_share_source"] = comm_share_source_name(share->source);
  }
  if (auto v = s.mean_compute_us()) out["mean_compute_us"] = *v;
  if (auto v = s.mean_allreduce_us()) out["mean_allreduce_us"] = *v;
  if (auto v = s.mean_allreduce_bytes()) out["mean_allreduce_bytes"] = *v;
  if (auto v = s.allreduce_alg_bytes_per_s()) out["allreduce_alg_bytes_per_s"] = *v;
  if (auto v = s.allreduce_bus_bytes_per_s(ranks)) {
    out["allreduce_bus_bytes_per_s"] = *v;
    out["allreduce_ranks"] = ranks;
  }
  if (model_flops_per_step) out["model_flops_per_step"] = *model_flops_per_step;
  if (peak_flops_per_s > 0) out["peak_flops_per_s"] = peak_flops_per_s;
  if (model_flops_per_step) {
    if (auto v = s.mfu(*model_flops_per_step, peak_flops_per_s)) out["mfu"] = *v;
  }
  return out;
}

}  // namespace tidepool
