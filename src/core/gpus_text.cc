#include "core/gpus_text.h"

#include "core/decimal_text.h"
#include "core/resources.h"

namespace tidepool {

std::string gpus_number(std::int64_t milli) { return format_decimal(milli, 3); }

std::string gpus_text(std::int64_t milli) {
  return gpus_number(milli) + (milli > 0 && milli <= kMilliPerGpu ? " GPU" : " GPUs");
}

}  // namespace tidepool
