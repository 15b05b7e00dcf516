#include "server/history.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/split_text.h"

namespace tidepool {
namespace {

constexpr std::int64_t kHourSeconds = 3600;

std::int64_t hour_of(std::int64_t unix_ms) {
  const std::int64_t seconds = unix_ms / 1000;
  return seconds - seconds % kHourSeconds;
}

// "name{a=1,b=2}" into "name" and its labels.
std::pair<std::string, nlohmann::json> split_key(const std::string& key) {
  const std::size_t brace = key.find('{');
  if (brace == std::string::npos || key.back() != '}') return {key, nlohmann::json::object()};
  nlohmann::json labels = nlohmann::json::object();
  const std::string inner = key.substr(brace + 1, key.size() - brace - 2);
  for (const std::string_view pair : split_text(inner, ',')) {
    if (const std::size_t eq = pair.find('='); eq != std::string_view::npos) {
      labels[std::string(pair.substr(0, eq))] = pair.substr(eq + 1);
    }
  }
  return {key.substr(0, brace), std::move(labels)};
}

}  // namespace

std::string history_key(const std::string& name,
                        const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return name;
  std::string key = name + "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) key += ",";
    key += labels[i].first + "=" + labels[i].second;
  }
  return key + "}";
}

std::optional<std::string> history_label(const std::string& key, const std::string& label) {
  const nlohmann::json labels = split_key(key).second;
  const auto it = labels.find(label);
  if (it == labels.end()) return std::nullopt;
  return it->get<std::string>();
}

History::History(Millis interval, std::int64_t hours_kept)
    : interval_(std::max<Millis>(interval, std::chrono::seconds(1))),
      hours_kept_(std::max<std::int64_t>(hours_kept, 1)) {}

std::string History::record_key(std::int64_t hour) const {
  return std::string(kKeyPrefix) + std::to_string((hour / kHourSeconds) % hours_kept_);
}

std::string History::encode(std::int64_t hour, const Hour& h) const {
  nlohmann::json series = nlohmann::json::object();
  for (const auto& [key, column] : h.series) {
    nlohmann::json values = nlohmann::json::array();
    for (const std::optional<std::int64_t>& v : column) {
      values.push_back(v ? nlohmann::json(*v) : nlohmann::json(nullptr));
    }
    series[key] = std::move(values);
  }
  return nlohmann::json{{"hour", hour}, {"at", h.at_ms}, {"series", std::move(series)}}.dump();
}

void History::drop_before(std::int64_t hour) {
  hours_.erase(hours_.begin(), hours_.lower_bound(hour));
}

void History::load(const std::vector<KeyedRecord>& settings, Instant now) {
  hours_.clear();
  const std::int64_t current = hour_of(unix_ms(now));
  const std::int64_t oldest = current - (hours_kept_ - 1) * kHourSeconds;
  for (const KeyedRecord& setting : settings) {
    if (!setting.key.starts_with(kKeyPrefix)) continue;
    const auto value = nlohmann::json::parse(setting.document, nullptr, false);
    if (!value.is_object() || !value.contains("hour") || !value["hour"].is_number_integer() ||
        !value.contains("at") || !value["at"].is_array() || !value.contains("series") ||
        !value["series"].is_object()) {
      continue;
    }
    const auto hour = value["hour"].get<std::int64_t>();
    if (hour < oldest || hour > current || hour % kHourSeconds != 0) continue;
    Hour h;
    bool whole = true;
    for (const auto& at : value["at"]) {
      if (!at.is_number_integer()) whole = false;
      if (whole) h.at_ms.push_back(at.get<std::int64_t>());
    }
    for (const auto& [key, column] : value["series"].items()) {
      if (!column.is_array() || column.size() != h.at_ms.size()) whole = false;
      if (!whole) break;
      auto& values = h.series[key];
      for (const auto& v : column) {
        if (v.is_number_integer()) {
          values.emplace_back(v.get<std::int64_t>());
        } else {
          values.emplace_back(std::nullopt);
        }
      }
    }
    if (whole) hours_[hour] = std::move(h);
  }
  next_ = now;
  if (!hours_.empty() && !hours_.rbegin()->second.at_ms.empty()) {
    const std::int64_t last = hours_.rbegin()->second.at_ms.back();
    const std::int64_t every = interval_.count();
    next_ = Instant{Millis{(last / every + 1) * every}};
  }
}

