// The pieces of a request target the API reads, decoded by hand (no I/O): the path matched
// against a route's pattern with its captures %-decoded, and the query string's parameters.
// Any byte sequence is accepted; a decoded text may be invalid UTF-8 (whoever echoes it must
// escape it, see http_error in http_server.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tidepool {

// `text` with each %XX (two hex digits) replaced by its byte; with `plus_as_space`, '+' by a
// space (query strings). A '%' not followed by two hex digits stays as it is.
std::string percent_decode(std::string_view text, bool plus_as_space);

// A query string's parameters, in the order sent. "a=1&b&c=%20" has a="1", b="", c=" ".
class QueryParams {
 public:
  QueryParams() = default;
  explicit QueryParams(std::string_view query);

  [[nodiscard]] bool has(std::string_view name) const;
  // The first value of `name`; empty if there is none.
  [[nodiscard]] std::string get(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

// Matches a raw (still %-encoded) path against `pattern`, where each "{}" segment captures one
// non-empty path segment: "/v1/jobs/{}/why" matches "/v1/jobs/12/why" with the capture "12".
// The captures are %-decoded after the path is split, so "%2F" cannot add a segment. nullopt
// when the path does not match.
std::optional<std::vector<std::string>> match_path(std::string_view pattern, std::string_view path);

}  // namespace tidepool
