// Durations as Tidepool writes them, in the units people write them with: d, h, m, s (and ms).
// config/duration_text.h reads back everything written here except format_duration_about's
// rounded texts, which are for people (ages, waits).
#pragma once

#include <cstdint>
#include <string>

#include "core/resources.h"

namespace tidepool {

// Exact, largest units first and zero parts left out: 0 -> "0s", 90 -> "1m30s", 21600 -> "6h",
// 93784 -> "1d2h3m4s". A negative value (not a duration) is written as e.g. "-5s".
std::string format_duration(Seconds seconds);

// Milliseconds: below a second as "250ms", else the whole seconds as format_duration writes them
// ("1m30s" for 90500). A negative value is written as e.g. "-5ms".
std::string format_duration_ms(std::int64_t ms);

// Rounded down to at most two units, for people, as kubectl writes ages: "45s", "5m30s" (below 10
// minutes), "42m", "1h5m", "2d3h" (below 8 days), "12d". A negative value is written as "0s".
std::string format_duration_about(Seconds seconds);

}  // namespace tidepool
