#include "config/csv.h"

#include <charconv>

namespace tidepool {

std::vector<std::string_view> split_csv_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> fields;
  while (true) {
    const auto comma = line.find(',');
    fields.push_back(line.substr(0, comma));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return fields;
}

Result<CsvReader> CsvReader::open(std::istream& in, std::string source) {
  CsvReader reader;
  reader.in_ = &in;
  reader.source_ = std::move(source);
  std::string header;
  if (!std::getline(in, header)) return fail(reader.source_, "the file is empty (no header line)");
  reader.line_number_ = 1;
  const auto names = split_csv_line(header);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!reader.columns_.emplace(std::string(names[i]), i).second) {
      return fail(reader.source_ + ":1", "column '" + std::string(names[i]) + "' appears twice");
    }
  }
  return reader;
}

Result<void> CsvReader::require(std::initializer_list<std::string_view> names) const {
  std::string missing;
  for (std::string_view name : names) {
    if (has_column(name)) continue;
    if (!missing.empty()) missing += ", ";
    missing += name;
  }
  if (missing.empty()) return {};
  return fail(source_ + ":1", "missing column(s): " + missing);
}

bool CsvReader::next() {
  while (std::getline(*in_, line_)) {
    ++line_number_;
    if (line_.empty() || line_ == "\r") continue;
    fields_ = split_csv_line(line_);
    return true;
  }
  return false;
}

std::string_view CsvReader::text(std::string_view column) const {
  auto it = columns_.find(std::string(column));
  if (it == columns_.end() || it->second >= fields_.size()) return {};
  return fields_[it->second];
}

std::string CsvReader::where(std::string_view column) const {
  return source_ + ":" + std::to_string(line_number_) + " column '" + std::string(column) + "'";
}

Result<std::optional<std::int64_t>> CsvReader::optional_integer(std::string_view column) const {
  const std::string_view raw = text(column);
  if (raw.empty()) return std::optional<std::int64_t>{};
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(raw.data(), raw.data() + raw.size(), value);
  if (error != std::errc{} || end != raw.data() + raw.size()) {
    return fail(where(column), "expected an integer, got '" + std::string(raw) + "'");
  }
  return std::optional<std::int64_t>{value};
}

Result<std::int64_t> CsvReader::integer(std::string_view column) const {
  auto value = optional_integer(column);
  if (!value) return std::unexpected(value.error());
  if (!*value) return fail(where(column), "the value is missing");
  return **value;
}

}  // namespace tidepool
