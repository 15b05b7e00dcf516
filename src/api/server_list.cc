#include "api/server_list.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/split_text.h"

namespace tidepool {
namespace {

std::string_view strip_blanks(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

Result<std::string> normalize_server_url(std::string_view url, const std::string& field) {
  std::string text(strip_blanks(url));
  const auto bad = [&](std::string_view why) {
    return fail(field, fmt::format("'{}' is not a server URL ({}); use e.g. "
                                   "http://127.0.0.1:8470 or https://tidepool.example.com",
                                   text, why));
  };
  if (text.empty()) return bad("it is empty");
  const auto scheme_end = text.find("://");
  if (scheme_end == std::string::npos) {
    text = "http://" + text;
  } else {
    const std::string scheme = text.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
  }
  while (text.ends_with('/')) text.pop_back();
  const std::string rest = text.substr(text.find("://") + 3);
  if (rest.empty() || rest.starts_with(':')) return bad("it has no host");
  if (rest.find_first_of("/?# ") != std::string::npos) {
    return bad("give only scheme, host and port, without a path");
  }
  const auto colon = rest.rfind(':');
  const auto bracket = rest.rfind(']');  // [::1]:8470
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) == 0 ||
        std::stoi(port) > 65535) {
      return bad("the port must be 1..65535");
    }
  }
  return text;
}

Result<std::vector<std::string>> parse_server_list(std::string_view text,
                                                   const std::string& field) {
  std::vector<std::string> servers;
  const bool several = text.find(',') != std::string_view::npos;
  for (const std::string_view part : split_text(text, ',')) {
    const std::string_view entry = strip_blanks(part);
    if (entry.empty() && several) {
      return fail(field, fmt::format("'{}' has an empty entry; give URLs separated by commas, "
                                     "e.g. http://a:8470,http://b:8470",
                                     strip_blanks(text)));
    }
    auto url = normalize_server_url(entry, field);
    if (!url) return std::unexpected(url.error());
    if (std::ranges::find(servers, *url) == servers.end()) servers.push_back(std::move(*url));
    if (servers.size() > kMaxServers) {
      return fail(field, fmt::format("more than {} servers are given; a highly available Tidepool "
                                     "needs only its few servers' URLs",
                                     kMaxServers));
    }
  }
  return servers;
}

std::string join_server_list(const std::vector<std::string>& servers) {
  return fmt::format("{}", fmt::join(servers, ","));
}

}  // namespace tidepool
