#include "config/duration_text.h"

#include <charconv>

namespace tidepool {
namespace {
constexpr Seconds kSecondsPerDayText = 86400;
}  // namespace

std::optional<Seconds> parse_duration_seconds(std::string_view text, Seconds max) {
  Seconds unit = 1;
  if (!text.empty() && std::string_view("smhd").find(text.back()) != std::string_view::npos) {
    const char suffix = text.back();
    unit = suffix == 's' ? 1 : suffix == 'm' ? 60 : suffix == 'h' ? 3600 : kSecondsPerDayText;
    text.remove_suffix(1);
  }
  if (text.empty() || text.front() == '+' || text.front() == '-') return std::nullopt;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value > max / unit) {
    return std::nullopt;
  }
  return value * unit;
}

std::string duration_label(Seconds seconds) {
  if (seconds > 0 && seconds % kSecondsPerDayText == 0) {
    return std::to_string(seconds / kSecondsPerDayText) + "d";
  }
  if (seconds > 0 && seconds % 3600 == 0) return std::to_string(seconds / 3600) + "h";
  if (seconds > 0 && seconds % 60 == 0) return std::to_string(seconds / 60) + "m";
  return std::to_string(seconds) + "s";
}

}  // namespace tidepool
