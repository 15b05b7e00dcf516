// Points in time as people type them on the command line (`tidepool jobs --since`, as sacct's
// --starttime): "now"; a span ago, "2h" or "now-2h" (units of duration_text.h: s, m, h, d);
// a day "2026-12-01" (its midnight); or a day and time "2026-12-01T13:30", "2026-12-01 13:30:15".
// Days and times are local time, as the listings print them, or UTC with a trailing "Z".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tidepool {

// Milliseconds since the epoch of `text`, where `now_ms` is the time now; an Error names `field`
// and the forms accepted.
Result<std::int64_t> parse_time_point(std::string_view text, std::int64_t now_ms,
                                      const std::string& field);

}  // namespace tidepool
