#include "store/etcd_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <utility>

namespace tidepool::etcd_keys {

std::string Layout::job(std::int64_t id) const { return prefix_ + "/jobs/" + padded(id); }
std::string Layout::event(std::int64_t seq) const { return prefix_ + "/events/" + padded(seq); }
std::string Layout::ledger(std::int64_t seq) const { return prefix_ + "/ledger/" + padded(seq); }
std::string Layout::token(std::string_view id) const {
  return fmt::format("{}/tokens/{}", prefix_, id);
}
std::string Layout::node(std::string_view key) const {
  return fmt::format("{}/nodes/{}", prefix_, key);
}
std::string Layout::setting(std::string_view key) const {
  return fmt::format("{}/settings/{}", prefix_, key);
}
std::string Layout::last_event_seq() const { return prefix_ + "/meta/last_event_seq"; }
std::string Layout::last_ledger_seq() const { return prefix_ + "/meta/last_ledger_seq"; }

std::string Layout::job_key_index(std::string_view tenant, std::string_view key) const {
  std::string hex;
  hex.reserve(2 * tenant.size());
  for (const char c : tenant) {
    fmt::format_to(std::back_inserter(hex), "{:02x}", static_cast<unsigned char>(c));
  }
  return fmt::format("{}/index/job_key/{}/{}", prefix_, hex, key);
}

std::string Layout::token_hash_index(std::string_view hash) const {
  return fmt::format("{}/index/token_hash/{}", prefix_, hash);
}

KeyRange Layout::collection(std::string_view name) const {
  std::string begin = fmt::format("{}/{}", prefix_, name);
  std::string end = prefix_end(begin);
  return {std::move(begin), std::move(end)};
}

KeyRange Layout::all() const { return collection(""); }

std::string_view Layout::suffix(const KeyRange& range, std::string_view key) {
  return key.substr(std::min(range.begin.size(), key.size()));
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string padded(std::int64_t number) { return fmt::format("{:020d}", number); }

std::optional<std::int64_t> parse_number(std::string_view text) {
  std::int64_t number = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return number;
}

}  // namespace tidepool::etcd_keys
