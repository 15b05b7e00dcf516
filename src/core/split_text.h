// Lists written in one string ("a,b,c"), split at a separator.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

namespace tidepool {

// The parts of `text` between `separator`s, empty ones included: "a,,b" -> {"a", "", "b"},
// "a," -> {"a", ""}, "" -> {""}. The parts view `text`. Callers decide what an empty part means
// (an error, or nothing).
[[nodiscard]] inline std::vector<std::string_view> split_text(std::string_view text,
                                                              char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    if (end == text.size()) return parts;
    start = end + 1;
  }
}

}  // namespace tidepool