void History::record(Instant now, const HistoryValues& values, Batch& batch) {
  if (now < next_) return;
  const std::int64_t at = unix_ms(now);
  const std::int64_t hour = hour_of(at);
  drop_before(hour - (hours_kept_ - 1) * kHourSeconds);
  Hour& h = hours_[hour];
  const std::size_t n = h.at_ms.size();
  h.at_ms.push_back(at);
  for (auto& [key, column] : h.series) column.emplace_back(std::nullopt);
  for (const auto& [key, value] : values) {
    auto [it, added] = h.series.try_emplace(key, n + 1, std::nullopt);
    it->second.back() = value;
  }
  const std::int64_t every = interval_.count();
  next_ = Instant{Millis{(at / every + 1) * every}};
  std::string record = encode(hour, h);
  if (record.size() > kMostRecordBytes) {
    ++too_large_;
    return;
  }
  batch.settings.push_back(KeyedRecord{record_key(hour), std::move(record)});
}

nlohmann::json History::query(const HistoryQuery& q) const {
  const std::int64_t from = unix_ms(q.from);
  const std::int64_t to = std::max(unix_ms(q.to), from);
  const std::int64_t every = interval_.count();
  std::int64_t step = std::max(q.step.count(), every);
  // At most kMostPoints per series: a longer span takes whole intervals more per point.
  const std::int64_t least = (to - from + kMostPoints - 1) / kMostPoints;
  if (step < least) step = (least + every - 1) / every * every;
  const std::set<std::string> names(q.names.begin(), q.names.end());
  // Whether the caller wants a series, decided once per series.
  std::map<std::string, bool, std::less<>> decided;
  const auto wanted = [&](const std::string& key) {
    const auto [it, added] = decided.try_emplace(key, false);
    if (added) {
      it->second = (names.empty() || names.contains(key.substr(0, key.find('{')))) &&
                   (!q.visible || q.visible(key));
    }
    return it->second;
  };
  // Per step bucket: the samples in it, and each series' sum over them.
  const auto buckets = static_cast<std::size_t>((to - from) / step + 1);
  std::vector<std::int64_t> samples(buckets, 0);
  std::map<std::string, std::vector<std::int64_t>> sums;
  std::vector<
      std::pair<const std::vector<std::optional<std::int64_t>>*, std::vector<std::int64_t>*>>
      columns;
  for (auto it = hours_.lower_bound(hour_of(from)); it != hours_.end() && it->first * 1000 < to;
       ++it) {
    const Hour& h = it->second;
    columns.clear();
    for (const auto& [key, column] : h.series) {
      if (!wanted(key)) continue;
      auto [sum, added] = sums.try_emplace(key, buckets, 0);
      columns.emplace_back(&column, &sum->second);
    }
    for (std::size_t i = 0; i < h.at_ms.size(); ++i) {
      const std::int64_t at = h.at_ms[i];
      if (at < from || at >= to) continue;
      const auto bucket = static_cast<std::size_t>((at - from) / step);
      ++samples[bucket];
      for (const auto& [column, sum] : columns) {
        if ((*column)[i]) (*sum)[bucket] += *(*column)[i];
      }
    }
  }
  nlohmann::json series = nlohmann::json::array();
  for (const auto& [key, by_bucket] : sums) {
    auto [name, labels] = split_key(key);
    nlohmann::json points = nlohmann::json::array();
    for (std::size_t bucket = 0; bucket < buckets; ++bucket) {
      const std::int64_t count = samples[bucket];
      if (count == 0) continue;
      const std::int64_t total = by_bucket[bucket];
      // The mean, rounded half away from zero.
      const std::int64_t mean =
          total >= 0 ? (total + count / 2) / count : (total - count / 2) / count;
      points.push_back(
          nlohmann::json::array({(from + static_cast<std::int64_t>(bucket) * step) / 1000, mean}));
    }
    series.push_back(
        {{"name", std::move(name)}, {"labels", std::move(labels)}, {"points", std::move(points)}});
  }
  return {{"from", from / 1000},
          {"to", to / 1000},
          {"step_s", step / 1000},
          {"interval_s", every / 1000},
          {"series", std::move(series)}};
}

}  // namespace tidepool
