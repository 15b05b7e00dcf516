#include "core/duration_format.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace tidepool {
namespace {

constexpr Seconds kMinute = 60;
constexpr Seconds kHour = 3'600;
constexpr Seconds kDay = 86'400;

// `big` in `big_unit`, then `small` in `small_unit` unless it is 0.
std::string two_units(Seconds big, char big_unit, Seconds small, char small_unit) {
  return small == 0 ? fmt::format("{}{}", big, big_unit)
                    : fmt::format("{}{}{}{}", big, big_unit, small, small_unit);
}

}  // namespace

std::string format_duration(Seconds seconds) {
  if (seconds < 0) return fmt::format("{}s", seconds);
  if (seconds == 0) return "0s";
  static constexpr std::array<std::pair<char, Seconds>, 4> kUnits = {
      {{'d', kDay}, {'h', kHour}, {'m', kMinute}, {'s', 1}}};
  std::string out;
  for (const auto& [unit, length] : kUnits) {
    if (seconds >= length) {
      out += fmt::format("{}{}", seconds / length, unit);
      seconds %= length;
    }
  }
  return out;
}

std::string format_duration_ms(std::int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  return format_duration(ms / 1000);
}

std::string format_duration_about(Seconds seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < kMinute) return fmt::format("{}s", seconds);
  if (seconds < 10 * kMinute) return two_units(seconds / kMinute, 'm', seconds % kMinute, 's');
  if (seconds < kHour) return fmt::format("{}m", seconds / kMinute);
  if (seconds < kDay) return two_units(seconds / kHour, 'h', seconds % kHour / kMinute, 'm');
  if (seconds < 8 * kDay) return two_units(seconds / kDay, 'd', seconds % kDay / kHour, 'h');
  return fmt::format("{}d", seconds / kDay);
}

}  // namespace tidepool
