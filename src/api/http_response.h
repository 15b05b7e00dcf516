// Reading one HTTP/1.1 response from the bytes received so far (no I/O): the status line, the
// header fields, and a body delimited by Content-Length, by chunked transfer coding, or by the end
// of the connection. The CLI's own small HTTP client (http_connection.h) calls it after every read
// until it answers complete; a malformed or oversized response is an Error naming what was wrong.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tidepool {

// Limits on what a response may hold; past them it is refused, not buffered.
inline constexpr std::size_t kMaxResponseHeaderBytes = 64 * 1024;
inline constexpr std::size_t kMaxResponseBodyBytes = std::size_t{256} * 1024 * 1024;

struct HttpResponse {
  int status = 0;
  // Header fields in arrival order, names as sent.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Whether the server keeps the connection open for another request.
  bool keep_alive = true;

  // The value of the first header field named `name` (compared without case), or nullptr.
  [[nodiscard]] const std::string* header(std::string_view name) const;
};

struct ParsedResponse {
  HttpResponse response;
  std::size_t consumed = 0;  // bytes of the input the response took
};

// The response at the start of `data`, or nullopt when more bytes are needed. `at_end` says the
// peer closed the connection after `data`: a body without a length then ends there, and a
// response still incomplete is an Error. Informational (1xx) responses are skipped.
Result<std::optional<ParsedResponse>> parse_http_response(std::string_view data, bool at_end);

}  // namespace tidepool
