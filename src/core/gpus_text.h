// Milli-GPUs as people count them: "16 GPUs", "1.5 GPUs", "1 GPU", "0.5 GPU", "0 GPUs", exactly
// (no rounding). Reasons and errors speak in these, not in milli-GPUs.
#pragma once

#include <cstdint>
#include <string>

namespace tidepool {

std::string gpus_text(std::int64_t milli);
// The number alone: "16", "1.5", "0.25".
std::string gpus_number(std::int64_t milli);

}  // namespace tidepool
