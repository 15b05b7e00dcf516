#include "core/money.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>

#include "core/decimal_text.h"

namespace tidepool {
namespace {

__extension__ using Int128 = __int128;

constexpr std::string_view kNumberForm = "must be a number with at most 6 decimals, like 12.5";
constexpr int kMicroPlaces = 6;

// |value| without overflow, also for the most negative int64.
std::uint64_t magnitude(std::int64_t value) {
  return value < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(value)
                   : static_cast<std::uint64_t>(value);
}

// |value| / divisor rounded half away from zero (divisor > 0).
std::uint64_t round_magnitude(std::uint64_t value, std::uint64_t divisor) {
  return value / divisor + (value % divisor >= divisor - value % divisor ? 1 : 0);
}

}  // namespace

Result<std::int64_t> parse_micro_decimal(std::string_view text, const std::string& field,
                                         std::int64_t max, bool allow_negative) {
  assert(max >= 0);
  const auto value =
      read_decimal(text, {.places = kMicroPlaces, .max = max, .allow_negative = allow_negative});
  if (value) return *value;
  switch (value.error()) {
    case DecimalError::kNotANumber:
    case DecimalError::kTooManyDecimals:
      return fail(field, fmt::format("{}, got '{}'", kNumberForm, text));
    case DecimalError::kNegative:
      return fail(field, fmt::format("must not be negative, got '{}'", text));
    case DecimalError::kTooLarge:
      break;
  }
  const std::string bound = format_decimal(max, kMicroPlaces);
  return fail(field, allow_negative
                         ? fmt::format("must be between -{} and {}, got '{}'", bound, bound, text)
                         : fmt::format("must be at most {}, got '{}'", bound, text));
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

std::string exact_money_text(Micros amount) { return format_decimal(amount, kMicroPlaces); }

std::string ppm_text(Ppm value) { return format_decimal(value, kMicroPlaces); }

std::string percent_text(Ppm share) {
  // 1 ppm = 0.0001%: hundredths of a percent are share / 100.
  const std::uint64_t hundredths = round_magnitude(magnitude(share), 100);
  const auto signed_hundredths = static_cast<std::int64_t>(hundredths);
  return format_decimal(share < 0 ? -signed_hundredths : signed_hundredths, 2) + "%";
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
