// Shared pieces of Tidepool's YAML file readers (the cluster file, the tenants file): positions
// and node descriptions for error messages, a one-document parse that works around a yaml-cpp 0.7
// bug, and YamlReader, the checks of map keys, lists and names that every reader makes.
//
// Errors name the place as "<source>:<line>:<column> <path>", e.g. "c.yaml:3:5 spines[0].name",
// where the path is the dotted key path from the root of the document.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/resources.h"

namespace tidepool {

// The whole content of the file at `path`; fails with "cannot open the file" or "cannot read the
// file" (field: the path).
Result<std::string> read_file_text(const std::string& path);

// Magnitudes too large for any bound a reader checks come back from parse_decimal as this.
inline constexpr std::int64_t kDecimalTooLarge = std::int64_t{1} << 60;

// Parses "123", or with `decimals` > 0 (at most 3) also "12.5", as a non-negative integer in units
// of 10^-decimals ("12.5" with 3 decimals: 12500), by the grammar of core/decimal_text.h; nullopt
// if the text is not such a number (no sign, at most `decimals` digits after the point). A value
// of kDecimalTooLarge units or more comes back as kDecimalTooLarge, so that range checks reject
// it and nothing overflows.
std::optional<std::int64_t> parse_decimal(std::string_view text, int decimals);

// "source:line:column" (1-based) for a mark, or just `source` for a null mark.
std::string yaml_position(const std::string& source, const YAML::Mark& mark);

// What a node is, for "expected X, got Y": "a map", "a list", "'<scalar>'" or "nothing".
std::string yaml_node_kind(const YAML::Node& node);

// Parses `text` as exactly one YAML document. A second document fails at its start, "a second
// YAML document starts here; a <kind> holds one" (kind: e.g. "cluster file"); malformed YAML fails
// with "malformed YAML: ..." at the mark yaml-cpp reports. Documents are counted with a bounded
// number of parser calls rather than YAML::LoadAll, which in yaml-cpp 0.7 loops forever, eating
// memory, on some malformed input such as "- a\n," (jbeder/yaml-cpp#1319).
Result<YAML::Node> parse_one_yaml_document(std::string_view text, const std::string& source,
                                           std::string_view kind);

// Parses one document as above and returns `read(root)`. Exceptions, also those thrown by `read`,
// become errors: yaml-cpp's as "malformed YAML: ...", any other as "cannot read the <kind>: ...".
template <class Read>
auto read_one_yaml_document(std::string_view text, const std::string& source, std::string_view kind,
                            Read read) -> std::invoke_result_t<Read&, const YAML::Node&> {
  try {
    auto root = parse_one_yaml_document(text, source, kind);
    if (!root) return std::unexpected(root.error());
    return read(static_cast<const YAML::Node&>(*root));
  } catch (const YAML::Exception& e) {
    return fail(yaml_position(source, e.mark), "malformed YAML: " + e.msg);
  } catch (const std::exception& e) {
    return fail(source, "cannot read the " + std::string(kind) + ": " + e.what());
  }
}

// The checks a reader of one YAML tree makes, each failing with an error at the node's position
// and the given key path. Readers derive from it (privately) and add their own fields.
class YamlReader {
 public:
  // `source` names the file in errors; it must outlive the reader.
  explicit YamlReader(const std::string& source) : source_(source) {}

 protected:
  // A YAML map's entries in file order.
  struct Entry {
    std::string name;
    YAML::Node key, value;
  };
  using Entries = std::vector<Entry>;
  // A YAML map's values by key.
  struct Fields {
    std::unordered_map<std::string, YAML::Node> values;
    [[nodiscard]] std::optional<YAML::Node> get(const std::string& key) const {
      const auto it = values.find(key);
      if (it == values.end()) return std::nullopt;
      return it->second;
    }
  };

  [[nodiscard]] const std::string& source() const { return source_; }

  // An error at `node`'s position and `path` (omitted when empty).
  std::unexpected<Error> error_at(const YAML::Node& node, const std::string& path,
                                  std::string reason) const;

  // The entries of a map, keys checked to be non-empty names given once.
  Result<Entries> entries(const YAML::Node& node, const std::string& path) const;
  // The values of a map whose keys must be among `known`, checked key by key in file order: the
  // first key that is not a name, is unknown, or repeats an earlier one fails.
  Result<Fields> fields(const YAML::Node& node, const std::string& path,
                        std::initializer_list<std::string_view> known) const;
  // Like fields(), but all keys are first checked as by entries() (names, non-empty, given once),
  // and only then against `known`.
  Result<Fields> entry_fields(const YAML::Node& node, const std::string& path,
                              std::initializer_list<std::string_view> known) const;
  // The value of `key` in `fields` (read from `map`, at `path`), or "the key is missing".
  Result<YAML::Node> required(const Fields& fields, const YAML::Node& map, const std::string& path,
                              const std::string& key) const;
  // `node` if it is a list.
  Result<YAML::Node> sequence(const YAML::Node& node, const std::string& path) const;
  // A non-empty scalar (a name).
  Result<std::string> text(const YAML::Node& node, const std::string& path) const;
  // A scalar's text, to be read as a number ("expected a number, got ..." otherwise).
  Result<std::string> number_text(const YAML::Node& node, const std::string& path) const;
  // A duration as parse_duration reads it ("90s", "15m", "1h30m"), at most `max` seconds.
  Result<Seconds> duration(const YAML::Node& node, const std::string& path, Seconds max) const;
  // A time of day "HH:MM" in seconds: 00:00..23:59, or 00:00..24:00 when `closing` (an end).
  Result<Seconds> time_of_day(const YAML::Node& node, const std::string& path, bool closing) const;
  // The required `name` of the map at `path` (a text()), which must be new to `seen` (name -> path
  // of the map that defined it) and is added to it; a repeat fails with "<what> '<name>' is
  // already defined at <path>".
  Result<std::string> unique_name(const Fields& fields, const YAML::Node& map,
                                  const std::string& path, std::string_view what,
                                  std::unordered_map<std::string, std::string>& seen) const;

 private:
  std::unexpected<Error> unknown_key(const YAML::Node& key, const std::string& path,
                                     std::initializer_list<std::string_view> known) const;

  const std::string& source_;
};

}  // namespace tidepool
