#include "config/yaml_reader.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

#include "config/duration_text.h"
#include "core/decimal_text.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

// Notes where each YAML document starts, and nothing else.
class DocumentStarts final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> marks;
};

}  // namespace

std::optional<std::int64_t> parse_decimal(std::string_view text, int decimals) {
  const auto value = read_decimal(text, {.places = decimals, .max = kDecimalTooLarge - 1});
  if (value) return *value;
  if (value.error() == DecimalError::kTooLarge) return kDecimalTooLarge;
  return std::nullopt;
}

Result<std::string> read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path, "cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(path, "cannot read the file");
  return text.str();
}

std::string yaml_position(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return fmt::format("{}:{}:{}", source, mark.line + 1, mark.column + 1);
}

std::string yaml_node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    default:
      return "nothing";
  }
}

Result<YAML::Node> parse_one_yaml_document(std::string_view text, const std::string& source,
                                           std::string_view kind) {
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    DocumentStarts documents;
    for (int i = 0; i < 2 && parser.HandleNextDocument(documents); ++i) {
    }
    if (documents.marks.size() > 1) {
      return fail(yaml_position(source, documents.marks[1]),
                  "a second YAML document starts here; a " + std::string(kind) + " holds one");
    }
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(yaml_position(source, e.mark), "malformed YAML: " + e.msg);
  }
}

std::unexpected<Error> YamlReader::error_at(const YAML::Node& node, const std::string& path,
                                            std::string reason) const {
  const std::string where = yaml_position(source_, node.Mark());
  return fail(path.empty() ? where : where + " " + path, std::move(reason));
}

std::unexpected<Error> YamlReader::unknown_key(
    const YAML::Node& key, const std::string& path,
    std::initializer_list<std::string_view> known) const {
  std::string names;
  for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
  return error_at(key, path, "unknown key; expected one of " + names);
}

Result<YamlReader::Entries> YamlReader::entries(const YAML::Node& node,
                                                const std::string& path) const {
  if (!node.IsMap()) return error_at(node, path, "expected a map, got " + yaml_node_kind(node));
  Entries result;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // it-> yields a temporary pair: copy the nodes (handles), never bind references to them.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      return error_at(key, path, "a key must be a name, got " + yaml_node_kind(key));
    }
    const std::string where = (path.empty() ? "" : path + ".") + key.Scalar();
    if (key.Scalar().empty()) return error_at(key, where, "a key must not be empty");
    for (const Entry& entry : result) {
      if (entry.name == key.Scalar()) return error_at(key, where, "the key is given twice");
    }
    result.push_back({key.Scalar(), key, value});
  }
  return result;
}

Result<YamlReader::Fields> YamlReader::fields(const YAML::Node& node, const std::string& path,
                                              std::initializer_list<std::string_view> known) const {
  if (!node.IsMap()) return error_at(node, path, "expected a map, got " + yaml_node_kind(node));
  Fields result;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // it-> yields a temporary pair: copy the nodes (handles), never bind references to them.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    const std::string where = path.empty() ? "" : path + ".";
    if (!key.IsScalar()) {
      return error_at(key, path, "a key must be a name, got " + yaml_node_kind(key));
    }
    const std::string& name = key.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return unknown_key(key, where + name, known);
    }
    if (!result.values.emplace(name, value).second) {
      return error_at(key, where + name, "the key is given twice");
    }
  }
  return result;
}

Result<YamlReader::Fields> YamlReader::entry_fields(
    const YAML::Node& node, const std::string& path,
    std::initializer_list<std::string_view> known) const {
  auto list = entries(node, path);
  if (!list) return std::unexpected(list.error());
  Fields result;
  for (const Entry& entry : *list) {
    if (std::find(known.begin(), known.end(), entry.name) == known.end()) {
      return unknown_key(entry.key, (path.empty() ? "" : path + ".") + entry.name, known);
    }
    result.values.emplace(entry.name, entry.value);
  }
  return result;
}

Result<YAML::Node> YamlReader::required(const Fields& fields, const YAML::Node& map,
                                        const std::string& path, const std::string& key) const {
  auto value = fields.get(key);
  if (!value) return error_at(map, path.empty() ? key : path + "." + key, "the key is missing");
  return *value;
}

Result<YAML::Node> YamlReader::sequence(const YAML::Node& node, const std::string& path) const {
  if (!node.IsSequence()) {
    return error_at(node, path, "expected a list, got " + yaml_node_kind(node));
  }
  return node;
}

Result<std::string> YamlReader::text(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) return error_at(node, path, "expected a name, got " + yaml_node_kind(node));
  if (node.Scalar().empty()) return error_at(node, path, "must not be empty");
  return node.Scalar();
}

Result<std::string> YamlReader::unique_name(
    const Fields& fields, const YAML::Node& map, const std::string& path, std::string_view what,
    std::unordered_map<std::string, std::string>& seen) const {
  auto name_node = required(fields, map, path, "name");
  if (!name_node) return std::unexpected(name_node.error());
  auto name = text(*name_node, path + ".name");
  if (!name) return std::unexpected(name.error());
  if (auto [it, added] = seen.emplace(*name, path); !added) {
    return error_at(*name_node, path + ".name",
                    std::string(what) + " '" + *name + "' is already defined at " + it->second);
  }
  return name;
}

Result<std::string> YamlReader::number_text(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) {
    return error_at(node, path, "expected a number, got " + yaml_node_kind(node));
  }
  return node.Scalar();
}

Result<Seconds> YamlReader::duration(const YAML::Node& node, const std::string& path,
                                     Seconds max) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  const auto seconds = parse_duration(*text, max);
  if (!seconds) return error_at(node, path, seconds.error().reason);
  return *seconds;
}

Result<Seconds> YamlReader::time_of_day(const YAML::Node& node, const std::string& path,
                                        bool closing) const {
  const std::string range = closing ? "00:00..24:00" : "00:00..23:59";
  const auto bad = [&] {
    return error_at(
        node, path,
        fmt::format("expected a time of day HH:MM ({}), got {}", range, yaml_node_kind(node)));
  };
  if (!node.IsScalar()) return bad();
  const std::string_view text = node.Scalar();
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2 || text.size() != colon + 3) {
    return bad();
  }
  const auto hours = parse_decimal(text.substr(0, colon), 0);
  const auto minutes = parse_decimal(text.substr(colon + 1), 0);
  if (!hours || !minutes || *minutes > 59 || *hours > 24) return bad();
  const Seconds seconds = *hours * 3600 + *minutes * 60;
  if (seconds > (closing ? kSecondsPerDay : kSecondsPerDay - 1)) return bad();
  return seconds;
}

}  // namespace tidepool
