// libFuzzer target: the CLI's HTTP response reader (api/http_response.h) on arbitrary bytes, as a
// server or something else on the port could send them. It must return a response, "need more",
// or an Error, never throw or crash; a complete response takes no more bytes than it was given
// and holds no more than the limits; the bytes seen so far never make a complete response that
// more bytes would change; errors are short printable text. Built and run by run_fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "api/http_response.h"

namespace {

void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

void check_error(const tidepool::Error& error) {
  check(!error.reason.empty() && error.reason.size() < 512, "an error has a short reason");
  for (const char c : error.reason) {
    check(c >= 0x20 && c < 0x7f, "an error is printable ASCII");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto open = tidepool::parse_http_response(bytes, false);
  const auto closed = tidepool::parse_http_response(bytes, true);
  if (!open) check_error(open.error());
  if (!closed) check_error(closed.error());
  check(!closed || closed->has_value(), "a closed connection leaves nothing to wait for");
  if (open && *open) {
    const auto& parsed = **open;
    check(parsed.consumed <= size, "a response takes no more bytes than it got");
    check(parsed.response.body.size() <= tidepool::kMaxResponseBodyBytes, "the body limit holds");
    check(parsed.response.status >= 200 && parsed.response.status <= 999, "a final status");
    check(closed && *closed && (*closed)->consumed == parsed.consumed &&
              (*closed)->response.body == parsed.response.body,
          "a complete response is the same whether or not the connection closed after it");
    // Every shorter prefix that ends before the response does is incomplete or the same error.
    const std::size_t cut = size == 0 ? 0 : data[0] % (parsed.consumed + 1);
    if (cut < parsed.consumed) {
      const auto prefix = tidepool::parse_http_response(bytes.substr(0, cut), false);
      check(!prefix || !prefix->has_value(), "a prefix of a response is not complete");
    }
  }
  return 0;
}
