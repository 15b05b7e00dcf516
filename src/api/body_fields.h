// Checks shared by the readers of request bodies (job_spec.cc, api_bodies.cc): each reads one
// value of a parsed body (nlohmann::json) and fails with an Error whose field is the value's key
// path ("env.PATH", "command[3]") and whose reason says what is wrong and what is allowed.
//
// Every text these functions put into an Error is valid UTF-8 of bounded length: user strings are
// quoted shortened, with bytes that are not UTF-8 or are control characters shown as '?', so that
// an error can always be written back as JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "config/quoted_text.h"
#include "core/error.h"

namespace tidepool::body_fields {

using Json = nlohmann::json;

// The longest string a body may hold (a command word, an env value, a message).
inline constexpr std::size_t kMaxTextBytes = 4096;

// The text helpers of config/quoted_text.h, used by every reader here.
using tidepool::printable;
using tidepool::quote;
using tidepool::utf8_length;
using tidepool::valid_utf8;

// "path.key" ("key" at the root); the key shortened and cleaned as by quote(), without quotes.
std::string key_path(const std::string& path, std::string_view key);
// "path[index]".
std::string index_path(const std::string& path, std::size_t index);
// What a value is, for "expected X, got Y": "a map", "a list", "the string 'x'", "the number
// 1.5", "true", "false" or "null".
std::string describe(const Json& value);

// Checks that `value` is a map (or null, read as an empty map, when `null_is_empty`) whose keys are
// all among `known`; the first unknown key (in key order) fails with "unknown key; expected one of
// ...". `what` names the map in the "expected ..., got ..." reason.
Result<void> check_keys(const Json& value, const std::string& path, std::string_view what,
                        std::initializer_list<std::string_view> known, bool null_is_empty);
// The value of `key` in `object`; nullptr when `object` is not a map, or the key is absent or
// null (a null value means the same as leaving the key out).
const Json* member(const Json& object, std::string_view key);

// An integer in [min, max]: JSON integers (and YAML plain integers) only; "1.5" or 4.0 fail with
// "must be a whole number", strings with "expected an integer", out-of-range values with
// "<value> is out of range <min>..<max>".
Result<std::int64_t> read_integer(const Json& value, const std::string& path, std::int64_t min,
                                  std::int64_t max);
// true or false.
Result<bool> read_bool(const Json& value, const std::string& path);
// A string of at most `max_bytes` bytes, valid UTF-8, without NUL characters.
Result<std::string> read_text(const Json& value, const std::string& path, std::size_t max_bytes);
// As read_text, with the bound in characters (code points) instead of bytes.
Result<std::string> read_short_text(const Json& value, const std::string& path,
                                    std::size_t max_characters);
// A name as check_name (job_spec.h) accepts it.
Result<std::string> read_name(const Json& value, const std::string& path);
// One of `words` (a string): "expected one of a, b, c, got ..." otherwise.
Result<std::string> read_word(const Json& value, const std::string& path,
                              std::initializer_list<std::string_view> words);

// A duration in [min, max] seconds: a string as parse_duration reads it ("30m", "1h30m") or whole
// seconds as an integer.
Result<std::int64_t> read_duration_in(const Json& value, const std::string& path, std::int64_t min,
                                      std::int64_t max);

// A list (JSON array) of at most `max_items` items; `what` names the items ("command words").
Result<void> check_list(const Json& value, const std::string& path, std::size_t max_items,
                        std::string_view what);
// A map (JSON object) of at most `max_entries` entries, whatever its keys; `what` names the
// entries ("env entries").
Result<void> check_map(const Json& value, const std::string& path, std::size_t max_entries,
                       std::string_view what);

// The value of `key` in the map `object` at `path`, or "the key is missing" (also when null).
Result<const Json*> required(const Json& object, const std::string& path, std::string_view key);

// The first failure among `steps` (each the reading of one key, all already done), or success.
Result<void> first_failure(std::initializer_list<Result<void>> steps);

// Reads the key `key` of the map `object` at `path` with `read` (a function of the value and its
// path, returning a Result) into `out`; an absent or null key leaves `out` as it is.
template <class T, class Read>
Result<void> read_optional(const Json& object, const std::string& path, std::string_view key,
                           T& out, Read read) {
  const Json* value = member(object, key);
  if (value == nullptr) return {};
  auto result = read(*value, key_path(path, key));
  if (!result) return std::unexpected(std::move(result).error());
  out = T(std::move(*result));
  return {};
}

// A reader for read_optional: read_integer with the bounds given.
inline auto integer_in(std::int64_t min, std::int64_t max) {
  return [min, max](const Json& value, const std::string& path) {
    return read_integer(value, path, min, max);
  };
}

// A reader for read_optional: read_duration_in with the bounds given.
inline auto duration_in(std::int64_t min, std::int64_t max) {
  return [min, max](const Json& value, const std::string& path) {
    return read_duration_in(value, path, min, max);
  };
}

// A reader for read_optional: read_text with the bound given.
inline auto text_in(std::size_t max_bytes) {
  return [max_bytes](const Json& value, const std::string& path) {
    return read_text(value, path, max_bytes);
  };
}

// A reader for read_optional: read_short_text with the bound given.
inline auto short_text_in(std::size_t max_characters) {
  return [max_characters](const Json& value, const std::string& path) {
    return read_short_text(value, path, max_characters);
  };
}

// The most characters of a short text: a name, a model, a host, a description, a reason.
inline constexpr std::size_t kMaxShortText = 256;

// A reader for read_optional: read_short_text bounded by kMaxShortText.
inline auto short_text() { return short_text_in(kMaxShortText); }

}  // namespace tidepool::body_fields
