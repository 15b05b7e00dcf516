// The one grammar of decimal numbers people write (GPU figures, money, shares, factors, trace
// columns) and the one way Tidepool writes them back, exactly, with integers only: a decimal is
// kept as an integer count of 10^-places units ("12.5" with 3 places is 12500).
//
// Grammar: digits, then optionally '.' and at least one digit; a leading '-' where negatives are
// allowed. No '+', no exponent, no spaces, no thousands separators. A negative zero ("-0",
// "-0.0") is zero, and is read even where negatives are not.
#pragma once

#include <cstdint>
#include <expected>
#include <limits>
#include <string>
#include <string_view>

namespace tidepool {

enum class DecimalError {
  kNotANumber,       // not of the grammar above
  kNegative,         // a negative value where none is allowed
  kTooManyDecimals,  // more digits after the point than `places` (and no rounding asked)
  kTooLarge,         // a magnitude above `max`
};

struct DecimalRules {
  int places = 0;  // digits kept after the point, 0..18
  // The largest magnitude read, in units of 10^-places; any number of digits is read without
  // overflow.
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  bool allow_negative = false;
  // More digits after the point than `places`: rounded half up (away from zero) instead of
  // kTooManyDecimals.
  bool round_extra = false;
};

// `text` in units of 10^-rules.places.
std::expected<std::int64_t, DecimalError> read_decimal(std::string_view text,
                                                       const DecimalRules& rules);

// `value` / 10^places with the digits its value needs and no trailing zeros: (12500, 3) -> "12.5",
// (3000, 3) -> "3", (-500, 3) -> "-0.5", (1, 6) -> "0.000001". Exact for every int64 value.
std::string format_decimal(std::int64_t value, int places);

// Whether `text` is ASCII digits 0-9 only (true when it is empty).
bool all_digits(std::string_view text);

}  // namespace tidepool
