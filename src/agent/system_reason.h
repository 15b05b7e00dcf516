// The text of an errno value, for the agent's error messages.
#pragma once

#include <string>

namespace tidepool {

// strerror's text for `error` ("No such file or directory"), without strerror's shared buffer (the
// agent has threads); "error N" for a value the C library does not know.
std::string system_reason(int error);

}  // namespace tidepool
