#include "sim_cli/seed_list.h"

#include <charconv>
#include <string>

namespace tidepool {
namespace {

Result<std::uint64_t> parse_seed(std::string_view text, std::string_view whole) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
    return fail("--seeds",
                "'" + std::string(whole) + "' is not a seed list such as 42, 42-51 or 1,5,9");
  }
  return value;
}

}  // namespace

Result<std::vector<std::uint64_t>> parse_seed_list(std::string_view text) {
  std::vector<std::uint64_t> seeds;
  const std::string_view whole = text;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const auto dash = item.find('-');
    auto first = parse_seed(item.substr(0, dash), whole);
    if (!first) return std::unexpected(first.error());
    std::uint64_t last = *first;
    if (dash != std::string_view::npos) {
      auto parsed = parse_seed(item.substr(dash + 1), whole);
      if (!parsed) return std::unexpected(parsed.error());
      last = *parsed;
    }
    if (last < *first) return fail("--seeds", "range '" + std::string(item) + "' runs backwards");
    if (last - *first >= 100000)
      return fail("--seeds", "range '" + std::string(item) + "' is too long");
    for (std::uint64_t s = *first;; ++s) {
      seeds.push_back(s);
      if (s == last) break;  // also ends a range that reaches the largest seed
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return seeds;
}

}  // namespace tidepool
