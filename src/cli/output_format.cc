#include "cli/output_format.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>

#include "core/gpus_text.h"

namespace tidepool {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether a plain YAML scalar `text` could be read as anything but this string: empty, a bool or
// null word (YAML 1.1 or 1.2), something starting like a number, or with YAML syntax around it.
bool needs_quotes(std::string_view text) {
  if (text.empty()) return true;
  static constexpr std::string_view kWords[] = {"true", "false", "yes",   "no",   "on",
                                                "off",  "y",     "n",     "null", "~",
                                                ".inf", "-.inf", "+.inf", ".nan"};
  const std::string word = lower(text);
  if (std::ranges::find(kWords, word) != std::end(kWords)) return true;
  const char first = text.front();
  if (std::isdigit(static_cast<unsigned char>(first)) != 0) return true;
  if ((first == '-' || first == '+' || first == '.') && text.size() > 1 &&
      std::isdigit(static_cast<unsigned char>(text[1])) != 0) {
    return true;
  }
  if (std::isspace(static_cast<unsigned char>(first)) != 0 ||
      std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    return true;
  }
  return false;
}

void emit(YAML::Emitter& out, const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      if (value.empty()) out << YAML::Flow;  // "{}" on the key's line
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key;
        if (needs_quotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      if (value.empty()) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : value) emit(out, item);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      if (needs_quotes(text)) out << YAML::DoubleQuoted;
      out << text;
      break;
    }
    case nlohmann::json::value_t::null:
      out << YAML::Null;
      break;
    default:  // numbers and booleans: their JSON text is valid plain YAML
      out << value.dump();
      break;
  }
}

}  // namespace

std::string_view output_format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::kTable:
      return "table";
    case OutputFormat::kWide:
      return "wide";
    case OutputFormat::kName:
      return "name";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kYaml:
      return "yaml";
    case OutputFormat::kCsv:
      return "csv";
  }
  return "table";
}

std::string output_format_names(std::span<const OutputFormat> formats) {
  std::string out;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    if (i > 0) out += i + 1 == formats.size() ? " or " : ", ";
    out += output_format_name(formats[i]);
  }
  return out;
}

Result<OutputFormat> parse_output_format(std::string_view name, const std::string& field,
                                         std::span<const OutputFormat> allowed) {
  for (OutputFormat format : allowed) {
    if (output_format_name(format) == name) return format;
  }
  return fail(
      field, fmt::format("unknown output format '{}'; use {}", name, output_format_names(allowed)));
}

std::string json_to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  emit(out, value);
  std::string text = out.c_str();
  if (!text.ends_with('\n')) text += '\n';
  return text;
}

void write_document(const nlohmann::json& value, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) {
    out << value.dump(2) << '\n';
  } else if (format == OutputFormat::kYaml) {
    out << json_to_yaml(value);
  }
}

std::string format_gpus(std::int64_t milli) { return gpus_number(milli); }

std::string format_gpu_hours(std::int64_t gpu_seconds) {
  return fmt::format("{:.1f} GPU-h",
                     static_cast<double>(std::max<std::int64_t>(0, gpu_seconds)) / 3600.0);
}

std::string ordinal(std::int64_t n) {
  const std::int64_t tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    switch (n % 10) {
      case 1:
        suffix = "st";
        break;
      case 2:
        suffix = "nd";
        break;
      case 3:
        suffix = "rd";
        break;
      default:
        break;
    }
  }
  return fmt::format("{}{}", n, suffix);
}

std::string format_gpu_value(const nlohmann::json& value, std::string_view null_text) {
  if (value.is_number_integer()) return format_gpus(value.get<std::int64_t>() * 1000);
  if (value.is_number()) return format_gpus(std::llround(value.get<double>() * 1000));
  return std::string(null_text);
}

std::string format_local_time(std::int64_t epoch_ms) {
  if (epoch_ms <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm local{};
  if (localtime_r(&seconds, &local) == nullptr) return fmt::format("{} ms", epoch_ms);
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local) == 0) return "-";
  return text;
}

