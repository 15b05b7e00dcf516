// CSV that Tidepool writes (reports, exports): the quoting of one field.
#pragma once

#include <string>
#include <string_view>

namespace tidepool {

// A field for a CSV file being written: as it is, or quoted (quotes doubled) when it holds a
// comma, a quote or a line break (RFC 4180).
std::string csv_field(std::string_view text);

}  // namespace tidepool
