// The one grammar of durations, in every file, request and flag: a whole number of seconds
// ("90"), or whole numbers with units d, h, m, s, largest first and each at most once ("90s",
// "15m", "2h", "1d", "1h30m", "1d2h3m4s"); with parse_duration_ms also "500ms". No sign, no
// decimals, no spaces. core/duration_format.h writes them (format_duration reads back exactly).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

// The longest duration anything accepts: 10 years.
inline constexpr Seconds kMaxDuration = Seconds{10} * 365 * 86'400;

// The seconds `text` stands for, at most `max` (0 <= max <= kMaxDuration). Fails with a reason
// (the Error's field is empty: the caller knows what it read) that quotes the text and names the
// accepted forms, or the bound.
Result<Seconds> parse_duration(std::string_view text, Seconds max = kMaxDuration);

// The same in milliseconds, with "500ms" accepted too.
Result<std::int64_t> parse_duration_ms(std::string_view text,
                                       std::int64_t max_ms = kMaxDuration * 1000);

}  // namespace tidepool
