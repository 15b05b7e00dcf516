#include "config/duration_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "config/quoted_text.h"
#include "core/duration_format.h"

namespace tidepool {
namespace {

constexpr std::array<std::pair<char, Seconds>, 4> kUnits = {
    {{'d', 86'400}, {'h', 3'600}, {'m', 60}, {'s', 1}}};

Error not_a_duration(std::string_view text, std::string_view examples) {
  return Error{"", fmt::format("{} is not a duration; use e.g. {} (units d, h, m, s in that "
                               "order, each once) or whole seconds",
                               quote(text), examples)};
}

}  // namespace

Result<Seconds> parse_duration(std::string_view text, Seconds max) {
  const auto bad = [&] { return std::unexpected(not_a_duration(text, "90s, 30m, 6h, 2d, 1h30m")); };
  const auto too_long = [&] {
    return fail("", fmt::format("{} is longer than {}", quote(text), format_duration(max)));
  };
  Seconds total = 0;
  std::size_t next_unit = 0;  // units come in the order of kUnits, each at most once
  std::size_t i = 0;
  if (text.empty()) return bad();
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == start) return bad();
    Seconds number = 0;
    if (std::from_chars(text.data() + start, text.data() + i, number).ec != std::errc()) {
      return too_long();
    }
    Seconds unit = 1;
    if (i < text.size()) {
      const auto found = std::find_if(kUnits.begin() + static_cast<std::ptrdiff_t>(next_unit),
                                      kUnits.end(), [&](auto u) { return u.first == text[i]; });
      if (found == kUnits.end()) return bad();
      unit = found->second;
      next_unit = static_cast<std::size_t>(found - kUnits.begin()) + 1;
      ++i;
    } else if (start != 0) {
      return bad();  // "1h30": a number without a unit after one with
    }
    if (number > max / unit || total + number * unit > max) return too_long();
    total += number * unit;
  }
  return total;
}

Result<std::int64_t> parse_duration_ms(std::string_view text, std::int64_t max_ms) {
  if (text.ends_with("ms")) {
    const std::string_view digits = text.substr(0, text.size() - 2);
    const bool all_digits =
        !digits.empty() &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    std::int64_t ms = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (all_digits && ec == std::errc() && end == digits.data() + digits.size()) {
      if (ms > max_ms) {
        return fail("",
                    fmt::format("{} is longer than {}", quote(text), format_duration_ms(max_ms)));
      }
      return ms;
    }
    return std::unexpected(not_a_duration(text, "500ms, 2s, 30m, 1h30m"));
  }
  auto seconds = parse_duration(text, max_ms / 1000);
  if (!seconds) {
    if (seconds.error().reason.find("is not a duration") != std::string::npos) {
      return std::unexpected(not_a_duration(text, "500ms, 2s, 30m, 1h30m"));
    }
    return std::unexpected(seconds.error());
  }
  return *seconds * 1000;
}

}  // namespace tidepool
