#include "api/body_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "api/job_spec.h"
#include "config/duration_text.h"

namespace tidepool::body_fields {
namespace {

std::string join(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

std::string key_path(const std::string& path, std::string_view key) {
  return path.empty() ? clean(key) : path + "." + clean(key);
}

std::string index_path(const std::string& path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      return "a map";
    case Json::value_t::array:
      return "a list";
    case Json::value_t::string:
      return "the string " + quote(value.get_ref<const std::string&>());
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::null:
      return "null";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "the number " + value.dump();
    default:
      return "binary data";
  }
}

Result<void> check_keys(const Json& value, const std::string& path, std::string_view what,
                        std::initializer_list<std::string_view> known, bool null_is_empty) {
  if (value.is_null() && null_is_empty) return {};
  if (!value.is_object())
    return fail(path, fmt::format("expected {}, got {}", what, describe(value)));
  for (const auto& [key, unused] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return fail(key_path(path, key), "unknown key; expected one of " + join(known));
    }
  }
  return {};
}

const Json* member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<void> first_failure(std::initializer_list<Result<void>> steps) {
  for (const Result<void>& step : steps) {
    if (!step) return step;
  }
  return {};
}

Result<const Json*> required(const Json& object, const std::string& path, std::string_view key) {
  const Json* value = member(object, key);
  if (value == nullptr) return fail(key_path(path, key), "the key is missing");
  return value;
}

Result<std::int64_t> read_integer(const Json& value, const std::string& path, std::int64_t min,
                                  std::int64_t max) {
  const auto out_of_range = [&](const std::string& number) {
    if (max == std::numeric_limits<std::int64_t>::max()) {
      return fail(path, fmt::format("{} is out of range; must be at least {}", number, min));
    }
    return fail(path, fmt::format("{} is out of range {}..{}", number, min, max));
  };
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (number > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        static_cast<std::int64_t>(number) > max || static_cast<std::int64_t>(number) < min) {
      return out_of_range(std::to_string(number));
    }
    return static_cast<std::int64_t>(number);
  }
  if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    if (number < min || number > max) return out_of_range(std::to_string(number));
    return number;
  }
  if (value.is_number_float()) {
    // Past 2^63 a float is what a JSON parser makes of a too-large integer: say it is too large.
    if (const double number = value.get<double>();
        std::isfinite(number) && number == std::trunc(number) && std::fabs(number) >= 0x1p63) {
      return out_of_range(value.dump());
    }
    return fail(path, "expected an integer, got the number " + value.dump() +
                          " (write whole numbers without a decimal point)");
  }
  return fail(path, "expected an integer, got " + describe(value));
}

Result<bool> read_bool(const Json& value, const std::string& path) {
  if (!value.is_boolean()) return fail(path, "expected true or false, got " + describe(value));
  return value.get<bool>();
}

Result<std::string> read_text(const Json& value, const std::string& path, std::size_t max_bytes) {
  if (!value.is_string()) {
    const bool scalar = value.is_number() || value.is_boolean();
    return fail(path, "expected a string, got " + describe(value) +
                          (scalar ? " (quote it to make it a string)" : ""));
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > max_bytes) {
    return fail(path, fmt::format("is {} bytes long; at most {}", text.size(), max_bytes));
  }
  if (!valid_utf8(text)) return fail(path, "is not valid UTF-8");
  if (text.find('\0') != std::string::npos) return fail(path, "must not contain NUL characters");
  return text;
}

Result<std::string> read_short_text(const Json& value, const std::string& path,
                                    std::size_t max_characters) {
  auto text = read_text(value, path, std::numeric_limits<std::size_t>::max());
  if (!text) return text;
  if (const std::size_t length = utf8_length(*text); length > max_characters) {
    return fail(path, fmt::format("is {} characters long; at most {}", length, max_characters));
  }
  return text;
}

Result<std::string> read_name(const Json& value, const std::string& path) {
  if (!value.is_string()) return fail(path, "expected a name, got " + describe(value));
  const auto& name = value.get_ref<const std::string&>();
  if (auto valid = check_name(name); !valid) return fail(path, valid.error().reason);
  return name;
}

Result<std::string> read_word(const Json& value, const std::string& path,
                              std::initializer_list<std::string_view> words) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (std::find(words.begin(), words.end(), text) != words.end()) return text;
  }
  return fail(path, fmt::format("expected one of {}, got {}", join(words), describe(value)));
}

Result<void> check_list(const Json& value, const std::string& path, std::size_t max_items,
                        std::string_view what) {
  if (!value.is_array()) {
    return fail(path, fmt::format("expected a list of {}, got {}", what, describe(value)));
  }
  if (value.size() > max_items) {
    return fail(path, fmt::format("has {} {}; at most {}", value.size(), what, max_items));
  }
  return {};
}

Result<void> check_map(const Json& value, const std::string& path, std::size_t max_entries,
                       std::string_view what) {
  if (!value.is_object()) {
    return fail(path, fmt::format("expected a map of {}, got {}", what, describe(value)));
  }
  if (value.size() > max_entries) {
    return fail(path, fmt::format("has {} {}; at most {}", value.size(), what, max_entries));
  }
  return {};
}

Result<std::int64_t> read_duration_in(const Json& value, const std::string& path, std::int64_t min,
                                      std::int64_t max) {
  std::int64_t seconds = 0;
  if (value.is_string()) {
    auto parsed = parse_duration(value.get_ref<const std::string&>(), max);
    if (!parsed) return fail(path, parsed.error().reason);
    seconds = *parsed;
  } else if (value.is_number()) {
    auto parsed = read_integer(value, path, 0, max);
    if (!parsed) return parsed;
    seconds = *parsed;
  } else {
    return fail(path,
                "expected a duration such as \"30m\" or whole seconds, got " + describe(value));
  }
  if (seconds < min) {
    return fail(path, min == 1 ? std::string("must be longer than 0s")
                               : fmt::format("must be at least {}s", min));
  }
  return seconds;
}

}  // namespace tidepool::body_fields
