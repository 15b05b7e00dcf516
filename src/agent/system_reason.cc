#include "agent/system_reason.h"

#include <fmt/format.h>
#include <string.h>

namespace tidepool {

std::string system_reason(int error) {
  const char* text = ::strerrordesc_np(error);
  return text != nullptr ? text : fmt::format("error {}", error);
}

}  // namespace tidepool
