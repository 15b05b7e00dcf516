#include "core/gpus_text.h"

#include <fmt/format.h>

#include "core/resources.h"

namespace tidepool {

std::string gpus_number(std::int64_t milli) {
  const bool negative = milli < 0;
  const std::uint64_t magnitude =
      negative ? 0 - static_cast<std::uint64_t>(milli) : static_cast<std::uint64_t>(milli);
  const std::uint64_t whole = magnitude / kMilliPerGpu;
  const std::uint64_t rest = magnitude % kMilliPerGpu;
  std::string number = rest == 0 ? fmt::format("{}", whole) : fmt::format("{}.{:03}", whole, rest);
  while (rest != 0 && number.back() == '0') number.pop_back();
  return negative ? "-" + number : number;
}

std::string gpus_text(std::int64_t milli) {
  return gpus_number(milli) + (milli > 0 && milli <= kMilliPerGpu ? " GPU" : " GPUs");
}

}  // namespace tidepool
