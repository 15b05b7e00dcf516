// Time as the control plane keeps it: whole milliseconds, typed. A Millis is a span of time, an
// Instant a point in Unix time. Both are std::chrono types, so a span cannot be passed where a
// point is expected, nor a bare integer where either is; the conversions to and from the integers
// that the store and the wire carry are the named functions below. Nothing here reads a clock.
#pragma once

#include <chrono>
#include <cstdint>

#include "core/resources.h"

namespace tidepool {

using Millis = std::chrono::milliseconds;
using Instant = std::chrono::sys_time<Millis>;

// The epoch, which the server's records use for "not yet" (no agent registered the node yet, no
// checkpoint reported).
inline constexpr Instant kNotYet{};

// The Instant `ms` milliseconds after the Unix epoch.
[[nodiscard]] constexpr Instant instant_from_unix_ms(std::int64_t ms) {
  return Instant{Millis{ms}};
}

// The Instant at `seconds` of the core's clock (whole seconds of Unix time).
[[nodiscard]] constexpr Instant instant_from_unix_seconds(Seconds seconds) {
  return Instant{std::chrono::seconds{seconds}};
}

// Milliseconds since the Unix epoch, as the store and the wire keep them.
[[nodiscard]] constexpr std::int64_t unix_ms(Instant at) { return at.time_since_epoch().count(); }

// The core's clock (whole seconds of Unix time), truncated toward zero.
[[nodiscard]] constexpr Seconds unix_seconds(Instant at) {
  return std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
}

// A span in the core's whole seconds, truncated toward zero.
[[nodiscard]] constexpr Seconds whole_seconds(Millis span) {
  return std::chrono::duration_cast<std::chrono::seconds>(span).count();
}

// A span of `seconds` core seconds.
[[nodiscard]] constexpr Millis millis_from_seconds(Seconds seconds) {
  return std::chrono::seconds{seconds};
}

}  // namespace tidepool
