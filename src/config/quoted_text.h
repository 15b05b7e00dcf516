// Text from outside (a request, a file, a flag) made safe to put into a message: every text these
// functions return is valid UTF-8 of bounded length, so that an error can always be written back
// as JSON or to a terminal. Bytes that are not UTF-8, and control characters, are shown as '?'.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tidepool {

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view text);
// The number of code points in `text` (each byte that does not continue one counts).
std::size_t utf8_length(std::string_view text);

// `text` for a message: at most `max_characters` characters (then "..."), bytes that are not
// UTF-8 and control characters replaced by '?'.
std::string printable(std::string_view text, std::size_t max_characters);
// printable(text, 40), single-quoted.
std::string quote(std::string_view text);
// printable(text, 40), not quoted.
std::string clean(std::string_view text);

}  // namespace tidepool
