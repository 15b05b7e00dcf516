// Parses seed lists given on the command line: "42", "42-51", "1,5,9" or a mix ("1,10-12").
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tidepool {

Result<std::vector<std::uint64_t>> parse_seed_list(std::string_view text);

}  // namespace tidepool
