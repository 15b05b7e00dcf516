// A small reader for the comma-separated trace files Tidepool consumes (no quoting: the traces
// have none). Errors name the file, line and column. (Writing CSV: report/csv_field.h.)
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace tidepool {

class CsvReader {
 public:
  // Reads the header line. `source` names the input in error messages.
  static Result<CsvReader> open(std::istream& in, std::string source);

  [[nodiscard]] bool has_column(std::string_view name) const {
    return columns_.contains(std::string(name));
  }
  // Fails naming the missing columns if any of `names` is absent.
  Result<void> require(std::initializer_list<std::string_view> names) const;

  // Advances to the next non-empty line; false at the end of input.
  bool next();
  [[nodiscard]] int line_number() const { return line_number_; }

  // The raw text of `column` in the current row ("" if the row is short or the column absent).
  [[nodiscard]] std::string_view text(std::string_view column) const;
  // The column as an integer; fails with file, line, column and the bad text.
  Result<std::int64_t> integer(std::string_view column) const;
  // As integer(), but an empty field (or absent column) is std::nullopt.
  Result<std::optional<std::int64_t>> optional_integer(std::string_view column) const;
  // "file:line column 'name'" for error messages.
  [[nodiscard]] std::string where(std::string_view column) const;

 private:
  std::istream* in_ = nullptr;
  std::string source_;
  std::unordered_map<std::string, std::size_t> columns_;
  std::string line_;
  std::vector<std::string_view> fields_;
  int line_number_ = 0;
};

// Splits `line` at commas (a trailing '\r' is dropped).
std::vector<std::string_view> split_csv_line(std::string_view line);

}  // namespace tidepool
