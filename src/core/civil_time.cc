#include "core/civil_time.h"

#include <algorithm>
#include <cstddef>

#include "core/decimal_text.h"

namespace tidepool {
namespace {

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(civil_from_days(-1).year == 1969 && civil_from_days(-1).day == 31);

// The digits at [pos, pos + n) of `text` as a number; the caller has checked they are digits.
int digits_at(std::string_view text, std::size_t pos, std::size_t n) {
  int value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) value = value * 10 + (text[i] - '0');
  return value;
}

}  // namespace

std::optional<std::int64_t> parse_utc_date_time(std::string_view text) {
  // "YYYY-MM-DD HH:MM:SS"
  if (text.size() != 19 || text[4] != '-' || text[7] != '-' || text[10] != ' ' || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  for (std::size_t pos : {0, 5, 8, 11, 14, 17}) {
    if (!all_digits(text.substr(pos, pos == 0 ? 4 : 2))) return std::nullopt;
  }
  const int year = digits_at(text, 0, 4);
  const int month = digits_at(text, 5, 2);
  const int day = digits_at(text, 8, 2);
  const int hour = digits_at(text, 11, 2);
  const int minute = digits_at(text, 14, 2);
  const int second = digits_at(text, 17, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) ||
      hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  return days_from_civil(year, month, day) * kSecondsPerCivilDay + hour * 3'600 + minute * 60 +
         second;
}

}  // namespace tidepool
