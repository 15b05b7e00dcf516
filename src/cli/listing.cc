#include "cli/listing.h"

#include <set>
#include <sstream>

#include "report/csv_field.h"
#include "report/text_table.h"

namespace tidepool {
namespace {

std::string table_of(const Listing& listing, bool wide, bool headers) {
  std::vector<std::string> header = listing.columns;
  if (wide) header.insert(header.end(), listing.wide_columns.begin(), listing.wide_columns.end());
  TextTable table(std::move(header));
  for (const Listing::Row& row : listing.rows) {
    std::vector<std::string> cells = row.cells;
    if (wide) cells.insert(cells.end(), row.wide.begin(), row.wide.end());
    table.add_row(std::move(cells));
  }
  std::ostringstream out;
  table.print(out, headers);
  return out.str();
}

void append_csv_line(std::string& out, const std::vector<std::string>& head,
                     const std::vector<std::string>& tail) {
  bool first = true;
  for (const auto* part : {&head, &tail}) {
    for (const std::string& cell : *part) {
      if (!first) out += ',';
      out += csv_field(cell);
      first = false;
    }
  }
  out += '\n';
}

}  // namespace

std::string render_listing(const Listing& listing, OutputFormat format, bool headers) {
  switch (format) {
    case OutputFormat::kTable:
    case OutputFormat::kWide:
      return table_of(listing, format == OutputFormat::kWide, headers);
    case OutputFormat::kName: {
      std::string out;
      std::set<std::string, std::less<>> seen;
      for (const Listing::Row& row : listing.rows) {
        if (seen.insert(row.name).second) out += listing.kind + "/" + row.name + "\n";
      }
      return out;
    }
    case OutputFormat::kCsv: {
      std::string out;
      if (headers) append_csv_line(out, listing.columns, listing.wide_columns);
      for (const Listing::Row& row : listing.rows) {
        // A row short of cells still has every field, so that the columns line up.
        std::vector<std::string> cells = row.cells;
        cells.resize(listing.columns.size());
        std::vector<std::string> wide = row.wide;
        wide.resize(listing.wide_columns.size());
        append_csv_line(out, cells, wide);
      }
      return out;
    }
    case OutputFormat::kJson:
    case OutputFormat::kYaml:
      return "";
  }
  return "";
}

}  // namespace tidepool
