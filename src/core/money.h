// Money and multipliers as integers. Amounts are micro-credits (millionths of the pool's currency
// unit, "credits"), so that sums are exact and a ledger reconciles to the cent and below;
// multipliers (utilisation, time of day, class, shares) are parts per million.
//
// Text forms: money as a decimal with up to 6 places ("12", "12.5", "0.000125", "-3.25");
// money_text writes it with 2 places, rounded half away from zero ("1234.57"). Multipliers and
// ratios likewise ("1.5", "0.8").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tidepool {

using Micros = std::int64_t;  // micro-credits
inline constexpr Micros kMicrosPerUnit = 1'000'000;
// The largest amount a price, budget or cost input may hold (a thousand billion credits): sums of
// millions of them stay far from overflow.
inline constexpr Micros kMaxMoney = Micros{1'000'000'000'000} * kMicrosPerUnit;

using Ppm = std::int64_t;  // a multiplier or share, parts per million
inline constexpr Ppm kPpmOne = 1'000'000;
// The largest multiplier accepted (x1000).
inline constexpr Ppm kMaxMultiplier = 1000 * kPpmOne;

// Amounts accrued exactly before they are posted in whole micro-credits: units of milli-GPU x
// micro-credits per GPU-hour x seconds x ppm (core/charge_meter.h).
__extension__ using ExactAmount = __int128;
inline constexpr ExactAmount kExactPerMicro = ExactAmount{1000} * 3600 * kPpmOne;

// Parses a decimal with up to 6 places and an optional leading '-' (only when `allow_negative`)
// as micro-units: "12.5" -> 12'500'000. Fails, naming `field`, on anything else or a magnitude
// above `max` ("must be a number with at most 6 decimals, like 12.5", "must be at most ...").
Result<std::int64_t> parse_micro_decimal(std::string_view text, const std::string& field,
                                         std::int64_t max, bool allow_negative = false);

// Money: parse_micro_decimal bounded by kMaxMoney.
Result<Micros> parse_money(std::string_view text, const std::string& field);
// A multiplier or share: parse_micro_decimal bounded by kMaxMultiplier.
Result<Ppm> parse_ppm(std::string_view text, const std::string& field);

// "1234.57", "-0.50", "0.00": two decimals, rounded half away from zero.
std::string money_text(Micros amount);
// "1234.567891": every micro-credit shown, trailing zeros dropped ("12.5", "12").
std::string exact_money_text(Micros amount);
// "1.5", "0.8", "1": a ppm value as a decimal, trailing zeros dropped.
std::string ppm_text(Ppm value);
// "80%", "12.5%": a ppm share as a percentage with up to 2 decimals.
std::string percent_text(Ppm share);

// a / b rounded half away from zero, in 128 bits (b > 0; asserted).
ExactAmount div_round(ExactAmount a, ExactAmount b);

// a x b / c rounded half away from zero, computed in 128 bits (c > 0; asserted). The result must
// fit 64 bits (asserted).
std::int64_t mul_div_round(std::int64_t a, std::int64_t b, std::int64_t c);

}  // namespace tidepool
