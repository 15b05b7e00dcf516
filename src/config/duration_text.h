// Durations as people write them on command lines and in files: "90" (seconds), "90s", "15m",
// "2h", "1d" (a whole number with an optional unit), and back.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/resources.h"

namespace tidepool {

// The seconds `text` stands for, or nullopt when it is not such a duration or is above `max`
// (>= 0). No sign, no decimals, no spaces.
std::optional<Seconds> parse_duration_seconds(std::string_view text, Seconds max);

// "1d", "2h", "90m", "45s": `seconds` (>= 0) in its largest whole unit.
std::string duration_label(Seconds seconds);

}  // namespace tidepool
