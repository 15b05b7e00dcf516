#include "core/tidal_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>

namespace tidepool {
namespace {

constexpr std::string_view kExpectedForm =
    "expected class:HH:MM-HH:MM:gpus, e.g. 'inference:08:00-24:00:64'";

// Floor modulo by one day: always 0..86399, also for negative x.
Seconds floor_mod_day(Seconds x) {
  const Seconds r = x % kSecondsPerDay;
  return r < 0 ? r + kSecondsPerDay : r;
}

Seconds time_of_day(Seconds t, Seconds day_offset) {
  return floor_mod_day(floor_mod_day(t) + floor_mod_day(day_offset));
}

bool all_day(const TidalWindow& w) { return w.opens == 0 && w.closes == kSecondsPerDay; }

// The next time >= t (or > t when `strictly`) whose time of day is `boundary` (0..86399).
Seconds next_boundary(Seconds t, Seconds day_offset, Seconds boundary, bool strictly) {
  assert(t >= -kMaxWindowTime && t <= kMaxWindowTime);
  Seconds wait = floor_mod_day(boundary - time_of_day(t, day_offset));
  if (strictly && wait == 0) wait = kSecondsPerDay;
  return t + wait;
}

// "08" -> 8, or -1 unless `text` is all digits (1..max_digits of them).
std::int64_t bounded_digits_value(std::string_view text, std::size_t max_digits) {
  if (text.empty() || text.size() > max_digits) return -1;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// "08:00" -> 28800; hours 0..24 (one or two digits), minutes 00..59, 24 only with 00.
Result<Seconds> parse_clock(std::string_view text, std::string_view what) {
  const auto colon = text.find(':');
  std::int64_t hours = -1;
  std::int64_t minutes = -1;
  if (colon != std::string_view::npos && text.size() - colon - 1 == 2) {
    hours = bounded_digits_value(text.substr(0, colon), 2);
    minutes = bounded_digits_value(text.substr(colon + 1), 2);
  }
  if (hours < 0 || minutes < 0 || hours > 24 || minutes > 59 || (hours == 24 && minutes != 0)) {
    return fail("window", fmt::format("{} time '{}' is not HH:MM (00:00..24:00); {}", what, text,
                                      kExpectedForm));
  }
  return hours * 3600 + minutes * 60;
}

}  // namespace

Result<TidalWindow> make_tidal_window(TidalWindow w) {
  if (w.job_class > JobClass::kBatch) {
    return fail("class", fmt::format("unknown job class #{}", static_cast<int>(w.job_class)));
  }
  if (w.opens < 0 || w.opens >= kSecondsPerDay) {
    return fail("opens", fmt::format("must be 0..{} seconds after midnight, got {}",
                                     kSecondsPerDay - 1, w.opens));
  }
  if (w.closes < 1 || w.closes > kSecondsPerDay) {
    return fail("closes", fmt::format("must be 1..{} seconds after midnight, got {}",
                                      kSecondsPerDay, w.closes));
  }
  if (w.closes == w.opens) {
    return fail("closes", fmt::format("must differ from opens ({}); for a window open all day "
                                      "use 00:00-24:00",
                                      clock_text(w.opens)));
  }
  if (w.gpus < 1 || w.gpus > kMaxWindowGpus) {
    return fail("gpus", fmt::format("must be 1..{} whole GPUs, got {}", kMaxWindowGpus, w.gpus));
  }
  return w;
}

bool window_open(const TidalWindow& w, Seconds t, Seconds day_offset) {
  const Seconds tod = time_of_day(t, day_offset);
  if (w.opens < w.closes) return tod >= w.opens && tod < w.closes;
  return tod >= w.opens || tod < w.closes;  // wraps past midnight
}

Seconds next_window_change(const TidalWindow& w, Seconds t, Seconds day_offset) {
  if (all_day(w)) return kWindowNever;
  return std::min(next_boundary(t, day_offset, w.opens, true),
                  next_boundary(t, day_offset, floor_mod_day(w.closes), true));
}

Seconds next_window_open(const TidalWindow& w, Seconds t, Seconds day_offset) {
  if (all_day(w)) return kWindowNever;
  return next_boundary(t, day_offset, w.opens, false);
}

Seconds next_window_close(const TidalWindow& w, Seconds t, Seconds day_offset) {
  if (all_day(w)) return kWindowNever;
  return next_boundary(t, day_offset, floor_mod_day(w.closes), false);
}

std::string clock_text(Seconds seconds_of_day) {
  assert(seconds_of_day >= 0 && seconds_of_day <= kSecondsPerDay);
  const Seconds hours = seconds_of_day / 3600;
  const Seconds minutes = seconds_of_day / 60 % 60;
  const Seconds seconds = seconds_of_day % 60;
  if (seconds == 0) return fmt::format("{:02}:{:02}", hours, minutes);
  return fmt::format("{:02}:{:02}:{:02}", hours, minutes, seconds);
}

Result<TidalWindow> parse_tidal_window(std::string_view text) {
  // class ':' opens '-' closes ':' gpus; the class ends at the first ':', gpus follow the last.
  const auto class_end = text.find(':');
  const auto dash = text.find('-');
  const auto gpus_start = text.rfind(':');
  if (std::count(text.begin(), text.end(), ':') != 4 || dash == std::string_view::npos ||
      dash < class_end || gpus_start < dash) {
    return fail("window", fmt::format("cannot read '{}'; {}", text, kExpectedForm));
  }
  auto job_class = parse_job_class(text.substr(0, class_end));
  if (!job_class) {
    return fail("window", fmt::format("{}; {}", job_class.error().reason, kExpectedForm));
  }
  auto opens = parse_clock(text.substr(class_end + 1, dash - class_end - 1), "opening");
  if (!opens) return std::unexpected(std::move(opens.error()));
  auto closes = parse_clock(text.substr(dash + 1, gpus_start - dash - 1), "closing");
  if (!closes) return std::unexpected(std::move(closes.error()));
  const std::string_view gpus_text = text.substr(gpus_start + 1);
  const std::int64_t gpus = bounded_digits_value(gpus_text, 7);
  if (gpus < 0) {
    return fail("window", fmt::format("GPU count '{}' is not a whole number 1..{}; {}", gpus_text,
                                      kMaxWindowGpus, kExpectedForm));
  }
  auto window = make_tidal_window(
      TidalWindow{.job_class = *job_class, .opens = *opens, .closes = *closes, .gpus = gpus});
  if (!window) {
    return fail("window",
                fmt::format("{} in '{}'; {}", window.error().message(), text, kExpectedForm));
  }
  return window;
}

std::string describe(const TidalWindow& w) {
  return fmt::format("{} {}-{}, {} {}", job_class_name(w.job_class), clock_text(w.opens),
                     clock_text(w.closes), w.gpus, w.gpus == 1 ? "GPU" : "GPUs");
}

std::int64_t window_held_milli(std::span<const TidalWindow> windows, Seconds t,
                               Seconds day_offset) {
  std::int64_t held = 0;
  for (const TidalWindow& w : windows) {
    if (window_open(w, t, day_offset)) held += w.gpus * kMilliPerGpu;
  }
  return held;
}

}  // namespace tidepool
