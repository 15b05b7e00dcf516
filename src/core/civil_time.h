// The proleptic Gregorian calendar in UTC, with integers only: days since 1970-01-01 from a civil
// date and back (Howard Hinnant's algorithms, http://howardhinnant.github.io/date_algorithms.html,
// with eras of 400 years of 146097 days), and the date-and-time text the traces and the CLI read.
// Exact for any year, independent of the C library and its time zone.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tidepool {

inline constexpr std::int64_t kSecondsPerCivilDay = 86'400;

struct CivilDate {
  std::int64_t year = 1970;
  int month = 1;  // 1..12
  int day = 1;    // 1..31
};

constexpr std::int64_t days_from_civil(std::int64_t year, int month, int day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const std::int64_t year_of_era = year - era * 400;  // 0..399
  const std::int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;  // 0..146096
  return era * 146097 + day_of_era - 719468;
}

constexpr CivilDate civil_from_days(std::int64_t days) {
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const std::int64_t day_of_era = days - era * 146097;  // 0..146096
  const std::int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const std::int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);  // 0..365
  const std::int64_t mp = (5 * day_of_year + 2) / 153;  // month from March, 0..11
  const int day = static_cast<int>(day_of_year - (153 * mp + 2) / 5 + 1);
  const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return CivilDate{
      .year = year_of_era + era * 400 + (month <= 2 ? 1 : 0), .month = month, .day = day};
}

constexpr bool leap_year(std::int64_t year) {
  return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

// 28..31; `month` is 1..12.
constexpr int days_in_month(std::int64_t year, int month) {
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && leap_year(year) ? 29 : kDays[month - 1];
}

// Seconds since 1970-01-01 00:00:00 of "YYYY-MM-DD HH:MM:SS" read as UTC (years 0001..9999);
// std::nullopt if the text is not exactly of that form or not a valid date and time of day.
std::optional<std::int64_t> parse_utc_date_time(std::string_view text);

}  // namespace tidepool
