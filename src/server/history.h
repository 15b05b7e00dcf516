// The server's own figures over time, for the charts of GET /v1/history: every `interval` (aligned
// to its multiples of Unix time) one sample of each series (an integer: thousandths of a GPU,
// jobs, micro-credits), kept for `hours_kept` hours.
//
// In the store, an hour's samples are one settings record, "history/<slot>", where the slot is
// the hour's number modulo hours_kept: a ring of keys, so the keyspace stays bounded without
// deleting anything; an hour older than the window is ignored when read back and overwritten by
// a later hour. A record is columnar: {"hour": unix seconds, "at": [unix ms...], "series":
// {"name{label=value,...}": [value or null...]}}, one value per sample; a series absent from a
// sample (a tenant with nothing used) is null there and reads as 0.
//
// Pure: the caller gives the time and the values, and commits the records.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/instant.h"
#include "store/store.h"

namespace tidepool {

// A sample: series key -> value. Keys name the series and its labels as Prometheus writes them:
// "used_gpus{tenant=vision,model=H100}" (labels in a fixed order, no quotes).
using HistoryValues = std::map<std::string, std::int64_t>;

// The series key of `name` with `labels` (in the order given).
[[nodiscard]] std::string history_key(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels = {});

// The value of `label` in a series key, if it has one.
[[nodiscard]] std::optional<std::string> history_label(const std::string& key,
                                                       const std::string& label);

struct HistoryQuery {
  Instant from;
  Instant to;      // excluded
  Millis step{0};  // points are the mean of the samples in each step (0: the sampling interval)
  // The series asked for, by name (empty: all); and those a caller may see (its tenant's).
  std::vector<std::string> names;
  std::function<bool(const std::string& key)> visible;
};

class History {
 public:
  static constexpr std::string_view kKeyPrefix = "history/";
  // The most points a query answers per series: a longer span gets a longer step.
  static constexpr std::int64_t kMostPoints = 2000;

  History(Millis interval, std::int64_t hours_kept);

  // The hours of the store's settings (others are ignored), as of `now`: those older than the
  // window are dropped. A record that cannot be read is skipped, its hour missing.
  void load(const std::vector<KeyedRecord>& settings, Instant now);

  // The most bytes an hour's record may have: one past it is not stored (the samples stay in
  // memory until a restart), so that the history never makes a round too large to commit.
  static constexpr std::size_t kMostRecordBytes = 512 * 1024;

  // When the next sample is due (the first: at once).
  [[nodiscard]] Instant next_sample() const { return next_; }
  // Adds a sample taken at `now` (if due) and writes its hour's record into batch.settings.
  void record(Instant now, const HistoryValues& values, Batch& batch);
  // Records not stored because they were past kMostRecordBytes.
  [[nodiscard]] std::int64_t records_too_large() const { return too_large_; }

  // {"from", "to", "step_s", "interval_s", "series": [{"name", "labels": {...}, "points":
  // [[unix seconds, value], ...]}]}: one point per step that holds samples, the mean of them
  // (absent from a sample: 0), in the units stored. Series in key order.
  [[nodiscard]] nlohmann::json query(const HistoryQuery& q) const;

  [[nodiscard]] Millis interval() const { return interval_; }

 private:
  struct Hour {
    std::vector<std::int64_t> at_ms;
    std::map<std::string, std::vector<std::optional<std::int64_t>>> series;
  };

  [[nodiscard]] std::string record_key(std::int64_t hour) const;
  [[nodiscard]] std::string encode(std::int64_t hour, const Hour& h) const;
  void drop_before(std::int64_t hour);

  Millis interval_;
  std::int64_t hours_kept_;
  Instant next_{};
  std::int64_t too_large_ = 0;
  std::map<std::int64_t, Hour> hours_;  // by the hour's start, Unix seconds
};

}  // namespace tidepool
