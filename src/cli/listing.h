// A listing (`tidepool jobs`, `nodes`, `queues`, `tenants`, `token list`) as rows of cells, and
// how each -o form prints it, as kubectl does:
//   table  the listing's columns, padded (--no-headers drops the header and its rule);
//   wide   the same with the listing's extra columns after them;
//   name   one "kind/name" per row ("job/42", "node/h100-a-01"), without repeats;
//   csv    every column, wide ones included, as RFC 4180 CSV (a header line unless --no-headers).
// -o json and -o yaml print the server's reply itself (output_format.h). Pure: builds text.
#pragma once

#include <string>
#include <vector>

#include "cli/output_format.h"

namespace tidepool {

struct Listing {
  struct Row {
    std::vector<std::string> cells;  // one per column
    std::vector<std::string> wide;   // one per wide column
    std::string name;                // what -o name prints after "kind/"
  };
  std::string kind;                       // "job", "node", ...
  std::vector<std::string> columns;       // the table's
  std::vector<std::string> wide_columns;  // shown by -o wide and csv only
  std::vector<Row> rows;
};

// `listing` as `format` says (table, wide, name or csv; json and yaml give ""), with the header
// line unless `headers` is false.
std::string render_listing(const Listing& listing, OutputFormat format, bool headers = true);

}  // namespace tidepool
