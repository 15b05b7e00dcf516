#include "core/money.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;
__extension__ using UInt128 = unsigned __int128;

constexpr std::string_view kNumberForm = "must be a number with at most 6 decimals, like 12.5";

// |value| without overflow, also for the most negative int64.
std::uint64_t magnitude(std::int64_t value) {
  return value < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(value)
                   : static_cast<std::uint64_t>(value);
}

// `value` / 10^`places` as a decimal with every digit of its `places` decimals, then trailing
// zeros (and a bare '.') dropped: 12'500'000 with 6 places -> "12.5".
std::string decimal_text(bool negative, std::uint64_t value, int places) {
  std::uint64_t scale = 1;
  for (int i = 0; i < places; ++i) scale *= 10;
  std::string text = fmt::format("{}{}", negative && value != 0 ? "-" : "", value / scale);
  std::uint64_t fraction = value % scale;
  if (fraction == 0) return text;
  int digits = places;
  while (fraction % 10 == 0) {
    fraction /= 10;
    --digits;
  }
  return text + fmt::format(".{:0{}}", fraction, digits);
}

// |value| / divisor rounded half away from zero (divisor > 0).
std::uint64_t round_magnitude(std::uint64_t value, std::uint64_t divisor) {
  return value / divisor + (value % divisor >= divisor - value % divisor ? 1 : 0);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<std::int64_t> parse_micro_decimal(std::string_view text, const std::string& field,
                                         std::int64_t max, bool allow_negative) {
  assert(max >= 0);
  const std::string_view original = text;
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  // digits ['.' 1..6 digits]: no sign other than the '-' above, no spaces, no exponent.
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  const bool well_formed =
      !whole.empty() && std::all_of(whole.begin(), whole.end(), is_digit) &&
      (dot == std::string_view::npos || (!fraction.empty() && fraction.size() <= 6 &&
                                         std::all_of(fraction.begin(), fraction.end(), is_digit)));
  if (!well_formed) return fail(field, fmt::format("{}, got '{}'", kNumberForm, original));
  if (negative && !allow_negative) {
    return fail(field, fmt::format("must not be negative, got '{}'", original));
  }

  // Accumulate in 128 bits and stop as soon as the value passes `max`: any number of leading
  // zeros is read, and nothing overflows.
  Int128 value = 0;
  bool too_large = false;
  for (char c : whole) {
    value = value * 10 + (c - '0');
    if (value > max) {
      too_large = true;
      break;
    }
  }
  if (!too_large) {
    value *= kMicrosPerUnit;
    Int128 scale = kMicrosPerUnit / 10;
    for (char c : fraction) {
      value += (c - '0') * scale;
      scale /= 10;
    }
    too_large = value > max;
  }
  if (too_large) {
    const std::string bound = decimal_text(false, static_cast<std::uint64_t>(max), 6);
    return fail(field,
                allow_negative
                    ? fmt::format("must be between -{} and {}, got '{}'", bound, bound, original)
                    : fmt::format("must be at most {}, got '{}'", bound, original));
  }
  const auto result = static_cast<std::int64_t>(value);
  return negative ? -result : result;
}

Result<Micros> parse_money(std::string_view text, const std::string& field) {
  return parse_micro_decimal(text, field, kMaxMoney);
}

Result<Ppm> parse_ppm(std::string_view text, const std::string& field) {
  return parse_micro_decimal(text, field, kMaxMultiplier);
}

std::string money_text(Micros amount) {
  const std::uint64_t cents = round_magnitude(magnitude(amount), 10'000);
  // A negative amount that rounds to 0.00 is shown as "0.00", not "-0.00".
  return fmt::format("{}{}.{:02}", amount < 0 && cents != 0 ? "-" : "", cents / 100, cents % 100);
}

std::string exact_money_text(Micros amount) {
  return decimal_text(amount < 0, magnitude(amount), 6);
}

std::string ppm_text(Ppm value) { return decimal_text(value < 0, magnitude(value), 6); }

std::string percent_text(Ppm share) {
  // 1 ppm = 0.0001%: hundredths of a percent are share / 100.
  const std::uint64_t hundredths = round_magnitude(magnitude(share), 100);
  return decimal_text(share < 0, hundredths, 2) + "%";
}

ExactAmount div_round(ExactAmount a, ExactAmount b) {
  assert(b > 0);
  Int128 quotient = a / b;
  const Int128 remainder = a % b;  // takes the sign of a
  const Int128 twice = remainder < 0 ? -2 * remainder : 2 * remainder;
  if (twice >= b) quotient += a < 0 ? -1 : 1;
  return quotient;
}

std::int64_t mul_div_round(std::int64_t a, std::int64_t b, std::int64_t c) {
  const Int128 quotient = div_round(Int128{a} * b, c);
  assert(quotient >= std::numeric_limits<std::int64_t>::min() &&
         quotient <= std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(quotient);
}

}  // namespace tidepool
