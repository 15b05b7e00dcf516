#include "api/http_response.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace tidepool {
namespace {

using Parse = Result<std::optional<ParsedResponse>>;

constexpr std::string_view kCrlf = "\r\n";

bool iequals(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Whether the comma-separated list `value` holds `token` (compared without case).
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// What a printable excerpt of `text` looks like in an error message.
std::string excerpt(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 60)) {
    out += (std::isprint(static_cast<unsigned char>(c)) != 0) ? c : '?';
  }
  return out;
}

Parse bad(std::string reason) {
  return fail("", "the server's reply is not valid HTTP: " + std::move(reason));
}

std::string body_too_large() {
  return fmt::format("its body is larger than {} MiB", kMaxResponseBodyBytes >> 20);
}

Parse cut_off() { return fail("", "the server closed the connection in the middle of its reply"); }

struct Head {
  HttpResponse response;
  int minor_version = 1;
};

// "HTTP/1.1 200 OK" and the header fields of `text` (the head without its final blank line).
Result<Head> parse_head(std::string_view text) {
  Head head;
  const auto line_end = text.find(kCrlf);
  const std::string_view status_line = text.substr(0, line_end);
  if (status_line.size() < 12 || !status_line.starts_with("HTTP/1.") ||
      std::isdigit(static_cast<unsigned char>(status_line[7])) == 0 || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    return fail("", fmt::format("the server's reply is not HTTP/1.x (it starts \"{}\")",
                                excerpt(status_line)));
  }
  head.minor_version = status_line[7] - '0';
  const std::string_view code = status_line.substr(9, 3);
  const auto [end, ec] =
      std::from_chars(code.data(), code.data() + code.size(), head.response.status);
  if (ec != std::errc() || end != code.data() + code.size() || head.response.status < 100) {
    return fail("", fmt::format("the server's reply has no valid status code (\"{}\")",
                                excerpt(status_line)));
  }
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view{} : text.substr(line_end + 2);
  while (!rest.empty()) {
    const auto next = rest.find(kCrlf);
    const std::string_view line = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view{} : rest.substr(next + 2);
    const auto colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos || line.front() == ' ' ||
        line.front() == '\t' || line.substr(0, colon).find_first_of(" \t") != line.npos) {
      return fail(
          "", fmt::format("the server's reply has a malformed header line \"{}\"", excerpt(line)));
    }
    head.response.headers.emplace_back(std::string(line.substr(0, colon)),
                                       std::string(trim(line.substr(colon + 1))));
  }
  return head;
}

// The body of chunked transfer coding at the start of `data`, the bytes it took, or nullopt when
// more are needed.
Result<std::optional<std::pair<std::string, std::size_t>>> parse_chunked(std::string_view data) {
  std::string body;
  std::size_t pos = 0;
  for (;;) {
    const auto line_end = data.find(kCrlf, pos);
    if (line_end == std::string_view::npos) {
      if (data.size() - pos > 1024) return fail("", "a chunk size line is longer than 1 KiB");
      return std::nullopt;
    }
    std::string_view size_text = data.substr(pos, line_end - pos);
    size_text = trim(size_text.substr(0, size_text.find(';')));
    std::uint64_t size = 0;
    const auto [end, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (size_text.empty() || ec != std::errc() || end != size_text.data() + size_text.size()) {
      return fail("", fmt::format("bad chunk size \"{}\"", excerpt(size_text)));
    }
    if (size > kMaxResponseBodyBytes - body.size()) {
      return fail("", body_too_large());
    }
    pos = line_end + 2;
    if (size == 0) {
      // Trailer fields, ignored, up to the blank line.
      for (;;) {
        const auto end_of_line = data.find(kCrlf, pos);
        if (end_of_line == std::string_view::npos) {
          if (data.size() - pos > kMaxResponseHeaderBytes) {
            return fail("", "the trailer is larger than 64 KiB");
          }
          return std::nullopt;
        }
        const bool blank = end_of_line == pos;
        pos = end_of_line + 2;
        if (blank) return std::pair{std::move(body), pos};
      }
    }
    if (data.size() - pos < size + 2) return std::nullopt;
    body.append(data.substr(pos, size));
    pos += size;
    if (data.substr(pos, 2) != kCrlf) return fail("", "a chunk does not end with CRLF");
    pos += 2;
  }
}

}  // namespace

const std::string* HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return &value;
  }
  return nullptr;
}

Parse parse_http_response(std::string_view data, bool at_end) {
  std::size_t start = 0;
  for (;;) {
    const std::string_view rest = data.substr(start);
    const auto head_end = rest.find("\r\n\r\n");
    if (head_end == std::string_view::npos) {
      if (rest.size() > kMaxResponseHeaderBytes) {
        return bad(fmt::format("its header is larger than {} KiB", kMaxResponseHeaderBytes >> 10));
      }
      if (!at_end) return std::nullopt;
      if (rest.empty()) return fail("", "the server closed the connection without a reply");
      return cut_off();
    }
    if (head_end > kMaxResponseHeaderBytes) {
      return bad(fmt::format("its header is larger than {} KiB", kMaxResponseHeaderBytes >> 10));
    }
    auto head = parse_head(rest.substr(0, head_end));
    if (!head) return std::unexpected(head.error());
    const std::size_t body_start = start + head_end + 4;
    HttpResponse& response = head->response;
    if (response.status < 200) {  // 100 Continue and other interim replies
      start = body_start;
      continue;
    }
    const std::string* connection = response.header("Connection");
    response.keep_alive = head->minor_version >= 1
                              ? !(connection != nullptr && has_token(*connection, "close"))
                              : (connection != nullptr && has_token(*connection, "keep-alive"));
    const std::string_view payload = data.substr(body_start);
    auto complete = [&](std::size_t body_bytes) -> Parse {
      return ParsedResponse{std::move(response), body_start + body_bytes};
    };
    if (response.status == 204 || response.status == 304) return complete(0);

    if (const std::string* coding = response.header("Transfer-Encoding"); coding != nullptr) {
      const auto last = coding->rfind(',');
      if (iequals(trim(std::string_view(*coding).substr(last == std::string::npos ? 0 : last + 1)),
                  "chunked")) {
        auto chunked = parse_chunked(payload);
        if (!chunked) return bad(chunked.error().reason);
        if (!*chunked) {
          if (at_end) return cut_off();
          return std::nullopt;
        }
        response.body = std::move((*chunked)->first);
        return complete((*chunked)->second);
      }
    } else if (const std::string* length = response.header("Content-Length"); length != nullptr) {
      std::size_t size = 0;
      const auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), size);
      if (length->empty() || ec != std::errc() || end != length->data() + length->size()) {
        return bad(fmt::format("bad Content-Length \"{}\"", excerpt(*length)));
      }
      for (const auto& [key, value] : response.headers) {
        if (iequals(key, "Content-Length") && value != *length) {
          return bad("two different Content-Length values");
        }
      }
      if (size > kMaxResponseBodyBytes) {
        return bad(body_too_large());
      }
      if (payload.size() < size) {
        if (at_end) return cut_off();
        return std::nullopt;
      }
      response.body.assign(payload.substr(0, size));
      return complete(size);
    }
    // No length: the body runs to the end of the connection.
    if (payload.size() > kMaxResponseBodyBytes) {
      return bad(body_too_large());
    }
    if (!at_end) return std::nullopt;
    response.keep_alive = false;
    response.body.assign(payload);
    return complete(payload.size());
  }
}

}  // namespace tidepool
