#include "core/decimal_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

}  // namespace

bool all_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::expected<std::int64_t, DecimalError> read_decimal(std::string_view text,
                                                       const DecimalRules& rules) {
  assert(rules.places >= 0 && rules.places <= 18 && rules.max >= 0);
  const bool negative = text.starts_with('-');
  if (negative) text.remove_prefix(1);
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || !all_digits(whole) || !all_digits(fraction) ||
      (dot != std::string_view::npos && fraction.empty())) {
    return std::unexpected(DecimalError::kNotANumber);
  }
  const auto places = static_cast<std::size_t>(rules.places);
  if (fraction.size() > places && !rules.round_extra) {
    return std::unexpected(DecimalError::kTooManyDecimals);
  }
  // Accumulate in 128 bits and stop once past `max`: leading zeros are read, nothing overflows.
  Int128 value = 0;
  bool too_large = false;
  const auto add_digit = [&](char c) {
    value = value * 10 + (c - '0');
    if (value > rules.max) too_large = true;
  };
  for (char c : whole) {
    add_digit(c);
    if (too_large) break;
  }
  for (std::size_t i = 0; i < places && !too_large; ++i) {
    add_digit(i < fraction.size() ? fraction[i] : '0');
  }
  if (!too_large && fraction.size() > places && fraction[places] >= '5') {
    value += 1;
    too_large = value > rules.max;
  }
  const bool zero = !too_large && value == 0;
  if (negative && !zero && !rules.allow_negative) return std::unexpected(DecimalError::kNegative);
  if (too_large) return std::unexpected(DecimalError::kTooLarge);
  const auto magnitude = static_cast<std::int64_t>(value);
  return negative ? -magnitude : magnitude;
}

std::string format_decimal(std::int64_t value, int places) {
  assert(places >= 0 && places <= 18);
  const bool negative = value < 0;
  const std::uint64_t magnitude = negative ? std::uint64_t{0} - static_cast<std::uint64_t>(value)
                                           : static_cast<std::uint64_t>(value);
  std::uint64_t scale = 1;
  for (int i = 0; i < places; ++i) scale *= 10;
  std::string text = fmt::format("{}{}", negative ? "-" : "", magnitude / scale);
  std::uint64_t fraction = magnitude % scale;
  if (fraction == 0) return text;
  int digits = places;
  while (fraction % 10 == 0) {
    fraction /= 10;
    --digits;
  }
  return text + fmt::format(".{:0{}}", fraction, digits);
}

}  // namespace tidepool
