#include "server/http_route.h"

#include <algorithm>

namespace tidepool {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

}  // namespace

std::string percent_decode(std::string_view text, bool plus_as_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    out += plus_as_space && c == '+' ? ' ' : c;
  }
  return out;
}

QueryParams::QueryParams(std::string_view query) {
  if (query.empty()) return;
  for (std::string_view part : split(query, '&')) {
    if (part.empty()) continue;
    const auto equals = part.find('=');
    params_.emplace_back(percent_decode(part.substr(0, equals), true),
                         equals == std::string_view::npos
                             ? std::string()
                             : percent_decode(part.substr(equals + 1), true));
  }
}

bool QueryParams::has(std::string_view name) const {
  return std::ranges::any_of(params_, [name](const auto& p) { return p.first == name; });
}

std::string QueryParams::get(std::string_view name) const {
  for (const auto& [key, value] : params_) {
    if (key == name) return value;
  }
  return {};
}

std::optional<std::vector<std::string>> match_path(std::string_view pattern,
                                                   std::string_view path) {
  const auto want = split(pattern, '/');
  const auto have = split(path, '/');
  if (want.size() != have.size()) return std::nullopt;
  std::vector<std::string> captures;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{}") {
      if (have[i].empty()) return std::nullopt;
      captures.push_back(percent_decode(have[i], false));
    } else if (want[i] != have[i]) {
      return std::nullopt;
    }
  }
  return captures;
}

}  // namespace tidepool
