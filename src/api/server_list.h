// The servers a client speaks to: one URL, or several of a highly available Tidepool (servers
// sharing one store, one of which leads) given comma-separated wherever a server URL is given
// (--server, $TIDEPOOL_SERVER, the client config file's `server:`, the agent's --server):
//
//   http://a:8470,http://b:8470, http://c:8470
//
// Each URL is http:// or https:// with a host and an optional port (a bare "host:port" means
// http://host:port); white space around the commas is allowed, duplicates are dropped (the first
// is kept), and at most kMaxServers remain. No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

inline constexpr std::size_t kMaxServers = 16;

// Normalizes one server URL: "host:port" gets "http://", a trailing '/' is dropped; anything but
// http(s)://host[:port] fails, naming `field` and the URL.
Result<std::string> normalize_server_url(std::string_view url, const std::string& field);

// The normalized URLs of the comma-separated `text`, in the order given, without duplicates; an
// Error naming `field` and the bad URL when one is not a server URL, when an entry is empty, or
// when more than kMaxServers different URLs are given.
Result<std::vector<std::string>> parse_server_list(std::string_view text, const std::string& field);

// `servers` as one list, "URL" or "URL,URL,...", which parse_server_list reads back.
std::string join_server_list(const std::vector<std::string>& servers);

}  // namespace tidepool
