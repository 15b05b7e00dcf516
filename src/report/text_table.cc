#include "report/text_table.h"

#include <algorithm>
#include <cctype>

namespace tidepool {
namespace {

bool looks_numeric(const std::string& cell) {
  return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) ||
                           ((cell[0] == '-' || cell[0] == '+') && cell.size() > 1));
}

}  // namespace

void TextTable::print(std::ostream& out, bool header) const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; header && c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells, bool is_header) {
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) out << "  ";
      if (!is_header && c > 0 && looks_numeric(cell)) {
        out << pad << cell;
      } else {
        out << cell << (c + 1 < width.size() ? pad : "");
      }
    }
    out << '\n';
  };
  if (header) {
    line(header_, true);
    std::size_t total = 0;
    for (std::size_t w : width) total += w;
    out << std::string(total + 2 * (width.size() - 1), '-') << '\n';
  }
  for (const auto& row : rows_) line(row, false);
}

}  // namespace tidepool
