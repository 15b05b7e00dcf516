// Tidal windows: capacity protected for one job class during a daily window of time of day, e.g.
// 64 GPUs held for inference from 08:00 to 24:00 while training may use them at night.
//
// Time of day. Scheduler time t is seconds since the clock's origin; its time of day is
// (t + day_offset) mod 86400, taken as a floor modulo, so negative t is handled (t = -1 with offset
// 0 is 23:59:59). day_offset is the time of day of t = 0, 0..86399 (any value works: it is reduced
// modulo 86400 the same way). Functions returning a time require |t| <= kMaxWindowTime so the
// result cannot overflow; this is asserted.
//
// Open interval. A window is open at times of day in [opens, closes) when opens < closes, and in
// [opens, 86400) u [0, closes) when closes < opens (it wraps past midnight). It is open at `opens`
// and closed at `closes`. The one window that never changes is 00:00-24:00 (open all day): it
// never opens nor closes, and the next_window_* functions return kWindowNever for it.
//
// Text form: "inference:08:00-24:00:64" (class:HH:MM-HH:MM:gpus). Hours 0..24 (one or two
// digits), minutes two digits 00..59; 24:00 only as closes.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/job.h"
#include "core/resources.h"

namespace tidepool {

inline constexpr Seconds kSecondsPerDay = 86400;
// The largest |t| the next_window_* functions accept (about 146 billion years).
inline constexpr Seconds kMaxWindowTime = Seconds{1} << 62;
// "Never": returned by next_window_* for a window that never opens or closes (00:00-24:00).
inline constexpr Seconds kWindowNever = std::numeric_limits<Seconds>::max();
// The most GPUs one window may protect.
inline constexpr std::int64_t kMaxWindowGpus = 1'000'000;

// Capacity protected for one job class during a daily window of time of day.
struct TidalWindow {
  JobClass job_class = JobClass::kInference;
  Seconds opens = 8 * 3600;    // seconds after midnight, 0..86399
  Seconds closes = 24 * 3600;  // 1..86400, != opens; when closes < opens the window wraps
  std::int64_t gpus = 0;       // whole GPUs protected for the class while open, 1..kMaxWindowGpus
};

// Checks `w` and returns it unchanged, or an error naming "class", "opens", "closes" or "gpus".
Result<TidalWindow> make_tidal_window(TidalWindow w);

// Whether `w` (valid) is open at scheduler time t.
bool window_open(const TidalWindow& w, Seconds t, Seconds day_offset);

// The first time strictly after t at which the window opens or closes; kWindowNever for
// 00:00-24:00.
Seconds next_window_change(const TidalWindow& w, Seconds t, Seconds day_offset);

// The next time >= t at which the window opens (t itself if it opens exactly at t), and likewise
// closes. A window open at t next opens after it has closed. kWindowNever for 00:00-24:00.
Seconds next_window_open(const TidalWindow& w, Seconds t, Seconds day_offset);
Seconds next_window_close(const TidalWindow& w, Seconds t, Seconds day_offset);

// "08:00", "24:00", "07:30:15" (seconds shown only when not zero). Input 0..86400 (asserted).
std::string clock_text(Seconds seconds_of_day);

// Parses the text form (see the file comment). Errors name field "window", say what is wrong and
// give the expected form; the class is accepted as parse_job_class accepts it.
Result<TidalWindow> parse_tidal_window(std::string_view text);

// "inference 08:00-24:00, 64 GPUs" ("1 GPU" for one).
std::string describe(const TidalWindow& w);

// Milli-GPUs the open windows of `windows` protect at time t.
std::int64_t window_held_milli(std::span<const TidalWindow> windows, Seconds t, Seconds day_offset);

}  // namespace tidepool
