#include "cli/time_text.h"

#include <fmt/format.h>

#include <ctime>
#include <optional>

#include "config/duration_text.h"
#include "core/civil_time.h"

namespace tidepool {
namespace {

constexpr Seconds kMaxSpan = 100LL * 365 * 86'400;

// "YYYY-MM-DD", "YYYY-MM-DD HH:MM" or "YYYY-MM-DD HH:MM:SS" as "YYYY-MM-DD HH:MM:SS".
std::optional<std::string> full_timestamp(std::string_view text) {
  std::string out(text);
  if (out.size() > 10 && out[10] == 'T') out[10] = ' ';
  if (out.size() == 10) return out + " 00:00:00";
  if (out.size() == 16) return out + ":00";
  if (out.size() == 19) return out;
  return std::nullopt;
}

// The local time of a UTC reading: mktime decides the offset (daylight saving included).
std::optional<std::int64_t> local_seconds(std::int64_t as_utc) {
  const std::time_t t = static_cast<std::time_t>(as_utc);
  std::tm fields{};
  if (gmtime_r(&t, &fields) == nullptr) return std::nullopt;
  fields.tm_isdst = -1;
  const std::time_t local = std::mktime(&fields);
  if (local == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<std::int64_t>(local);
}

}  // namespace

Result<std::int64_t> parse_time_point(std::string_view text, std::int64_t now_ms,
                                      const std::string& field) {
  const auto refuse = [&] {
    return fail(field, fmt::format("'{}' is not a time: use now, a span ago (2h, now-30m), a day "
                                   "(2026-12-01) or a day and time (2026-12-01T13:30, local; "
                                   "a trailing Z for UTC)",
                                   text));
  };
  if (text == "now") return now_ms;
  std::string_view span = text;
  if (span.starts_with("now-")) span.remove_prefix(4);
  if (auto seconds = parse_duration(span, kMaxSpan)) {
    return now_ms - *seconds * 1000;
  }
  bool utc = false;
  if (text.ends_with('Z') || text.ends_with('z')) {
    utc = true;
    text.remove_suffix(1);
  }
  const auto stamp = full_timestamp(text);
  if (!stamp) return refuse();
  const auto as_utc = parse_utc_date_time(*stamp);
  if (!as_utc) return refuse();
  if (utc) return *as_utc * 1000;
  const auto local = local_seconds(*as_utc);
  if (!local) return refuse();
  return *local * 1000;
}

}  // namespace tidepool
