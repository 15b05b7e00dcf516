// Plain-text tables for terminal reports: columns padded to their widest cell, numbers right-
// aligned except in the first column, which holds the rows' labels (tenant "7f04ca", "30m").
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tidepool {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // The header and a rule of dashes, then the rows; without `header`, the rows only (the widths
  // then come from the rows alone).
  void print(std::ostream& out, bool header = true) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tidepool