std::string compress_node_names(std::vector<std::string> names) {
  std::ranges::sort(names);
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // (prefix, digits of the number) -> numbers; width 0: a name without a trailing number.
  std::map<std::pair<std::string, std::size_t>, std::vector<std::int64_t>> groups;
  for (const std::string& name : names) {
    std::size_t start = name.size();
    while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1])) != 0) --start;
    const std::size_t width = name.size() - start;
    if (width == 0 || width > 15) {
      groups[{name, 0}];
      continue;
    }
    groups[{name.substr(0, start), width}].push_back(std::stoll(name.substr(start)));
  }
  std::string out;
  for (auto& [key, numbers] : groups) {
    const auto& [prefix, width] = key;
    if (!out.empty()) out += ',';
    if (width == 0) {
      out += prefix;
      continue;
    }
    std::ranges::sort(numbers);
    const auto number = [w = width](std::int64_t n) { return fmt::format("{:0{}}", n, w); };
    if (numbers.size() == 1) {
      out += prefix + number(numbers[0]);
      continue;
    }
    std::string ranges;
    for (std::size_t i = 0; i < numbers.size();) {
      std::size_t j = i;
      while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
      if (!ranges.empty()) ranges += ',';
      ranges += number(numbers[i]);
      if (j > i) ranges += "-" + number(numbers[j]);
      i = j + 1;
    }
    out += prefix + "[" + ranges + "]";
  }
  return out;
}

namespace {

// One bracket's numbers "01-03,05" as texts of their width; nullopt when malformed.
std::optional<std::vector<std::string>> bracket_numbers(std::string_view inside) {
  std::vector<std::string> out;
  while (true) {
    const std::size_t comma = inside.find(',');
    const std::string_view item = inside.substr(0, comma);
    const std::size_t dash = item.find('-');
    const std::string_view first = item.substr(0, dash);
    const std::string_view last = dash == std::string_view::npos ? first : item.substr(dash + 1);
    const auto digits = [](std::string_view t) {
      return !t.empty() && t.size() <= 15 && std::ranges::all_of(t, [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      });
    };
    if (!digits(first) || !digits(last)) return std::nullopt;
    const std::int64_t from = std::stoll(std::string(first));
    const std::int64_t to = std::stoll(std::string(last));
    if (to < from || to - from >= static_cast<std::int64_t>(kMaxExpandedNodes)) return std::nullopt;
    // The width written first (a leading zero pads; "8-10" is not padded).
    const std::size_t width = first.size() > 1 && first[0] == '0' ? first.size() : 0;
    for (std::int64_t n = from; n <= to; ++n) out.push_back(fmt::format("{:0{}}", n, width));
    if (out.size() > kMaxExpandedNodes) return std::nullopt;
    if (comma == std::string_view::npos) return out;
    inside.remove_prefix(comma + 1);
  }
}

}  // namespace

Result<std::vector<std::string>> expand_node_names(std::string_view text,
                                                   const std::string& field) {
  std::vector<std::string> names;
  std::size_t depth = 0;
  std::size_t start = 0;
  const auto add_item = [&](std::string_view item) -> Result<void> {
    if (item.empty()) {
      return fail(field,
                  fmt::format("'{}' has an empty name (two commas, or one at an end)", text));
    }
    std::vector<std::string> expanded = {""};
    while (!item.empty()) {
      const std::size_t open = item.find('[');
      for (std::string& e : expanded) e += item.substr(0, open);
      if (open == std::string_view::npos) break;
      const std::size_t close = item.find(']', open);
      auto numbers = close == std::string_view::npos
                         ? std::nullopt
                         : bracket_numbers(item.substr(open + 1, close - open - 1));
      if (!numbers) {
        return fail(field, fmt::format("'{}' is not a node list: a bracket holds numbers and "
                                       "ranges such as [01-08,10]",
                                       text));
      }
      if (expanded.size() * numbers->size() > kMaxExpandedNodes) {
        return fail(field, fmt::format("'{}' names more than {} nodes", text, kMaxExpandedNodes));
      }
      std::vector<std::string> next;
      for (const std::string& e : expanded) {
        for (const std::string& n : *numbers) next.push_back(e + n);
      }
      expanded = std::move(next);
      item.remove_prefix(close + 1);
    }
    if (names.size() + expanded.size() > kMaxExpandedNodes) {
      return fail(field, fmt::format("'{}' names more than {} nodes", text, kMaxExpandedNodes));
    }
    names.insert(names.end(), expanded.begin(), expanded.end());
    return {};
  };
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') ++depth;
    if (i < text.size() && text[i] == ']' && depth > 0) --depth;
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      if (auto ok = add_item(text.substr(start, i - start)); !ok) {
        return std::unexpected(ok.error());
      }
      start = i + 1;
    }
  }
  if (depth != 0) return fail(field, fmt::format("'{}' leaves a bracket open", text));
  return names;
}

}  // namespace tidepool
